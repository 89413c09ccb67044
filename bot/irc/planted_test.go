package irc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/ergochat/irc-go/ircmsg"
)

// TestLongRepliesAndPlantedRedis: text other tools wrote into Redis (a
// job's note and URL, a pipeline's nickname) reaches IRC over ngircd
// split into lines the server accepts, complete, and without any extra
// IRC line smuggled in through CR, LF or NUL.
func TestLongRepliesAndPlantedRedis(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		n := irctest.StartServer(t, kind)
		h, joined := botAmongOn(t, n, "#test", nil, "rita")
		u := joined[0]
		ctx := context.Background()

		const smuggle = "\r\nPRIVMSG #test :x\r\nQUIT :pwned\x00"
		var note strings.Builder
		note.WriteString("START" + smuggle)
		for i := 0; note.Len() < 2000; i++ {
			fmt.Fprintf(&note, " señal-%d-日本", i)
		}
		note.WriteString(" END")
		longURL := "https://example.com/" + strings.Repeat("a", 1900) + smuggle
		rdb := h.rdb
		rdb.HSet(ctx, "plantedjob1", map[string]any{
			"url": "https://example.com/" + smuggle, "started_by": "tool\r\nKICK #test rita", "started_in": "#test",
			"note": note.String(), "pipeline_id": "pipeline:abc", "started_at": "1700000000.5",
			"delay_min": "250", "delay_max": "375", "concurrency": "3",
		})
		rdb.HSet(ctx, "pipeline:abc", map[string]any{"id": "pipeline:abc", "nickname": "evil" + smuggle})
		rdb.HSet(ctx, "plantedjob2", map[string]any{"url": longURL, "started_by": "tool", "started_in": "#test"})
		rdb.LPush(ctx, "pending", "plantedjob2")

		// A 2,000-byte answer in the channel: split, every piece addressed.
		status := u.Ask("ArchiveBot", "#test", "!status plantedjob1")
		whole := strings.Join(status, "")
		if len(status) < 5 {
			t.Errorf("a %d-byte answer came in %d lines", len(whole), len(status))
		}
		if want := cleanText(note.String()); !strings.HasSuffix(whole, want) {
			t.Errorf("note not complete in the answer:\n got …%q\nwant …%q", tail(whole, 200), tail(want, 200))
		}
		// !pending lists the long URL, privately.
		pending := strings.Join(u.Ask("ArchiveBot", "#test", "!pending"), "")
		if want := cleanText(longURL); !strings.Contains(pending, want) {
			t.Errorf("!pending lost part of the URL: %q", tail(pending, 200))
		}
		where := strings.Join(u.Ask("ArchiveBot", "#test", "!whereis plantedjob1"), "")
		if want := cleanText(`Job plantedjob1 is on pipeline "evil` + smuggle + `" (pipeline:abc).`); where != want {
			t.Errorf("!whereis: %q, want %q", where, want)
		}

		// Every line the bot sent was an answer to rita, nothing else.
		msgs := u.Messages(0)
		lines := 0
		for _, m := range msgs {
			if m.Nick() != "ArchiveBot" || m.Command == "JOIN" {
				continue
			}
			lines++
			switch {
			case m.Command != "PRIVMSG" || len(m.Params) != 2:
				t.Errorf("bot sent %s %q", m.Command, m.Params)
			case m.Params[0] == "#test" && !strings.HasPrefix(m.Params[1], "rita: "):
				t.Errorf("channel line not addressed to rita: %q", m.Params[1])
			case m.Params[0] != "#test" && m.Params[0] != "rita":
				t.Errorf("line to %q", m.Params[0])
			}
		}
		t.Logf("%d lines from the bot, longest answer %d bytes in %d lines", lines, len(whole), len(status))
		if !h.client.Connected() || strings.Contains(n.LogText(), "too long") {
			t.Errorf("the bot was disconnected (connected=%v)", h.client.Connected())
		}
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// ircFormatting are the IRC colour and formatting codes: bold, colour, hex
// colour, reset, monospace, reverse, italics, strikethrough, underline.
const ircFormatting = "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f"

// TestFormattingCodesFromRedisStripped: colour and
// formatting codes that pipelines write (a nickname, a job's URL, who
// started it, its note, the channel of a finish notice) never reach the
// channel, whichever reply carries them: !status IDENT, !whereis, !jobs
// and the "[for CHAN]" prefix. Black on black would hide words.
func TestFormattingCodesFromRedisStripped(t *testing.T) {
	t.Parallel()
	_, h, joined := botAmong(t, irctest.NgircdOptions{}, "#test", nil, "rita")
	u := joined[0]
	ctx := context.Background()

	const hide = "\x0301,01hidden\x03"
	h.rdb.HSet(ctx, "colourjob", map[string]any{
		"url": "https://example.com/" + hide, "started_by": "\x02tool\x02", "started_in": "#test",
		"note": "note " + hide + " \x1funder\x1f \x04000000,000000hex\x04", "pipeline_id": "pipeline:abc",
		"started_at": "1700000000.5", "delay_min": "250", "delay_max": "375", "concurrency": "3",
	})
	h.rdb.RPush(ctx, "working", "colourjob")
	h.rdb.HSet(ctx, "pipeline:abc", map[string]any{"id": "pipeline:abc", "nickname": "evil" + hide})
	h.rdb.SAdd(ctx, "pipelines", "pipeline:abc")

	var got []string
	for _, cmd := range []string{"!status colourjob", "!whereis colourjob", "!jobs abc"} {
		r := u.Ask("ArchiveBot", "#test", cmd)
		if len(r) == 0 {
			t.Fatalf("%s: no answer", cmd)
		}
		got = append(got, r...)
	}
	if err := h.client.Announce(ctx, "#vic"+hide+"tim", "x: Your job for https://example.com/ has finished. (abc)"); err != nil {
		t.Fatalf("Announce: %v", err)
	}
	m := u.Expect("the report in #test", func(m ircmsg.Message) bool {
		return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.HasPrefix(m.Params[1], "[for ")
	})
	got = append(got, m.Params[1])
	for _, line := range got {
		if strings.ContainsAny(line, ircFormatting) {
			t.Errorf("formatting codes reached the channel: %q", line)
		}
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"Started by tool.", "Note: note hidden under hex", "evilhidden", "https://example.com/hidden (colourjob)", "[for #vichiddentim]"} {
		if !strings.Contains(all, want) {
			t.Errorf("%q missing from the answers (the text itself stays): %q", want, all)
		}
	}
}

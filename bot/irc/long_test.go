package irc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

// TestLongRepliesAndPlantedRedis: text other tools wrote into Redis (a
// job's note and URL, a pipeline's nickname) reaches IRC over ngircd
// split into lines the server accepts, complete, and without any extra
// IRC line smuggled in through CR, LF or NUL.
func TestLongRepliesAndPlantedRedis(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	u := irctest.Dial(t, n.Addr(), "rita")
	u.Join("#test")
	h := startBot(t, testIRCConfig(n.URL(), "#test"), nil)
	u.WaitBotIn("ArchiveBot", "#test")
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
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// TestUserThrottle: beyond commands_per_minute a user without a rank is
// refused, each refused command is answered saying it was not run, and
// other users are not affected.
func TestUserThrottle(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	calm := irctest.Dial(t, n.Addr(), "calm")
	calm.Join("#test") // first in: the op
	spam := irctest.Dial(t, n.Addr(), "spammer")
	spam.Join("#test")
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.CommandsPerMinute = 3
	startBot(t, cfg, nil)
	spam.WaitBotIn("ArchiveBot", "#test")

	var b strings.Builder
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&b, "PRIVMSG #test :!status spam%d\r\n", i)
	}
	spam.SendRaw(b.String())
	answered := map[int]string{}
	for len(answered) < 6 {
		r := spam.Reply("ArchiveBot", "#test")
		// Combined answers are separated by " | ".
		for _, part := range strings.Split(r, " | ") {
			for i := 0; i < 6; i++ {
				if strings.Contains(part, fmt.Sprintf("spam%d", i)) {
					answered[i] = part
				}
			}
		}
	}
	for i := 0; i < 6; i++ {
		if refused := strings.Contains(answered[i], "not run"); refused != (i >= 3) {
			t.Errorf("command %d: %q (refused %v)", i, answered[i], refused)
		}
	}
	if r := strings.Join(calm.Ask("ArchiveBot", "#test", "!status"), ""); !strings.HasPrefix(r, "Job status:") {
		t.Errorf("another user: %q", r)
	}
}

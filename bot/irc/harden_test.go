package irc

import (
	"context"
	"strings"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

// ircFormatting are the IRC colour and formatting codes: bold, colour, hex
// colour, reset, monospace, reverse, italics, strikethrough, underline.
const ircFormatting = "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f"

// TestFormattingCodesFromRedisStripped (issue 18, finding 14): colour and
// formatting codes that pipelines write (a nickname, a job's URL, who
// started it, its note, the channel of a finish notice) never reach the
// channel, whichever reply carries them: !status IDENT, !whereis, !jobs
// and the "[for CHAN]" prefix. Black on black would hide words.
func TestFormattingCodesFromRedisStripped(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	u := irctest.Dial(t, n.Addr(), "rita")
	u.Join("#test")
	h := startBot(t, testIRCConfig(n.URL(), "#test"), nil)
	u.WaitBotIn("ArchiveBot", "#test")
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

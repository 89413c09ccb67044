package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestE2EForeignChannel (issue 9, finding 1): a finish notice a pipeline
// wrote with started_in "#victim" is reported in our channel, saying it
// was meant for #victim, and acknowledged; the bot never joins #victim,
// so #victim's operator cannot run !a or !fail through it.
func TestE2EForeignChannel(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#ours"
		mallory := irctest.Dial(t, irc.Addr(), "mallory")
		mallory.Join("#victim") // first in: op there
		op, voice, _ := rolesIn(t, irc, ch)
		startNode(t, nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t))
		op.WaitBotIn(botNick, ch)

		url, id := identOf(t, "https://example.com/e2e/victim")
		if r := ask(voice, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		pushNotice(t, rdb, notice("mallory", "#victim", "https://example.com/e2e/planted"))
		_, planted := identOf(t, "https://example.com/e2e/planted")
		want := fmt.Sprintf("[for #victim] mallory: Your job for https://example.com/e2e/planted has finished. (%s)", planted)
		op.Expect("the report in "+ch, fromBot(ch, textIs(want)))
		for _, key := range []string{keyNotices, keyProcessing} {
			testproc.Eventually(t, key+" to be empty", func() bool {
				n, err := rdb.LLen(ctx, key).Result()
				return err == nil && n == 0
			})
		}

		// #victim's op tries the bot from there, then asks privately: the
		// bot runs one user's commands in order.
		mallory.Say("#victim", "!a https://example.com/e2e/evil")
		mallory.Say("#victim", "!fail "+id)
		if r := mallory.Ask(botNick, "", "!status"); len(r) != 1 || !strings.HasPrefix(r[0], "Job status:") {
			t.Errorf("private answers: %q", r)
		}
		if got := rdb.LRange(ctx, "pending", 0, -1).Val(); len(got) != 1 || got[0] != id {
			t.Errorf("pending = %v, want only vera's job %s", got, id)
		}
		if rdb.Exists(ctx, id).Val() != 1 {
			t.Error("vera's job was failed from #victim")
		}
		for _, m := range mallory.Messages(0) {
			if strings.HasPrefix(m.Nick(), botNick) && (m.Command == "JOIN" || (m.Command == "PRIVMSG" && len(m.Params) > 0 && m.Params[0] == "#victim")) {
				t.Errorf("the bot in #victim: %s %q", m.Command, m.Params)
			}
		}
		mallory.Send("NAMES #victim")
		names := mallory.Expect("NAMES #victim", func(m ircmsg.Message) bool { return m.Command == "353" })
		if strings.Contains(names.Params[len(names.Params)-1], botNick) {
			t.Errorf("the bot is in #victim: %q", names.Params)
		}
	})
}

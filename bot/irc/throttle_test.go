package irc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/store"
)

// The per-user command throttle (commands_per_minute) over a real ngircd.

// TestUserThrottle: beyond commands_per_minute a user without a rank is
// refused, each refused command is answered saying it was not run, and
// other users are not affected.
func TestUserThrottle(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, kind string) {
		_, joined := botAmongOn(t, irctest.StartServer(t, kind), "#test", func(cfg *config.IRC) { cfg.CommandsPerMinute = 3 }, "calm", "spammer")
		calm, spam := joined[0], joined[1] // calm, first in, is the op

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
	})
}

// TestThrottleAnswersEveryCommand: at the
// default throttle and outbox rate, a voiced user's !a and 40 !ig sent at
// once are all applied and all answered.
func TestThrottleAnswersEveryCommand(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	op := irctest.Dial(t, n.Addr(), "opal")
	op.Join("#test")
	vera := irctest.Dial(t, n.Addr(), "vera")
	vera.Join("#test")
	op.Send("MODE #test +v vera")
	vera.Expect("+v", isMode("#test", "+v", "vera"))
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.MessagesPerSecond, cfg.Burst, cfg.CommandsPerMinute = 1, 3, 20 // the defaults
	h := startBot(t, cfg, nil)
	vera.WaitBotIn("ArchiveBot", "#test")
	vera.Mark()

	_, id, err := ident.FromURL("https://example.com/cleanup")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("PRIVMSG #test :!a https://example.com/cleanup\r\n")
	const patterns = 40
	for i := range patterns {
		fmt.Fprintf(&b, "PRIVMSG #test :!ig %s p%03dz\r\n", id, i)
	}
	vera.SendRaw(b.String())

	// Every pattern is answered, in some line addressed to vera.
	for i := range patterns {
		p := fmt.Sprintf("p%03dz", i)
		vera.SetPos(0)
		vera.ExpectWithin(90*time.Second, "answer for "+p, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.HasPrefix(m.Params[1], "vera: ") && strings.Contains(m.Params[1], p)
		})
	}
	applied := 0
	for i := range patterns {
		if h.rdb.SIsMember(context.Background(), store.KeyIgnores(id), fmt.Sprintf("p%03dz", i)).Val() {
			applied++
		}
	}
	if applied != patterns {
		t.Errorf("%d patterns applied, want %d", applied, patterns)
	}
	lines := botLinesTo(vera, 0, "#test")
	for _, l := range lines {
		if strings.Contains(l, "slow down") {
			t.Errorf("a voiced user was throttled: %q", l)
		}
	}
	t.Logf("!a + %d !ig: %d lines in the channel:\n%s", patterns, len(lines), strings.Join(lines, "\n"))
}

// TestThrottleRefusalsSaid: a user without a
// rank over the limit is refused, and every refusal is said; nothing
// promises an answer that does not come.
func TestThrottleRefusalsSaid(t *testing.T) {
	t.Parallel()
	// "first" takes the op.
	_, _, joined := botAmong(t, irctest.NgircdOptions{}, "#test", func(cfg *config.IRC) { cfg.CommandsPerMinute = 3 }, "first", "spammer")
	spam := joined[1]
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, "PRIVMSG #test :!status spam%d\r\n", i)
	}
	spam.SendRaw(b.String())
	for i := range 8 {
		w := fmt.Sprintf("spam%d", i)
		spam.SetPos(0)
		m := spam.Expect("answer about "+w, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.Contains(m.Params[1], w)
		})
		for _, part := range strings.Split(m.Params[1], " | ") {
			if strings.Contains(part, w) && (i >= 3) != strings.Contains(part, "not run") {
				t.Errorf("command %d: %q, want a refusal naming it only beyond the limit", i, part)
			}
		}
	}
	for _, l := range botLinesTo(spam, 0, "#test") {
		if strings.Contains(l, "answer again") {
			t.Errorf("a promise: %q", l)
		}
	}
}

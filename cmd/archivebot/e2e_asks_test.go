package main

// The new commands (!history, !ignoresets, !jobs, !useragent, !move) over
// the real IRC server as op, voiced and plain user, in the channel and in
// private: every refusal and every bad input answers with its reason and
// leaves Redis exactly as it was; the allowed calls change only what they
// say.

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

func TestE2EQueueToolsMatrix(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#asks"
		_, cfg, op, voice, plain := channelWithRoles(t, b, ch)
		startChild(t, cfg)
		plain.WaitBotIn(botNick, ch)
		url, id := identOf(t, "https://example.com/asks/queued")
		if got := ask(op, ch, "!a "+url); !strings.Contains(got, "Queued") {
			t.Fatalf("!a: %q", got)
		}
		p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "askpipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		dump := func() map[string]redistest.Entry {
			d, err := redistest.Dump(ctx, rdb)
			if err != nil {
				t.Fatal(err)
			}
			delete(d, "archivebot:test:dbcounter")
			return d
		}
		users := map[string]*irctest.User{"op": op, "voice": voice, "plain": plain}
		type call struct {
			who, where, text, want string
		}
		const (
			needOp    = "only channel operators may"
			needVoice = "only channel operators or voiced users may"
			inChannel = "use it in a channel"
		)
		// Calls that must change nothing, as each rank and in each place.
		var refusals []call
		for who := range users {
			refusals = append(refusals,
				call{who, "", "!useragent " + id + " firefox", inChannel},
				call{who, "", "!move " + id + " front", inChannel},
				call{who, ch, "!history nosuchjob", "no history of nosuchjob"},
				call{who, "", "!history nosuchjob", "no history of nosuchjob"},
				call{who, ch, "!jobs nosuchpipe", "no pipeline is called nosuchpipe"},
				call{who, "", "!jobs askpipe", "working on no job"},
				call{who, ch, "!ignoresets", "Known ignore sets: "},
				call{who, "", "!ignoresets", "Known ignore sets: "},
				call{who, ch, "!history", "Usage: !history IDENT"},
			)
		}
		refusals = append(refusals,
			call{"plain", ch, "!useragent " + id + " firefox", needVoice},
			call{"plain", ch, "!move " + id + " front", needOp},
			call{"voice", ch, "!move " + id + " front", needOp},
			call{"voice", ch, "!useragent " + id + " netscape", `user agent "netscape"`},
			call{"voice", ch, "!useragent " + id, "Usage: !useragent"},
			call{"op", ch, "!move " + id + " sideways", "Usage: !move"},
			call{"op", ch, "!move " + id + " pending-ao", "recursive jobs stay in"},
			call{"op", ch, "!move " + id + " pending", "already in pending"},
			call{"op", ch, "!move nosuchjob back", "don't know anything about nosuchjob"},
		)
		before := dump()
		for _, c := range refusals {
			got := ask(users[c.who], c.where, c.text)
			if !strings.Contains(got, c.want) {
				t.Errorf("%s as %s in %q: %q, want %q", c.text, c.who, c.where, got, c.want)
			}
			if diff := cmp.Diff(before, dump()); diff != "" {
				t.Fatalf("%s as %s in %q changed Redis:\n%s", c.text, c.who, c.where, diff)
			}
		}
		// Allowed: each changes what it says, and only that.
		if got := ask(voice, ch, "!useragent "+id+" firefox"); !strings.Contains(got, "will use user-agent") {
			t.Errorf("!useragent as voice: %q", got)
		}
		if ua, _ := rdb.HGet(ctx, id, "user_agent").Result(); !strings.Contains(ua, "Firefox") {
			t.Errorf("user_agent %q", ua)
		}
		if got := ask(op, ch, "!move "+id+" pending:askpipe"); !strings.Contains(got, "to the back of pending:askpipe") {
			t.Errorf("!move as op: %q", got)
		}
		if q, _ := rdb.LRange(ctx, "pending:askpipe", 0, -1).Result(); !cmp.Equal(q, []string{id}) {
			t.Errorf("pending:askpipe = %q", q)
		}
		if n, _ := rdb.LLen(ctx, store.KeyPending).Result(); n != 0 {
			t.Errorf("pending still holds %d", n)
		}
		if q, _ := rdb.HGet(ctx, store.KeyOrigin(id), "queue").Result(); q != "pending:askpipe" {
			t.Errorf("origin queue %q", q)
		}
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take from pending:askpipe: %v %v", j, err)
		}
		if got := ask(plain, "", "!jobs askpipe"); !strings.Contains(got, "working on 1 job: "+url+" ("+id+")") {
			t.Errorf("!jobs in private: %q", got)
		}
		got := strings.Join(plain.Ask(botNick, "", "!history "+id), "\n")
		for _, w := range []string{"queued by opal", "useragent by vera", "moved by opal: pending -> pending:askpipe"} {
			if !strings.Contains(got, w) {
				t.Errorf("!history lacks %q: %q", w, got)
			}
		}
	})
}

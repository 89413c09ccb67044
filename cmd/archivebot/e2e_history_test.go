package main

// Job history and the queue tools over the real IRC server, with Redis
// checked after each step.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestE2EHistory drives one job through queue, three settings changes by
// two users, start, abort and finish over IRC; !history in private lists
// every step with who did it, in the channel the last five; the list gets
// the aborted job's TTL.
func TestE2EHistory(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#history"
		_, cfg, op, voice, plain := channelWithRoles(t, b, ch)
		startChild(t, cfg)
		plain.WaitBotIn(botNick, ch)
		url, id := identOf(t, "https://example.com/history")
		history := func() []string {
			es, err := store.NewStore(rdb).History(ctx, id, 100)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range es {
				out = append(out, e.Event+" by "+e.By)
			}
			return out
		}
		step := func(u *irctest.User, text, reply, field, want string) {
			t.Helper()
			if got := ask(u, ch, text); !strings.Contains(got, reply) {
				t.Fatalf("%s: %q, want %q", text, got, reply)
			}
			if field != "" {
				if v, _ := rdb.HGet(ctx, id, field).Result(); v != want {
					t.Fatalf("after %s: %s = %q, want %q", text, field, v, want)
				}
			}
		}
		step(voice, "!a "+url, "Queued", "started_by", "vera")
		step(voice, "!d "+id+" 100 200", "set to [100, 200] ms", "delay_max", "200")
		step(op, "!con "+id+" 5", "5 workers", "concurrency", "5")
		step(op, "!useragent "+id+" firefox", "will use user-agent", "", "")
		if ua, _ := rdb.HGet(ctx, id, "user_agent").Result(); !strings.Contains(ua, "Firefox") {
			t.Fatalf("user_agent %q", ua)
		}
		step(op, "!move "+id+" pending-large", "to the back of pending-large", "", "")
		if n, _ := rdb.LLen(ctx, store.KeyPendingLarge).Result(); n != 1 {
			t.Fatalf("pending-large holds %d", n)
		}
		step(op, "!move "+id+" pending", "to the back of pending", "", "")
		p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "histpipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take: %v %v", j, err)
		}
		plain.Expect("start line", fromBot(ch, startLineOf(id, "histpipe")))
		step(plain, "!jobs histpipe", "working on 1 job: "+url+" ("+id+")", "", "")
		step(op, "!useragent "+id+" firefox", "already started", "", "")
		step(voice, "!abort "+id, "bort", "abort_requested", "true")
		if err := j.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		plain.Expect("finish line", fromBot(ch, isFinishOf(id)))
		pk := p.Key()
		want := []string{"queued by vera", "settings by vera", "settings by opal", "useragent by opal",
			"moved by opal", "moved by opal", "started by " + pk, "aborted by vera", "aborted by " + pk}
		testproc.Eventually(t, "the finish recorded in the history", func() bool { return len(history()) == len(want) })
		if got := history(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("history %q, want %q", got, want)
		}
		priv := plain.Ask(botNick, "", "!history "+id)
		if len(priv) != len(want)+1 {
			t.Errorf("private !history: %d lines, want %d: %q", len(priv), len(want)+1, priv)
		}
		for i, w := range want {
			if i+1 < len(priv) && !strings.Contains(priv[i+1], w) {
				t.Errorf("private !history line %d %q, want %q", i+1, priv[i+1], w)
			}
		}
		if inCh := plain.Ask(botNick, ch, "!history "+id); len(inCh) != 6 || !strings.Contains(inCh[5], "aborted by "+pk) {
			t.Errorf("channel !history: %q", inCh)
		}
		ttl, _ := rdb.TTL(ctx, store.KeyHistory(id)).Result()
		if ttl <= store.HistoryEndedTTL-time.Minute || ttl > store.HistoryEndedTTL {
			t.Errorf("history TTL %v, want about %v", ttl, store.HistoryEndedTTL)
		}
		if b.Mini != nil {
			b.Mini.FastForward(store.HistoryEndedTTL + time.Second)
			if n, _ := rdb.Exists(ctx, store.KeyHistory(id), store.KeyOrigin(id)).Result(); n != 0 {
				t.Error("history and origin records outlived their TTL")
			}
			if got := ask(plain, ch, "!history "+id); !strings.Contains(got, "no history") {
				t.Errorf("!history after expiry: %q", got)
			}
		}
	})
}

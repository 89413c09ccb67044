package main

// The queue tools and job history (!history, !ignoresets, !jobs,
// !useragent, !move) over the real IRC server, with the control node as a
// real process.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestE2EQueueToolsMatrix runs the commands as op, voiced and plain user,
// in the channel and in private: every refusal and every bad input
// answers with its reason and leaves Redis exactly as it was; the allowed
// calls change only what they say.
func TestE2EQueueToolsMatrix(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#asks"
		op, voice, plain := childInChannel(t, b, ch)
		url, id := identOf(t, "https://example.com/asks/queued")
		if got := ask(op, ch, "!a "+url); !strings.Contains(got, "Queued") {
			t.Fatalf("!a: %q", got)
		}
		p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "askpipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		dump := func() map[string]redistest.Entry {
			d := b.Dump(t)
			delete(d, "archivebot:test:dbcounter")
			// The pipeline notifier's own bookkeeping, written when it
			// sees askpipe connect, whenever its cycle comes: not a
			// command's change.
			delete(d, store.KeyPipelineNotices)
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
				call{who, ch, "!ignoresets", "Known ignore sets (built into the node, not upstream's): "},
				call{who, "", "!ignoresets", "Known ignore sets (built into the node, not upstream's): "},
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

// TestE2EHistory drives one job through queue, three settings changes by
// two users, start, abort and finish over IRC; !history in private lists
// every step with who did it, in the channel the last five; the list gets
// the aborted job's TTL.
func TestE2EHistory(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		rdb := b.Client
		const ch = "#history"
		op, voice, plain := childInChannel(t, b, ch)
		url, id := identOf(t, "https://example.com/history")
		history := func() []string {
			es, err := s.History(ctx, id, 100)
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

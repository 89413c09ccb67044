package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// sayAs runs text as nick (folded as key) and returns the replies.
func sayAs(b *Bot, nick, key string, rank Rank, channel, text string) []string {
	rec := &recorder{nick: nick}
	b.Handle(context.Background(), Request{Nick: nick, NickKey: key, Channel: channel, Rank: rank, Text: text}, rec)
	return rec.replies
}

func urlIdent(t *testing.T, raw string) string {
	t.Helper()
	_, id, err := ident.FromURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestQueueToolsBadInput: every malformed or refused call of the new
// commands answers with the reason and changes nothing in Redis.
func TestQueueToolsBadInput(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		say(b, RankOp, "#a", "!ao http://ao.example.com/")
		id, ao := refIdent, urlIdent(t, "http://ao.example.com/")
		p := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "runner"})
		if err := p.Report(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		say(b, RankOp, "#a", "!a http://running.example.com/")
		if err := be.Client.LRem(context.Background(), store.KeyPending, 0, id).Err(); err != nil {
			t.Fatal(err)
		}
		running, err := p.Take(context.Background())
		if err != nil || running == nil {
			t.Fatalf("take: %v", err)
		}
		be.Client.LPush(context.Background(), store.KeyPending, id)
		before := be.Dump(t)
		cases := []struct{ text, want string }{
			{"!history", "Usage: !history IDENT"},
			{"!history NOT-AN-IDENT", "Usage: !history"},
			{"!history a b", "Usage: !history"},
			{"!history nosuchjob", "no history of nosuchjob"},
			{"!ignoresets now", "Usage: !ignoresets"},
			{"!jobs", "Usage: !jobs PIPELINE"},
			{"!jobs nosuchpipe", "no pipeline is called nosuchpipe"},
			{"!useragent " + id, "Usage: !useragent"},
			{"!useragent " + id + " netscape", `user agent "netscape"`},
			{"!useragent nosuchjob firefox", "don't know anything about nosuchjob"},
			{"!useragent " + running.Ident + " firefox", "already started"},
			{"!move " + id, "Usage: !move"},
			{"!move " + id + " sideways", "Usage: !move"},
			{"!move " + id + " pending:a*b", "pipeline name 'a*b'"},
			{"!move " + id + " pending-ao", "recursive jobs stay in"},
			{"!move " + ao + " pending-large", "!ao jobs in pending-ao"},
			{"!move " + id + " pending", "already in pending"},
			{"!move nosuchjob front", "don't know anything about nosuchjob"},
			{"!move " + running.Ident + " front", "already started"},
			{"!a http://new.example.com/ --notify-start --no-notify-start", "contradict"},
		}
		for _, c := range cases {
			got := say(b, RankOp, "#a", c.text)
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Errorf("%q: replies %q, want one containing %q", c.text, got, c.want)
			}
			if diff := cmp.Diff(before, be.Dump(t)); diff != "" {
				t.Fatalf("%q changed Redis:\n%s", c.text, diff)
			}
		}
	})
}

// TestQueueTools: the commands' effects, with Redis checked after each.
func TestQueueTools(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		b := newTestBot(t, be)
		say(b, RankOp, "#a", "!a http://one.example.com/")
		say(b, RankOp, "#a", "!a http://two.example.com/")
		one, two := urlIdent(t, "http://one.example.com/"), urlIdent(t, "http://two.example.com/")
		queue := func(q string) []string { v, _ := be.Client.LRange(ctx, q, 0, -1).Result(); return v }

		got := say(b, RankOp, "#a", "!move "+two+" front")
		if !strings.Contains(got[0], "front of pending") || !cmp.Equal(queue("pending"), []string{one, two}) {
			t.Errorf("front: %q, pending %q", got, queue("pending"))
		}
		got = say(b, RankOp, "#a", "!move "+two+" pending:fast")
		if !strings.Contains(got[0], "to the back of pending:fast") || !cmp.Equal(queue("pending:fast"), []string{two}) ||
			!cmp.Equal(queue("pending"), []string{one}) {
			t.Errorf("to pending:fast: %q", got)
		}
		if q, _ := be.Client.HGet(ctx, store.KeyOrigin(two), "queue").Result(); q != "pending:fast" {
			t.Errorf("origin queue %q", q)
		}

		got = say(b, RankVoice, "#a", "!useragent "+one+" firefox")
		ua, _ := be.Client.HGet(ctx, one, "user_agent").Result()
		if !strings.Contains(got[0], "will use user-agent") || !strings.Contains(ua, "Firefox") {
			t.Errorf("useragent: %q, user_agent %q", got, ua)
		}

		got = say(b, RankNone, "#a", "!ignoresets")
		if !strings.Contains(got[0], "blogs") || !strings.Contains(got[0], "forums") {
			t.Errorf("ignoresets: %q", got)
		}

		p := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "worker"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"worker", p.Key(), strings.TrimPrefix(p.Key(), "pipeline:")} {
			got = say(b, RankNone, "#a", "!jobs "+name)
			if len(got) != 1 || !strings.Contains(got[0], "working on 1 job: http://one.example.com/ ("+one+")") {
				t.Errorf("!jobs %s: %q", name, got)
			}
		}
		got = say(b, RankNone, "", "!history "+one)
		want := []string{"queued by carol", "useragent by carol"}
		if len(got) != 3 || !strings.Contains(got[1], want[0]) || !strings.Contains(got[2], want[1]) {
			t.Errorf("!history: %q", got)
		}
	})
}

// TestHistoryLimits: the channel gets the last 5 entries, a private
// message up to 30.
func TestHistoryLimits(t *testing.T) {
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	say(b, RankOp, "#a", "!a http://example.com/")
	for i := 0; i < 40; i++ {
		say(b, RankOp, "#a", fmt.Sprintf("!con %s %d", refIdent, i%9+1))
	}
	if got := say(b, RankNone, "#a", "!history "+refIdent); len(got) != 6 || !strings.Contains(got[5], "concurrency=") {
		t.Errorf("channel: %d lines %q", len(got), got)
	}
	if got := say(b, RankNone, "", "!history "+refIdent); len(got) != 31 {
		t.Errorf("private: %d lines", len(got))
	}
}

// TestPerUserPendingLimit: a voiced user may have at most the limit of
// jobs queued, nicks compared folded (the front end's CASEMAPPING); the
// refusal says how many are queued and writes nothing; ops are exempt.
func TestPerUserPendingLimitCommand(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := New(store.New(be.Client), Options{Catalog: referenceCatalog(t), PerUserPendingLimit: 2})
		sayAs(b, "Dan[x]", "dan{x}", RankVoice, "#a", "!a http://d1.example.com/")
		sayAs(b, "DAN{X}", "dan{x}", RankVoice, "#a", "!ao http://d2.example.com/")
		before := be.Dump(t)
		got := sayAs(b, "dan[x]", "dan{x}", RankVoice, "#a", "!a http://d3.example.com/")
		if len(got) != 1 || !strings.Contains(got[0], "you already have 2 jobs queued") {
			t.Errorf("third job: %q", got)
		}
		if diff := cmp.Diff(before, be.Dump(t)); diff != "" {
			t.Errorf("refusal changed Redis:\n%s", diff)
		}
		got = sayAs(b, "eve", "eve", RankVoice, "#a", "!a http://e1.example.com/")
		if !strings.Contains(got[0], "Queued") {
			t.Errorf("another nick: %q", got)
		}
		got = sayAs(b, "dan[x]", "dan{x}", RankOp, "#a", "!a http://d3.example.com/")
		if !strings.Contains(got[0], "Queued") {
			t.Errorf("as op: %q", got)
		}
	})
}

// TestFailedJobStatus: once a failed job's record has expired (5 s),
// !status IDENT still says that it failed, why and who failed it.
func TestFailedJobStatus(t *testing.T) {
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	say(b, RankOp, "#a", "!a http://example.com/")
	say(b, RankOp, "#a", "!fail "+refIdent)
	be.FastForward(6 * time.Second)
	got := say(b, RankNone, "#a", "!status "+refIdent)
	if len(got) != 1 || !strings.Contains(got[0], "Failed: failed by carol") {
		t.Errorf("status of a failed job: %q", got)
	}
	got = say(b, RankNone, "#a", "!status http://example.com/")
	if len(got) != 1 || !strings.Contains(got[0], "Failed: failed by carol") {
		t.Errorf("status of a failed URL: %q", got)
	}
}

// TestNotifyStartOption: the origin record says whether a job's start is
// announced: !a by default (notifier.start_notices), !ao only when asked.
func TestNotifyStartOption(t *testing.T) {
	be := redistest.Mini(t)
	b := New(store.New(be.Client), Options{Catalog: referenceCatalog(t), StartNotices: true})
	for _, c := range []struct{ text, url, want string }{
		{"!a http://n1.example.com/", "http://n1.example.com/", "1"},
		{"!a http://n2.example.com/ --no-notify-start", "http://n2.example.com/", "0"},
		{"!ao http://n3.example.com/", "http://n3.example.com/", "0"},
		{"!ao http://n4.example.com/ --notify-start", "http://n4.example.com/", "1"},
	} {
		say(b, RankOp, "#a", c.text)
		got, _ := be.Client.HGet(context.Background(), store.KeyOrigin(urlIdent(t, c.url)), "notify_start").Result()
		if got != c.want {
			t.Errorf("%s: notify_start %q, want %q", c.text, got, c.want)
		}
	}
}

// TestFailureStatus: the failed-job line says why, who or what failed it,
// and the pipeline it was reaped with.
func TestFailureStatus(t *testing.T) {
	f := &record.Failure{Ident: "abc", URL: "http://x/", Reason: "no heartbeat for 2h0m", FailedBy: "reaper",
		FailedAt: 1796000000, Queue: "working", Job: map[string]string{"started_by": "alice", "pipeline_id": "pipeline:1"},
		Extra: map[string]string{"pipeline": "crashy"}}
	want := `Job abc <http://x/>. Started by alice. Failed: no heartbeat for 2h0m (reaped by the death timer with its pipeline "crashy", pipeline:1), at 2026-11-30 00:53:20Z, while in working.`
	if got := failureStatus(f); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// One history entry is "the last step", not "the last 1 steps".
func TestHistoryOneStep(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		got := say(b, RankNone, "#a", "!history "+refIdent)
		if len(got) < 1 || !strings.Contains(got[0], "the last step (") || strings.Contains(got[0], "1 steps") {
			t.Fatalf("!history with one entry: %q", got)
		}
	})
}

// Counted words take their singular for one.
func TestPluralWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{workers(1), "1 worker"}, {workers(3), "3 workers"},
		{lastSteps(1), "the last step"}, {lastSteps(5), "the last 5 steps"},
		{plural(0, "job", "jobs"), "jobs"}, {plural(1, "job", "jobs"), "job"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Right after !fail (while the job record still exists) !status says who
// failed the job and when, as it does once only the failure record is left.
func TestStatusRightAfterFail(t *testing.T) {
	eachWithJob(t, " --explain=why", func(t *testing.T, be *redistest.Backend, b *Bot) {
		say(b, RankOp, "#a", "!fail "+refIdent)
		for _, arg := range []string{refIdent, "http://example.com/"} {
			got := say(b, RankNone, "#a", "!status "+arg)
			if len(got) != 1 || !strings.Contains(got[0], "failed by carol") || !strings.Contains(got[0], ", at 20") ||
				!strings.Contains(got[0], "Note: why") {
				t.Fatalf("!status %s right after !fail: %q", arg, got)
			}
		}
	})
}

package tweeter_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// lookups counts the job lookups (HGETALL) each key gets.
type lookups struct {
	mu sync.Mutex
	n  map[string]int
}

func countLookups(c *redis.Client) *lookups {
	l := &lookups{n: map[string]int{}}
	c.AddHook(l)
	return l
}

func (l *lookups) get(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

func (l *lookups) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *lookups) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "hgetall" && len(args) == 2 {
			l.mu.Lock()
			l.n[args[1].(string)]++
			l.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (l *lookups) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *rig) job(t *testing.T, ident string, fields ...string) {
	t.Helper()
	if err := r.c.HSet(context.Background(), ident, fields).Err(); err != nil {
		t.Fatal(err)
	}
}

// wantQueued checks the texts in tweets:queue, oldest first.
func (r *rig) wantQueued(t *testing.T, texts ...string) {
	t.Helper()
	if diff := cmp.Diff(texts, r.members(t, store.KeyTweetsQueue)); diff != "" {
		t.Errorf("tweets:queue (-want +got):\n%s", diff)
	}
}

func TestCheckJob(t *testing.T) {
	const url = "https://example.com/"
	running := []string{"url", url, "started_at", "1700000000.25", "pipeline_id", "pipeline:x", "heartbeat", "3"}
	tests := []struct {
		name   string
		fields []string // nil: no record
		seed   []string // texts already in tweets:done
		queued []string
		// remembered: a second check does not look the job up again.
		remembered bool
	}{
		{name: "running", fields: running, queued: []string{"Archiving " + url}, remembered: true},
		{name: "queued, not started", fields: []string{"url", url, "queued_at", "1"}},
		{name: "no record", remembered: true},
		{name: "finished", fields: append([]string{"finished_at", "1700000100"}, running...), remembered: true},
		{name: "aborted", fields: append([]string{"aborted", "true"}, running...), remembered: true},
		{name: "abort requested", fields: append([]string{"abort_requested", "true"}, running...), remembered: true},
		{name: "aborted before start", fields: []string{"url", url, "aborted", "true", "abort_requested", "true", "finished_at", "1"}, remembered: true},
		{name: "failed", fields: append([]string{"failed", "true"}, running...), remembered: true},
		{name: "already posted", fields: running, seed: []string{"Archiving " + url}, remembered: true},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				r := newRig(t, b, tweeter.Config{})
				ident := "tweeterjob" + b.Name
				if tc.fields != nil {
					r.job(t, ident, tc.fields...)
				}
				for _, s := range tc.seed {
					r.c.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: 1, Member: s})
				}
				n := countLookups(r.c)
				for range 2 {
					if err := r.tw.CheckJob(ctx, ident); err != nil {
						t.Fatal(err)
					}
				}
				if diff := cmp.Diff(tc.queued, r.members(t, store.KeyTweetsQueue), cmpEmpty); diff != "" {
					t.Errorf("tweets:queue (-want +got):\n%s", diff)
				}
				want := 2
				if tc.remembered {
					want = 1
				}
				if got := n.get(ident); got != want {
					t.Errorf("job looked up %d times in two checks, want %d", got, want)
				}
			})
		}
	})
}

// Each job is looked up once, not on every log line; memory of handled jobs
// is bounded by age and count.
func TestCheckJobLooksUpOnce(t *testing.T) {
	eachRig(t, tweeter.Config{SeenTTL: time.Hour, SeenMax: 2}, func(t *testing.T, r *rig, ctx context.Context) {
		n := countLookups(r.c)
		check := func(ident string) {
			t.Helper()
			if err := r.tw.CheckJob(ctx, ident); err != nil {
				t.Fatal(err)
			}
		}
		// Not started yet: looked up on each update until it is.
		r.job(t, "jobA", "url", "https://a.example/")
		check("jobA")
		check("jobA")
		r.job(t, "jobA", "started_at", "1", "pipeline_id", "pipeline:x")
		for range 100 {
			check("jobA")
		}
		if got := n.get("jobA"); got != 3 {
			t.Errorf("jobA looked up %d times, want 3", got)
		}
		// After SeenTTL, once more; still queued once.
		r.now = r.now.Add(time.Hour + time.Second)
		check("jobA")
		check("jobA")
		if got := n.get("jobA"); got != 4 {
			t.Errorf("jobA looked up %d times after SeenTTL, want 4", got)
		}
		// SeenMax 2: handling two more forgets jobA.
		check("jobB")
		check("jobC")
		check("jobA")
		if got := n.get("jobA"); got != 5 {
			t.Errorf("jobA looked up %d times after two others, want 5", got)
		}
		r.wantQueued(t, "Archiving https://a.example/")
	})
}

func TestSweep(t *testing.T) {
	eachRig(t, tweeter.Config{}, func(t *testing.T, r *rig, ctx context.Context) {
		r.job(t, "jobrun", "url", "https://run.example/", "started_at", "1")
		r.job(t, "jobabort", "url", "https://abort.example/", "started_at", "1", "abort_requested", "true")
		r.c.LPush(ctx, store.KeyWorking, "jobrun", "jobabort", "jobgone")
		if err := r.tw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		r.wantQueued(t, "Archiving https://run.example/")
	})
}

// A string key listed in `working` must not make every sweep fail: it is
// skipped, logged once, and the other jobs are still tweeted.
func TestBadKey_StringJobInWorking(t *testing.T) {
	eachRig(t, tweeter.Config{}, func(t *testing.T, r *rig, ctx context.Context) {
		r.job(t, "jobrun", "url", "https://run.example/", "started_at", "1")
		r.c.Set(ctx, "strjob", "x", 0)
		r.c.LPush(ctx, store.KeyWorking, "strjob", "jobrun")
		for i := 0; i < 3; i++ {
			if err := r.tw.Sweep(ctx); err != nil {
				t.Errorf("sweep %d: %v", i+1, err)
			}
		}
		r.wantQueued(t, "Archiving https://run.example/")
		n := 0
		for _, l := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(l, "strjob") && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("strjob logged %d times, want once", n)
		}
	})
}

func TestPrune(t *testing.T) {
	eachRig(t, tweeter.Config{}, func(t *testing.T, r *rig, ctx context.Context) {
		day := 24 * time.Hour
		at := func(d time.Duration) float64 { return float64(r.now.Add(-d).Unix()) }
		r.c.ZAdd(ctx, store.KeyTweetsDone,
			redis.Z{Score: at(31 * day), Member: "Archiving https://old.example/"},
			redis.Z{Score: at(29 * day), Member: "Archiving https://recent.example/"})
		r.c.ZAdd(ctx, store.KeyTweetsFailed, redis.Z{Score: at(40 * day), Member: "Archiving https://failed.example/"})
		got, err := r.tw.Prune(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(store.PrunedTweets{Done: 1, Failed: 1}, got); diff != "" {
			t.Errorf("pruned (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"Archiving https://recent.example/"}, r.members(t, store.KeyTweetsDone)); diff != "" {
			t.Errorf("tweets:done (-want +got):\n%s", diff)
		}
		// Two days later the other one is 31 days old.
		r.now = r.now.Add(2 * day)
		if _, err := r.tw.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if got := r.members(t, store.KeyTweetsDone); len(got) != 0 {
			t.Errorf("tweets:done after 31 days = %q, want empty", got)
		}
	})
}

// chanPoster reports each post on a channel.
type chanPoster struct{ posts chan post }

type post struct {
	text string
	at   time.Time
}

func (p chanPoster) Post(_ context.Context, text string) error {
	p.posts <- post{text, time.Now()}
	return nil
}

func waitPost(t *testing.T, posts <-chan post) post {
	t.Helper()
	select {
	case p := <-posts:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("nothing posted within 10s")
	}
	return post{}
}

// The running service: updates lead to posts, Delay apart, and Stop ends
// every loop.
func TestStartStop(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		p := chanPoster{posts: make(chan post, 10)}
		const delay = 100 * time.Millisecond
		r := newRig(t, b, tweeter.Config{Poster: p, Interval: 5 * time.Millisecond, Delay: delay, SweepInterval: -1, Now: time.Now})
		r.tw.Start(ctx)
		t.Cleanup(r.tw.Stop)

		r.job(t, "jobstart1", "url", "https://one.example/", "started_at", "1")
		r.job(t, "jobstart2", "url", "https://two.example/", "started_at", "1")
		for range 50 {
			r.tw.JobUpdated(ctx, "jobstart1")
		}
		first := waitPost(t, p.posts)
		r.tw.JobUpdated(ctx, "jobstart2")
		second := waitPost(t, p.posts)
		if first.text != "Archiving https://one.example/" || second.text != "Archiving https://two.example/" {
			t.Errorf("posted %q then %q", first.text, second.text)
		}
		if gap := second.at.Sub(first.at); gap < delay {
			t.Errorf("posts %v apart, want at least %v", gap, delay)
		}

		// A lost message: the sweep, woken on (re)subscription, finds it.
		r.job(t, "jobstart3", "url", "https://three.example/", "started_at", "1")
		r.c.LPush(ctx, store.KeyWorking, "jobstart3")
		r.tw.SweepSoon(ctx)
		if third := waitPost(t, p.posts); third.text != "Archiving https://three.example/" {
			t.Errorf("posted %q", third.text)
		}

		r.tw.Stop()
		want := []string{"Archiving https://one.example/", "Archiving https://two.example/", "Archiving https://three.example/"}
		if diff := cmp.Diff(want, r.members(t, store.KeyTweetsDone), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("tweets:done (-want +got):\n%s", diff)
		}
		select {
		case extra := <-p.posts:
			t.Errorf("posted %q again", extra.text)
		default:
		}
	})
}

// Without credentials the feed drains into tweets:done and logs each text.
func TestDryRun(t *testing.T) {
	eachRig(t, tweeter.Config{}, func(t *testing.T, r *rig, _ context.Context) {
		if !r.tw.DryRun() {
			t.Fatal("no credentials, yet not a dry run")
		}
		r.queue(t, text1)
		if out := r.runOnce(t); out != tweeter.Posted {
			t.Errorf("RunOnce = %v, want posted", out)
		}
		r.wantState(t, "", state{Done: []string{text1}})
		if log := r.log.String(); !strings.Contains(log, "would post") || !strings.Contains(log, "example.com") {
			t.Errorf("dry run did not log the text:\n%s", log)
		}
	})
}

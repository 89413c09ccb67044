package pipelinesim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

var t0 = time.Unix(1_800_000_000, 250_000_000)

func fixedNow() time.Time { return t0 }

// queue puts a minimal job record on queue, as the bot would.
func queue(t *testing.T, c *redis.Client, id, queue string) {
	t.Helper()
	ctx := context.Background()
	err := c.HSet(ctx, id, "url", "http://"+id+".example/", "fetch_depth", "inf", "log_key", id+"_log",
		"ignore_patterns_set_key", id+"_ignores", "started_by", "alice", "started_in", "#ab",
		"queued_at", "1700000000", "settings_age", "4").Err()
	if err == nil {
		err = c.SAdd(ctx, id+"_ignores", "global").Err()
	}
	if err == nil {
		err = c.LPush(ctx, queue, id).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestTakeOrder: the queues a pipeline checks and the order it takes jobs
// in (doc/protocol.md, Queues).
func TestTakeOrder(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		queues []string
		want   []string // idents in the order taken
	}{
		{
			name:   "plain pipeline: its named queues, pending, pending-ao; not pending-large",
			cfg:    Config{Nickname: "fastpipe-3"},
			queues: []string{"pending-ao", "pending", "pending:fast", "pending:slow", "pending-large", "pending:pipe"},
			want:   []string{"j3", "j6", "j2", "j1"},
		},
		{
			name:   "large pipeline takes pending-large before pending",
			cfg:    Config{Nickname: "big", Large: true},
			queues: []string{"pending-ao", "pending", "pending-large"},
			want:   []string{"j3", "j2", "j1"},
		},
		{
			name:   "AO-only pipeline: pending-ao only",
			cfg:    Config{Nickname: "fastpipe", AOOnly: true},
			queues: []string{"pending-ao", "pending", "pending:fast", "pending-large"},
			want:   []string{"j1"},
		},
		{
			name:   "AO-only large pipeline: pending-large, then pending-ao",
			cfg:    Config{Nickname: "x", AOOnly: true, Large: true},
			queues: []string{"pending-ao", "pending", "pending-large"},
			want:   []string{"j3", "j1"},
		},
		{
			name:   "right end first within a queue",
			cfg:    Config{Nickname: "x"},
			queues: []string{"pending", "pending", "pending"}, // LPUSHed j1, j2, j3
			want:   []string{"j1", "j2", "j3"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				for i, q := range tc.queues {
					queue(t, b.Client, fmt.Sprintf("j%d", i+1), q)
				}
				tc.cfg.Now = fixedNow
				p := New(b.Client, tc.cfg)
				var got []string
				for {
					j, err := p.Take(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if j == nil {
						break
					}
					got = append(got, j.Ident)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("taken (-want +got):\n%s", diff)
				}
			})
		})
	}
}

type entry struct {
	Type  string
	Value any
	TTL   any
}

// dump is b's database with sorted sets as "score member" lines.
func dump(t *testing.T, b *redistest.Backend) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for k, e := range b.Dump(t) {
		if zs, ok := e.Value.([]redis.Z); ok { // scores and members, readable
			var v []string
			for _, z := range zs {
				v = append(v, fmt.Sprintf("%g %v", z.Score, z.Member))
			}
			e.Value = v
		}
		out[k] = entry{e.Type, e.Value, e.TTL}
	}
	return out
}

// TestJobLifecycle: the Redis state after each step of a completed and of
// an aborted job is what doc/protocol.md says a pipeline leaves.
func TestJobLifecycle(t *testing.T) {
	for _, aborted := range []bool{false, true} {
		t.Run(fmt.Sprintf("aborted=%v", aborted), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				c := b.Client
				queue(t, c, "job1", "pending")
				p := New(c, Config{Nickname: "sim", ID: "abc", Now: fixedNow})
				if err := p.Report(ctx, ""); err != nil {
					t.Fatal(err)
				}
				j, err := p.Take(ctx)
				if err != nil || j == nil {
					t.Fatalf("take: %v %v", j, err)
				}
				if j.Fields["started_at"] != "1800000000.250" || j.Fields["pipeline_id"] != "pipeline:abc" || j.Queue != "pending" {
					t.Errorf("taken job %+v", j)
				}
				if err := j.Heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := j.LogDownload(ctx, "http://job1.example/a", 404); err != nil {
					t.Fatal(err)
				}
				if _, err := j.LogIgnore(ctx, "http://job1.example/b", "/b", "global"); err != nil {
					t.Fatal(err)
				}
				if err := j.AddCounters(ctx, 5000, 1, 3); err != nil {
					t.Fatal(err)
				}
				if aborted {
					if err := j.Abort(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := j.Done(ctx); err != nil {
					t.Fatal(err)
				}
				if err := p.Exit(ctx); err != nil {
					t.Fatal(err)
				}

				hash := map[string]string{
					"url": "http://job1.example/", "fetch_depth": "inf", "log_key": "job1_log",
					"ignore_patterns_set_key": "job1_ignores", "started_by": "alice", "started_in": "#ab",
					"queued_at": "1700000000", "settings_age": "4", "started_at": "1800000000.250",
					"pipeline_id": "pipeline:abc", "heartbeat": "1", "log_score": "2",
					"bytes_downloaded": "5000", "items_downloaded": "1", "items_queued": "3",
					"finished_at": "1800000000.250",
				}
				counter := "jobs_completed"
				if aborted {
					hash["aborted"] = "true"
					counter = "jobs_aborted"
				}
				notice := fmt.Sprintf(`{"aborted":%v,"fetch_depth":"inf","pipeline_id":"pipeline:abc","queued_at":1700000000,`+
					`"started_by":"alice","started_in":"#ab","url":"http://job1.example/","url_file":null}`, aborted)
				want := map[string]entry{
					"job1":         {"hash", hash, "set"},
					"job1_ignores": {"set", []string{"global"}, "set"},
					"job1_log": {"zset", []string{
						`1 {"type":"download","url":"http://job1.example/a","response_code":404,"wget_code":"OK","is_error":false,"is_warning":true,"ts":1800000000.25}`,
						`2 {"type":"ignore","url":"http://job1.example/b","pattern":"/b","source":"global","ts":1800000000.25}`,
					}, "set"},
					counter:                {"string", "1", -1},
					"finish_notifications": {"list", []string{notice}, -1},
				}
				if diff := cmp.Diff(want, dump(t, b)); diff != "" {
					t.Errorf("state after the job (-want +got):\n%s", diff)
				}
				ttl, _ := c.TTL(ctx, "job1").Result()
				if wantTTL := CompletedExpiry; aborted && ttl > 5*time.Second || !aborted && (ttl <= 5*time.Second || ttl > wantTTL) {
					t.Errorf("job TTL %v (aborted=%v)", ttl, aborted)
				}
				// The notice decodes as the documented document.
				var n map[string]any
				if err := json.Unmarshal([]byte(notice), &n); err != nil || len(n) != 8 {
					t.Errorf("notice %s: %v", notice, err)
				}
			})
		})
	}
}

// waitEvent reads events until one of kind arrives.
func waitEvent(t *testing.T, events <-chan Event, kind string) Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Kind == EventError {
				t.Errorf("pipeline error: %v", e)
			}
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// TestRunAbortAndCrash runs the pipeline on its own: a job is aborted when
// abort_requested comes with a published settings age; the next one is
// interrupted by a crash that leaves the pipeline record and the job in
// working behind.
func TestRunAbortAndCrash(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := b.Client
		id := fmt.Sprintf("runjob%d", time.Now().UnixNano()) // pub/sub crosses databases
		queue(t, c, id, "pending")
		queue(t, c, id+"b", "pending")
		p := New(c, Config{Nickname: "runner"})
		events := make(chan Event, 10000)
		var wg sync.WaitGroup
		var runErr error
		wg.Go(func() {
			runErr = p.Run(ctx, RunOptions{
				ReportInterval: 5 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
				PollInterval: 5 * time.Millisecond, EntryInterval: 5 * time.Millisecond,
				Entries: 1 << 20, CrashAfter: 0,
				OnEvent: func(e Event) {
					select {
					case events <- e:
					default:
					}
				},
			})
		})
		if e := waitEvent(t, events, EventTake); e.Ident != id {
			t.Fatalf("took %s first", e.Ident)
		}
		waitEvent(t, events, EventLog)
		// A settings change without abort_requested changes nothing.
		c.HSet(ctx, id, "delay_min", "10", "settings_age", "5")
		c.Publish(ctx, "archivebot:job:"+id, "5")
		waitEvent(t, events, EventSetting)
		// !abort.
		c.HSet(ctx, id, "abort_requested", "true", "settings_age", "6")
		c.Publish(ctx, "archivebot:job:"+id, "6")
		if e := waitEvent(t, events, EventAbort); e.Ident != id {
			t.Errorf("aborted %s", e.Ident)
		}
		if e := waitEvent(t, events, EventTake); e.Ident != id+"b" {
			t.Errorf("took %s second", e.Ident)
		}
		waitEvent(t, events, EventLog)
		// Reports run on their own ticker: crash only once one has landed,
		// so there is a record for the crash to leave behind.
		testproc.EventuallyWithin(t, 5*time.Second, "the pipeline to report", func() bool {
			ok, _ := c.SIsMember(ctx, "pipelines", p.Key()).Result()
			return ok
		})
		p.Crash()
		wg.Wait()
		if !errors.Is(runErr, ErrCrashed) {
			t.Errorf("Run returned %v, want ErrCrashed", runErr)
		}
		aborted, _ := c.HGet(ctx, id, "aborted").Result()
		working, _ := c.LRange(ctx, "working", 0, -1).Result()
		members, _ := c.SMembers(ctx, "pipelines").Result()
		notices, _ := c.LRange(ctx, "finish_notifications", 0, -1).Result()
		got := fmt.Sprintf("aborted=%s working=%v pipelines=%v notices=%d", aborted, working, members, len(notices))
		want := fmt.Sprintf("aborted=true working=[%sb] pipelines=[%s] notices=1", id, p.Key())
		if got != want {
			t.Errorf("after abort and crash:\n got %s\nwant %s", got, want)
		}
		if len(notices) == 1 && !strings.Contains(notices[0], `"aborted":true`) {
			t.Errorf("notice %s", notices[0])
		}
	})
}

// TestRunExitsCleanly: MaxJobs done, the pipeline unregisters.
func TestRunExitsCleanly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		queue(t, b.Client, "cleanjob", "pending-ao")
		p := New(b.Client, Config{Nickname: "clean"})
		err := p.Run(ctx, RunOptions{ReportInterval: time.Millisecond, EntryInterval: time.Microsecond,
			PollInterval: time.Millisecond, Entries: 10, InvalidEvery: 3, IgnoreEvery: 4, MaxJobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := b.Client.ZCard(ctx, "cleanjob_log").Result()
		exists, _ := b.Client.Exists(ctx, p.Key(), "pipelines").Result()
		completed, _ := b.Client.Get(ctx, "jobs_completed").Result()
		// 10 entries, plus the stdout lines "Received item" and "Finished RsyncUpload".
		if got := fmt.Sprintf("%d %d %s", n, exists, completed); got != "12 0 1" {
			t.Errorf("log entries, pipeline keys left, jobs_completed = %s, want 12 0 1", got)
		}
	})
}

// TestRunCommand drives `archivebot simulate-pipeline` through its flags.
func TestRunCommand(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		queue(t, b.Client, "cmdjob", "pending")
		var o Options
		fs := flag.NewFlagSet("simulate-pipeline", flag.ContinueOnError)
		o.RegisterFlags(fs)
		err := fs.Parse([]string{"-redis", b.URL, "-nickname", "cmdpipe", "-max-jobs", "1", "-entries", "3",
			"-entry-interval", "1ms", "-poll-interval", "1ms", "-report-interval", "1ms", "-codes", "200,0"})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := Run(context.Background(), o, &out); err != nil {
			t.Fatalf("Run: %v\n%s", err, out.String())
		}
		var kinds []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			kinds = append(kinds, strings.Fields(l)[1])
		}
		// One line per step, not one per log entry: the count is on the
		// job's last line.
		want := []string{"take", "done", "exit"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("steps printed (-want +got):\n%s\n%s", diff, out.String())
		}
		if !strings.Contains(out.String(), "done cmdjob (3 log entries)") {
			t.Errorf("no entry count on the done line:\n%s", out.String())
		}
		log, _ := b.Client.ZRange(context.Background(), "cmdjob_log", 0, -1).Result()
		// Upstream's pipeline prints "Received item" first and "Finished
		// RsyncUpload for Item" last: upstream's dashboard greys the job on it.
		if len(log) != 5 || !strings.Contains(log[2], `"response_code":0`) || !strings.Contains(log[2], `"is_error":true`) ||
			!strings.Contains(log[0], `"message":"Received item 'cmdjob' from tracker\n"`) ||
			!strings.Contains(log[4], `"message":"Finished RsyncUpload for Item cmdjob\n"`) {
			t.Errorf("log %v", log)
		}
		if err := Run(context.Background(), Options{RedisURL: b.URL, Codes: "x"}, &out); err == nil {
			t.Error("bad -codes accepted")
		}
	})
}

// Like upstream's pipeline, the simulator writes no ignore entry while the
// job's ignore reports are off (suppress_ignore_reports, the default of
// every new job), and writes them once !igon cleared it.
func TestNoIgnoreEntriesWhenReportsOff(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		count := func(id string) (ignores, all int) {
			entries, err := b.Client.ZRange(ctx, id+"_log", 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.Contains(e, `"type":"ignore"`) {
					ignores++
				}
			}
			return ignores, len(entries)
		}
		for _, c := range []struct {
			id          string
			off         bool
			wantIgnores int
		}{{"offjob", true, 0}, {"onjob", false, 2}} {
			queue(t, b.Client, c.id, "pending")
			if c.off {
				if err := b.Client.HSet(ctx, c.id, "suppress_ignore_reports", "true").Err(); err != nil {
					t.Fatal(err)
				}
			}
			p := New(b.Client, Config{Nickname: "ig" + c.id})
			if err := p.Run(ctx, RunOptions{ReportInterval: time.Millisecond, EntryInterval: time.Microsecond,
				PollInterval: time.Millisecond, Entries: 10, IgnoreEvery: 4, MaxJobs: 1}); err != nil {
				t.Fatal(err)
			}
			ig, all := count(c.id)
			// 10 entries and two stdout lines, less the unreported ignores.
			if ig != c.wantIgnores || all != 12-(2-c.wantIgnores) {
				t.Errorf("%s: %d ignore entries of %d, want %d", c.id, ig, all, c.wantIgnores)
			}
		}
	})
}

// The -redis flag's help names its default once (it said "(default
// $REDIS_URL) (default "redis://…")").
func TestRedisFlagHelp(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("simulate-pipeline", flag.ContinueOnError)
	o.RegisterFlags(fs)
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	_, block, _ := strings.Cut(b.String(), "-redis")
	block, _, _ = strings.Cut(block, "\n  -")
	if strings.Count(block, "default") != 1 || !strings.Contains(block, "redis://127.0.0.1:6379/0") {
		t.Errorf("-redis help: %q", block)
	}
}

// TestRunResumesHeldJobs: a pipeline that held jobs before Run (the
// switch-over of doc/migrating.md) crawls them to their end beside its
// takes: one finishes with its log continued after what it shipped, one
// whose abort was requested while it did not listen is aborted.
func TestRunResumesHeldJobs(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := b.Client
		queue(t, c, "held1", "pending")
		queue(t, c, "held2", "pending")
		queue(t, c, "later", "pending")
		before := New(c, Config{Nickname: "resumer"})
		var held []*Job
		for range 2 {
			j, err := before.Take(ctx)
			if err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
			if _, err := j.LogStdout(ctx, "before the switch"); err != nil {
				t.Fatal(err)
			}
			held = append(held, j)
		}
		// The abort is requested without the pipeline hearing it.
		c.HSet(ctx, held[1].Ident, "abort_requested", "true", "settings_age", "5")

		p := New(c, Config{Nickname: "resumer"})
		var mu sync.Mutex
		done := map[string]bool{}
		o := RunOptions{Entries: 3, EntryInterval: time.Millisecond, HeartbeatInterval: 10 * time.Millisecond,
			PollInterval: 10 * time.Millisecond, ReportInterval: 50 * time.Millisecond, MaxJobs: 1,
			Resume: []string{held[0].Ident, held[1].Ident},
			OnEvent: func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				if e.Kind == EventDone {
					done[e.Ident] = true
				}
				if e.Kind == EventError {
					t.Errorf("event %v", e)
				}
			}}
		if err := p.Run(ctx, o); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !done["held1"] || !done["held2"] || !done["later"] {
			t.Fatalf("done: %v", done)
		}
		if got, _ := c.Get(ctx, "jobs_completed").Int(); got != 2 {
			t.Errorf("jobs_completed = %d, want 2 (held1 and later)", got)
		}
		if got, _ := c.Get(ctx, "jobs_aborted").Int(); got != 1 {
			t.Errorf("jobs_aborted = %d, want 1 (held2)", got)
		}
		// held1's log goes on after its entry from before: 1 + received
		// line not repeated + 3 entries + the finished line.
		if n, _ := c.HGet(ctx, "held1", "log_score").Int(); n != 5 {
			t.Errorf("held1 log_score = %d, want 5", n)
		}
		if _, err := p.Resume(ctx, "later"); err == nil {
			t.Error("Resume of a job the pipeline no longer holds was accepted")
		}
	})
}

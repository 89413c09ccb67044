package coordinator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// svcNotice is a finish notification as a pipeline writes it.
func svcNotice(url, nick, channel string, aborted bool) string {
	b, _ := json.Marshal(map[string]any{
		"aborted": aborted, "fetch_depth": "inf", "pipeline_id": "pipeline:abc", "queued_at": 1700000000,
		"started_by": nick, "started_in": channel, "url": url, "url_file": nil,
	})
	return string(b)
}

func svcLists(t *testing.T, b *redistest.Backend) [2][]string {
	t.Helper()
	ctx := context.Background()
	q, err := b.Client.LRange(ctx, store.KeyFinishNotifications, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Client.LRange(ctx, store.KeyFinishProcessing, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return [2][]string{q, p}
}

// TestFinishNotifierJobLifecycle drives jobs through a simulated pipeline:
// queued → taken → logging → finished (or aborted after a published
// settings age), and the channel gets exactly one line per job, with the
// ident.
func TestFinishNotifierJobLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		done := svcQueue(t, s, "http://finished.example.com/", "alice", "#ab", store.KeyPending)
		abort := svcQueue(t, s, "http://aborted.example.com/", "bob", "#other", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "sim"})
		ann := newSvcAnnouncer("#ab", "#other")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))

		j1, err := p.Take(ctx)
		if err != nil || j1 == nil || j1.Ident != done {
			t.Fatalf("take: %v %v", j1, err)
		}
		j2, err := p.Take(ctx)
		if err != nil || j2 == nil || j2.Ident != abort {
			t.Fatalf("take: %v %v", j2, err)
		}
		for i := range 5 {
			for _, j := range []*pipelinesim.Job{j1, j2} {
				if _, err := j.LogDownload(ctx, fmt.Sprintf("%spage%d", j.Fields["url"], i), 200); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if l := ann.take(); len(l) != 0 {
			t.Fatalf("lines before any job finished: %v", l)
		}

		// !abort on a running job: abort_requested plus a published age.
		age, err := b.Client.HIncrBy(ctx, abort, "settings_age", 1).Result()
		if err != nil {
			t.Fatal(err)
		}
		b.Client.HSet(ctx, abort, "abort_requested", "true")
		ended, err := j2.SettingsChanged(ctx, age)
		if err != nil || !ended {
			t.Fatalf("abort: ended=%v err=%v", ended, err)
		}
		if err := j1.Done(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := f.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := []svcLine{
			{"#other", fmt.Sprintf("bob: Your job for http://aborted.example.com/ was aborted. (%s)", abort)},
			{"#ab", fmt.Sprintf("alice: Your job for http://finished.example.com/ has finished. (%s)", done)},
		}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}
	})
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("nonil", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

// TestFinishNotifierDelivery covers what can go wrong between Redis and
// the channel.
func TestFinishNotifierDelivery(t *testing.T) {
	u := func(n int) string { return fmt.Sprintf("http://n%d.example.com/", n) }
	line := func(n int, nick string) string {
		return fmt.Sprintf("%s: Your job for %s has finished. (%s)", nick, u(n), ident.Of(u(n)))
	}
	tests := []struct {
		name       string
		queued     []string // finish_notifications
		processing []string // left by an earlier run
		cannot     []string // channels that cannot be joined
		want       []svcLine
	}{
		{
			name:   "in order",
			queued: []string{svcNotice(u(1), "a", "#ab", false), svcNotice(u(2), "b", "#ab", false)},
			want:   []svcLine{{"#ab", line(1, "a")}, {"#ab", line(2, "b")}},
		},
		{
			name:       "left in processing by a crash: delivered first",
			processing: []string{svcNotice(u(1), "a", "#ab", false)},
			queued:     []string{svcNotice(u(2), "b", "#ab", false)},
			want:       []svcLine{{"#ab", line(1, "a")}, {"#ab", line(2, "b")}},
		},
		{
			name: "malformed notices are dropped, the rest delivered",
			queued: []string{"{not json", `{"aborted":false,"started_by":"x"}`, `[1,2]`,
				svcNotice(u(3), "c", "#ab", false)},
			want: []svcLine{{"#ab", line(3, "c")}},
		},
		{
			name:   "channel that cannot be joined: logged and acknowledged",
			queued: []string{svcNotice(u(1), "a", "#gone", false), svcNotice(u(2), "b", "#ab", false)},
			cannot: []string{"#gone"},
			want:   []svcLine{{"#ab", line(2, "b")}},
		},
		{
			name:   "CR, LF and NUL from Redis are neutralized",
			queued: []string{svcNotice("http://x.example.com/a\r\nPRIVMSG #ab :pwned\x00", "ev\nil", "#ab", false)},
			want: []svcLine{{"#ab", fmt.Sprintf("ev il: Your job for http://x.example.com/a  PRIVMSG #ab :pwned has finished. (%s)",
				ident.Of("http://x.example.com/a\r\nPRIVMSG #ab :pwned\x00"))}},
		},
		{
			name:   "job queued from the console: every channel",
			queued: []string{svcNotice(u(1), "", "", true)},
			want: []svcLine{
				{"#ab", fmt.Sprintf("Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))},
				{"#other", fmt.Sprintf("Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))},
			},
		},
		{
			name: "aborted as a string, queued_at as a string, url_file set",
			queued: []string{`{"aborted":"true","fetch_depth":"shallow","pipeline_id":null,"queued_at":"1700000000",` +
				`"started_by":"a","started_in":"#ab","url":"` + u(1) + `","url_file":"` + u(1) + `"}`},
			want: []svcLine{{"#ab", fmt.Sprintf("a: Your job for %s was aborted. (%s)", u(1), ident.Of(u(1)))}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				for _, d := range tc.queued {
					b.Client.RPush(ctx, store.KeyFinishNotifications, d)
				}
				for _, d := range tc.processing {
					b.Client.RPush(ctx, store.KeyFinishProcessing, d)
				}
				ann := newSvcAnnouncer("#ab", "#other")
				for _, c := range tc.cannot {
					ann.cannot[c] = true
				}
				f := NewFinishNotifier(store.New(b.Client), ann, FinishConfig{}, svcLog(t))
				if err := f.runOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ann.take()); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
					t.Errorf("notices left in Redis (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestFinishNotifierIRCDown: while IRC is down nothing leaves Redis; when
// it is back every notice is delivered once, in order.
func TestFinishNotifierIRCDown(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var docs, lines []string
		for n := range 4 {
			url := fmt.Sprintf("http://down%d.example.com/", n)
			docs = append(docs, svcNotice(url, "a", "#ab", false))
			lines = append(lines, fmt.Sprintf("a: Your job for %s has finished. (%s)", url, ident.Of(url)))
		}
		b.Client.RPush(ctx, store.KeyFinishNotifications, docs[0], docs[1], docs[2])
		ann := newSvcAnnouncer("#ab")
		ann.setDown(errIRCDown)
		f := NewFinishNotifier(store.New(b.Client), ann, FinishConfig{Batch: 2}, svcLog(t))
		for range 3 {
			if err := f.runOnce(ctx); err == nil {
				t.Fatal("cycle with IRC down succeeded")
			}
		}
		b.Client.RPush(ctx, store.KeyFinishNotifications, docs[3])
		if diff := cmp.Diff([2][]string{docs[1:], docs[:1]}, svcLists(t, b)); diff != "" {
			t.Errorf("Redis while IRC is down (-want +got):\n%s", diff)
		}
		// A restarted bot (a new notifier) with IRC back; Batch 2 per cycle.
		ann.setDown(nil)
		f = NewFinishNotifier(store.New(b.Client), ann, FinishConfig{Batch: 2}, svcLog(t))
		var got []string
		for range 3 {
			if err := f.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range ann.take() {
				got = append(got, l.Text)
			}
		}
		if diff := cmp.Diff(lines, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}
	})
}

// batchAnnouncer takes finish reports without sending them; the test
// answers each one.
type batchAnnouncer struct {
	svcAnnouncer
	got chan batchCall
}

type batchCall struct {
	r    news.FinishReport
	done func(error)
}

func (a *batchAnnouncer) AnnounceFinish(ctx context.Context, r news.FinishReport, done func(error)) {
	a.got <- batchCall{r, done}
}

// TestFinishNotifierBatch: with a front end that combines reports, a
// cycle hands over every notice at once, acknowledges a document only
// when its report's line is written (or can never be), and keeps the one
// whose line failed for the next cycle.
func TestFinishNotifierBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		docs := []string{
			`{"no":"url"}`, // acknowledged before the next is taken
			svcNotice("http://a.example.com/", "alice", "#ab", false),
			svcNotice("http://b.example.com/", "alice", "#ab", true),
			svcNotice("http://c.example.com/", "bob", "#victim", false),
			svcNotice("http://d.example.com/", "bob", "#ab", false),
		}
		for _, d := range docs {
			b.Client.RPush(ctx, store.KeyFinishNotifications, d)
		}
		ann := &batchAnnouncer{svcAnnouncer: *newSvcAnnouncer("#ab"), got: make(chan batchCall, 10)}
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		errc := make(chan error, 1)
		go func() { errc <- f.runOnce(ctx) }()

		var calls []batchCall
		for range 4 {
			calls = append(calls, <-ann.got)
		}
		// Nothing acknowledged before any line was written (the
		// malformed document is, at once).
		if l := svcLists(t, b); len(l[0]) != 0 || len(l[1]) != 4 {
			t.Fatalf("before any line: queue %d, processing %d; want 0, 4", len(l[0]), len(l[1]))
		}
		if r := calls[1].r; r.Nick != "alice" || r.Channel != "#ab" || !r.Aborted || r.Ident == "" || r.Line != "alice: Your job for http://b.example.com/ was aborted. ("+r.Ident+")" {
			t.Errorf("report = %+v", r)
		}
		calls[0].done(nil)
		calls[2].done(news.ErrCannotDeliver)
		calls[3].done(errors.New("connection lost"))
		calls[1].done(nil)
		if err := <-errc; err == nil {
			t.Error("a failed line did not fail the cycle")
		}
		if l := svcLists(t, b); len(l[0]) != 0 || len(l[1]) != 1 || l[1][0] != docs[4] {
			t.Fatalf("after: queue %v, processing %v; want only the failed one left", l[0], l[1])
		}
		// Next cycle: the failed one is handed over again.
		go func() { errc <- f.runOnce(ctx) }()
		c := <-ann.got
		if c.r.URL != "http://d.example.com/" {
			t.Errorf("redelivered %q", c.r.URL)
		}
		c.done(nil)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if l := svcLists(t, b); len(l[0])+len(l[1]) != 0 {
			t.Fatalf("left: %v", l)
		}
	})
}

// With a finish interval of an hour only the push path (the pipeline's
// PUBLISH updates after mark-done) can deliver the report. The latency
// from mark-done to the line is logged, not asserted.
func TestFinishReportPushedByUpdates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		ann := newSvcAnnouncer("#archivebot")
		svc := NewServices(st, ann, ServicesConfig{
			Reaper:    ReaperConfig{Interval: time.Hour, Threshold: 1000},
			Finish:    FinishConfig{Interval: time.Hour},
			Pipelines: PipelineNotifierConfig{Interval: time.Hour, SilentAfter: time.Hour},
			Analyzer:  AnalyzerConfig{SweepInterval: time.Hour, Debounce: -1, TrimAfter: 1000},
		}, svcLog(t))
		startSubscribed(t, ctx, svc)

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "pushpipe"})
		for i := range 3 {
			url := fmt.Sprintf("http://push%d.example.org/", i)
			id := svcQueue(t, st, url, "alice", "#archivebot", store.KeyPending)
			job := mustTake(t, ctx, pipe)
			// Log traffic just before the end, as a crawl has: the
			// messages of the log entries start cycles too, and the
			// mark-done message must not be lost among them.
			for k := range 5 {
				if _, err := job.LogDownload(ctx, fmt.Sprintf("%sp%d", url, k), 200); err != nil {
					t.Fatal(err)
				}
			}
			done := time.Now()
			if err := job.Done(ctx); err != nil {
				t.Fatal(err)
			}
			l := ann.waitLine(t, 30*time.Second)
			want := fmt.Sprintf("alice: Your job for %s has finished. (%s)", url, id)
			if l.Text != want {
				t.Fatalf("line %q, want %q", l.Text, want)
			}
			t.Logf("%s: finish report %v after mark-done", b.Name, time.Since(done).Round(time.Millisecond))
		}
	})
}

// The finish notifier puts every job it reports into the index of
// finished jobs, which /finished reads instead of scanning the keyspace.
func TestFinishNotifierIndexesFinishedJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		done := svcQueue(t, s, "http://finished.example.com/", "alice", "#ab", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "sim"})
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != done {
			t.Fatalf("take: %v %v", j, err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := s.FinishedJobs(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("before the notifier: %v %v", got, err)
		}
		f := NewFinishNotifier(s, newSvcAnnouncer("#ab"), FinishConfig{}, svcLog(t))
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		got, err = s.FinishedJobs(ctx)
		if err != nil || len(got) != 1 || got[0].Ident != done || got[0].Job == nil || got[0].Job.Get("finished_at") == "" {
			t.Fatalf("after the notifier: %+v %v", got, err)
		}
	})
}

// Index entries whose job and failure records have expired are dropped
// when read; entries older than the failure records' lifetime are pruned
// when one is added; failure records carry what operators need.
func TestFinishedIndexExpiry(t *testing.T) {
	var now time.Time
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		now = time.Unix(1732900000, 0)
		c := b.Client
		c.HSet(ctx, "gone", "url", "http://gone.example.com/", "finished_at", "1732800000.5")
		c.HSet(ctx, "old", "url", "http://old.example.com/", "finished_at", "1000")
		c.HSet(ctx, "live", "url", "http://live.example.com/", "finished_at", "1732899999")
		c.HSet(ctx, "running", "url", "http://running.example.com/", "started_at", "1732899999")
		for _, id := range []string{"gone", "old", "running", "live", "nosuch"} {
			if err := s.IndexFinished(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		// "old" was pruned by the later calls (older than FailureTTL);
		// "running" and "nosuch" have no finished_at.
		ids, _ := c.ZRange(ctx, store.KeyFinishedIndex, 0, -1).Result()
		if len(ids) != 2 || ids[0] != "gone" || ids[1] != "live" {
			t.Fatalf("index %v", ids)
		}
		c.Del(ctx, "gone") // its 48 h expiry ran out
		got, err := s.FinishedJobs(ctx)
		if err != nil || len(got) != 1 || got[0].Ident != "live" {
			t.Fatalf("finished %+v %v", got, err)
		}
		if ids, _ := c.ZRange(ctx, store.KeyFinishedIndex, 0, -1).Result(); len(ids) != 1 {
			t.Fatalf("stale entry not removed: %v", ids)
		}

		// A failure record, with the job record it outlives.
		f := record.Failure{Ident: "failedjob", URL: "http://f.example.com/", Reason: "no heartbeat for 2h0m",
			FailedBy: "reaper", Queue: store.KeyWorking, Job: map[string]string{"fetch_depth": "inf", "started_by": "alice"},
			Extra: map[string]string{"pipeline_nick": "p1"}}
		if err := s.RecordFailure(ctx, f); err != nil {
			t.Fatal(err)
		}
		ttl, _ := c.TTL(ctx, store.KeyFailed("failedjob")).Result()
		if ttl <= 0 || ttl > store.FailureTTL {
			t.Fatalf("failure record TTL %v", ttl)
		}
		r, err := s.GetFailure(ctx, "failedjob")
		if err != nil || r == nil || r.Reason != f.Reason || r.FailedBy != "reaper" || r.FailedAt != 1732900000 ||
			r.Queue != store.KeyWorking || r.Job["started_by"] != "alice" || r.Extra["pipeline_nick"] != "p1" {
			t.Fatalf("failure %+v %v", r, err)
		}
		got, _ = s.FinishedJobs(ctx)
		if len(got) != 2 || got[1].Ident != "failedjob" || got[1].Failure == nil || got[1].Job != nil {
			t.Fatalf("finished with failure %+v", got)
		}

		// A key of ours holding something else is refused, nothing written.
		c.Set(ctx, store.KeyFailed("clash"), "x", 0)
		if err := s.RecordFailure(ctx, record.Failure{Ident: "clash"}); !errors.Is(err, store.ErrWrongType) {
			t.Fatalf("clash: %v", err)
		}
		if n, _ := c.ZScore(ctx, store.KeyFinishedIndex, "clash").Result(); n != 0 {
			t.Fatalf("clash indexed")
		}
	}, store.WithClock(func() time.Time { return now }))
}

// The SIGKILL test runs the finish notifier in a child process (this test
// binary, re-executed) that reports to a fake IRC server in the parent.
// A line counts as delivered when the server acknowledged it, which is
// when the child's Announce returns nil — "written to the IRC socket".
const (
	envKillChild = "ARCHIVEBOT_FINISH_CHILD_REDIS"
	envKillIRC   = "ARCHIVEBOT_FINISH_CHILD_IRC"
)

// ackAnnouncer sends each line to the fake IRC server and waits for its
// acknowledgement.
type ackAnnouncer struct {
	addr string
	conn net.Conn
	rd   *bufio.Reader
}

func (a *ackAnnouncer) Channels() []string { return []string{"#ab"} }

func (a *ackAnnouncer) Announce(ctx context.Context, channel, text string) error {
	if a.conn == nil {
		c, err := net.DialTimeout("tcp", a.addr, time.Second)
		if err != nil {
			return err
		}
		a.conn, a.rd = c, bufio.NewReader(c)
	}
	a.conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := fmt.Fprintf(a.conn, "%s %s\n", channel, text)
	if err == nil {
		var ack string
		ack, err = a.rd.ReadString('\n')
		if err == nil && ack != "ok\n" {
			err = fmt.Errorf("bad ack %q", ack)
		}
	}
	if err != nil {
		a.conn.Close()
		a.conn = nil
		return fmt.Errorf("IRC: %w", err)
	}
	return nil
}

// TestFinishNotifierChild is the child process; it does nothing in a
// normal run.
func TestFinishNotifierChild(t *testing.T) {
	url := os.Getenv(envKillChild)
	if url == "" {
		t.Skip("child process of TestFinishNotifierSIGKILL")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	f := NewFinishNotifier(store.New(c), &ackAnnouncer{addr: os.Getenv(envKillIRC)}, FinishConfig{Batch: 1}, svcLog(t))
	for { // until killed
		f.runOnce(context.Background())
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeIRC acknowledges lines while up; while down it closes every
// connection at once. Every accepted connection and line is signalled.
type fakeIRC struct {
	ln      net.Listener
	mu      sync.Mutex
	up      bool
	upFor   int // when > 0, go down after this many more lines
	lines   []string
	events  chan string // "conn", "line"
	closing []net.Conn
}

func newFakeIRC(t *testing.T) *fakeIRC {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeIRC{ln: ln, events: make(chan string, 10000)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *fakeIRC) set(up bool, upFor int) {
	s.mu.Lock()
	s.up, s.upFor = up, upFor
	s.mu.Unlock()
}

func (s *fakeIRC) serve(c net.Conn) {
	defer c.Close()
	s.events <- "conn"
	rd := bufio.NewReader(c)
	for {
		s.mu.Lock()
		up := s.up
		s.mu.Unlock()
		if !up {
			return
		}
		l, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		s.mu.Lock()
		if !s.up { // went down while the line was in flight: not delivered
			s.mu.Unlock()
			return
		}
		s.lines = append(s.lines, strings.TrimSuffix(l, "\n"))
		if s.upFor > 0 {
			s.upFor--
			if s.upFor == 0 {
				s.up = false
			}
		}
		s.mu.Unlock()
		fmt.Fprint(c, "ok\n")
		s.events <- "line"
	}
}

// wait blocks until n events of kind arrived.
func (s *fakeIRC) wait(t *testing.T, kind string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for n > 0 {
		select {
		case e := <-s.events:
			if e == kind {
				n--
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %d more %q events", n, kind)
		}
	}
}

// child starts the notifier process.
func killChild(t *testing.T, b *redistest.Backend, irc *fakeIRC) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFinishNotifierChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKillChild+"="+b.URL, envKillIRC+"="+irc.ln.Addr().String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func sigkill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestFinishNotifierSIGKILL kills the notifier process (SIGKILL) while
// notices are pending and IRC is down, twice; after the restart every
// notice is delivered exactly once, in order.
func TestFinishNotifierSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var want []string
		for n := range 6 {
			url := fmt.Sprintf("http://kill%d.example.com/", n)
			b.Client.RPush(ctx, store.KeyFinishNotifications, svcNotice(url, "alice", "#ab", false))
			want = append(want, fmt.Sprintf("#ab alice: Your job for %s has finished. (%s)", url, ident.Of(url)))
		}
		irc := newFakeIRC(t)

		// 1. IRC down from the start: the child keeps failing; kill it.
		cmd := killChild(t, b, irc)
		irc.wait(t, "conn", 3)
		sigkill(t, cmd)

		// 2. IRC up for two lines, then down again; kill the child while it
		// retries.
		irc.set(true, 2)
		cmd = killChild(t, b, irc)
		irc.wait(t, "line", 2)
		irc.wait(t, "conn", 3)
		sigkill(t, cmd)
		lists := svcLists(t, b)
		if len(lists[0])+len(lists[1]) != 4 {
			t.Errorf("after the second kill Redis holds %v, want the 4 undelivered notices", lists)
		}

		// 3. IRC up for good: everything left is delivered, once.
		irc.set(true, 0)
		cmd = killChild(t, b, irc)
		irc.wait(t, "line", 4)
		// Wait for the last acknowledgement to reach Redis.
		for deadline := time.Now().Add(10 * time.Second); ; {
			l := svcLists(t, b)
			if len(l[0])+len(l[1]) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("notices still in Redis: %v", l)
			}
			time.Sleep(10 * time.Millisecond)
		}
		sigkill(t, cmd)
		irc.mu.Lock()
		got := append([]string{}, irc.lines...)
		irc.mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("delivered lines (-want +got):\n%s", diff)
		}
	})
}

// TestFinishOfFailedJobNotReported: an operator fails a running job
// (!fail), and its pipeline, which was never told, later marks it done.
// The failure record speaks for the job (doc/protocol.md, Which record
// speaks for a job), so the channel gets no "has finished" for it and
// its history gets no end; the notice is still consumed. The chaos soak found this: a job reported failed, then
// finished. A job failed and registered again, then finished, is
// reported as usual.
func TestFinishOfFailedJobNotReported(t *testing.T) {
	t.Parallel() // on the real server FastForward sleeps out the failed hash's TTL: time the CPU can spend elsewhere
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		failed := svcQueue(t, s, "http://failed.example.com/", "alice", "#ab", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "sim"})
		ann := newSvcAnnouncer("#ab")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))

		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != failed {
			t.Fatalf("take: %v %v", j, err)
		}
		if _, err := s.FailJobBy(ctx, failed, "operator", "erin"); err != nil {
			t.Fatal(err)
		}
		b.FastForward(6 * time.Second) // the failed hash expires
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if l := ann.take(); len(l) != 0 {
			t.Errorf("lines for a failed job's late finish: %v", l)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}

		// Registered again (the failure record is dropped), then finished:
		// reported.
		again := svcQueue(t, s, "http://failed.example.com/", "bob", "#ab", store.KeyPending)
		j, err = p.Take(ctx)
		if err != nil || j == nil || j.Ident != again {
			t.Fatalf("take again: %v %v", j, err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		want := []svcLine{{"#ab", fmt.Sprintf("bob: Your job for http://failed.example.com/ has finished. (%s)", again)}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
	})
}

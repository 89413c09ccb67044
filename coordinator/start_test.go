package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

func TestJobWatchLogsTakenAndFailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		var buf bytes.Buffer
		w := NewStartNotifier(s, nil, StartConfig{}, slog.New(slog.NewTextHandler(&buf, nil)))
		// What a scan does with what it read of working.
		observe := func() {
			t.Helper()
			ids, err := s.WorkingJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.rememberWorking(ctx, ids, nil)
		}
		observe()
		id := svcQueue(t, s, "http://watch.example.com/", "alice", "#ab", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "w"})
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		observe()
		if _, err := s.FailJob(ctx, id, "failed by op"); err != nil {
			t.Fatal(err)
		}
		observe()
		log := buf.String()
		for _, want := range []string{
			`level=INFO msg="jobs running at start" service=jobs count=0`,
			`level=INFO msg="job taken by a pipeline" service=jobs ident=` + id,
			`level=INFO msg="job failed" service=jobs ident=` + id + ` reason="failed by op"`,
		} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %s:\n%s", want, log)
			}
		}
	})
}

// TestStartNotices: a pipeline takes seven jobs; the five that want a
// notice get exactly one line each, the one that opted out and the !ao job
// none; every start is in the history; scanning again sends nothing.
func TestStartNotices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		nodeStarted(t, s)
		var ids []string
		for i := 0; i < 5; i++ {
			ids = append(ids, queueNotify(t, s, fmt.Sprintf("http://start%d.example.com/", i), store.KeyPending, true))
		}
		optOut := queueNotify(t, s, "http://optout.example.com/", store.KeyPending, false)
		ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "starter"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 7; i++ {
			if j, err := p.Take(ctx); err != nil || j == nil {
				t.Fatalf("take %d: %v %v", i, j, err)
			}
		}
		ann := newSvcAnnouncer("#ab")
		n := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		for i := 0; i < 3; i++ {
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, l := range ann.take() {
			got = append(got, l.Text)
		}
		var want []string
		for _, id := range ids {
			j, _ := s.GetJob(ctx, id)
			want = append(want, fmt.Sprintf("bob: Your job for %s has started on starter. (%s)", j.URL.Value, id))
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("start lines (-want +got):\n%s", diff)
		}
		for _, id := range append(ids, optOut, ao) {
			if h := historyOf(t, s, id); len(h) != 2 || h[1] != "started by "+p.Key() {
				t.Errorf("history of %s: %q", id, h)
			}
		}
		if n, _ := b.Client.LLen(ctx, store.KeyStartProcessing).Result(); n != 0 {
			t.Errorf("%d notices left in delivery", n)
		}
	})
}

// nodeStarted runs a first start scan, as a node does when it starts:
// the jobs in `working` then (none, in these tests) are its baseline, and
// jobs taken afterwards get start notices.
func nodeStarted(t *testing.T, s *store.Store) {
	t.Helper()
	if _, err := s.ScanStarts(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

// TestStartNoticesBaseline: the first start against
// a Redis where pipelines already run jobs (a switch-over from upstream's
// node) announces none of them: they started before this node did, so
// "has started" would be untrue, and hundreds of lines would take the
// channel for minutes. Their starts are recorded; the count is logged. A
// job taken afterwards is announced, once; a restart announces nothing
// again.
func TestStartNoticesBaseline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		var before []string
		for i := 0; i < 30; i++ {
			before = append(before, queueNotify(t, s, fmt.Sprintf("http://before%d.example.com/", i), store.KeyPending, true))
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "upstreamnode"})
		for range before {
			if j, err := p.Take(ctx); err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
		}
		ann := newSvcAnnouncer("#ab")
		logs, log := newLogCounter(t)
		n := NewStartNotifier(s, ann, StartConfig{Notify: true}, log)
		if err := n.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if lines := ann.take(); len(lines) != 0 {
			t.Fatalf("%d start lines for jobs running before the node's first start: %q", len(lines), lines)
		}
		logs.mu.Lock()
		said := slices.ContainsFunc(logs.lines, func(l string) bool {
			return strings.Contains(l, "get no start notice") && strings.Contains(l, "jobs=30")
		})
		logs.mu.Unlock()
		if !said {
			t.Error("the jobs left unannounced are not logged")
		}
		for _, id := range before[:3] {
			if h := historyOf(t, s, id); len(h) != 2 || h[1] != "started by "+p.Key() {
				t.Errorf("history of %s: %q", id, h)
			}
		}
		after := queueNotify(t, s, "http://after.example.com/", store.KeyPending, true)
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		// A restart (a new notifier) changes nothing: the baseline is in Redis.
		n = NewStartNotifier(s, ann, StartConfig{Notify: true}, log)
		for i := 0; i < 2; i++ {
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lines := ann.take()
		if len(lines) != 1 || !strings.Contains(lines[0].Text, "("+after+")") {
			t.Fatalf("lines after the first start: %q, want one for %s", lines, after)
		}
	})
}

// queueNotify registers a job for bob that asks for a start notice or not.
func queueNotify(t *testing.T, s *store.Store, url, queue string, notify bool) string {
	t.Helper()
	norm, id := identOfURL(t, url)
	err := s.Register(context.Background(), store.NewJob{Ident: id, URL: norm, FetchDepth: "inf", Slug: "s",
		StartedBy: "bob", StartedIn: "#ab", Queue: queue, NotifyStart: notify})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStartNoticeSurvivesCrash: a notice taken into delivery whose line was
// not written (IRC down, or the node killed between take and announce) is
// delivered by the next notifier, once.
func TestStartNoticeSurvivesCrash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		nodeStarted(t, s)
		id := queueNotify(t, s, "http://crash.example.com/", store.KeyPending, true)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "crashy"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		ann := newSvcAnnouncer("#ab")
		ann.setDown(errIRCDown)
		first := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		if err := first.runOnce(ctx); !errors.Is(err, errIRCDown) {
			t.Fatalf("runOnce with IRC down: %v", err)
		}
		if n, _ := b.Client.LLen(ctx, store.KeyStartProcessing).Result(); n != 1 {
			t.Fatalf("%d notices in delivery, want 1", n)
		}
		ann.setDown(nil)
		second := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		for i := 0; i < 2; i++ {
			if err := second.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lines := ann.take()
		if len(lines) != 1 || !strings.Contains(lines[0].Text, "has started on crashy. ("+id+")") {
			t.Fatalf("lines %v", lines)
		}
	})
}

// TestStartNoticesDefault: a job without an origin record (queued by
// another program) follows notifier.start_notices, except !ao jobs; with
// start notices off nothing is announced but the start is recorded.
func TestStartNoticesDefault(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			b := redistest.Mini(t)
			ctx := context.Background()
			s := store.New(b.Client)
			nodeStarted(t, s)
			inf := svcQueue(t, s, "http://inf.example.com/", "alice", "#ab", store.KeyPending)
			ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
			b.Client.Del(ctx, store.KeyOrigin(inf), store.KeyOrigin(ao))
			p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
			for i := 0; i < 2; i++ {
				if _, err := p.Take(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := s.ScanStarts(ctx, on)
			if err != nil {
				t.Fatal(err)
			}
			started, notices := sc.Started, sc.Notices
			wantNotices := int64(0)
			if on {
				wantNotices = 1
			}
			if started != 2 || notices != wantNotices {
				t.Fatalf("started %d, notices %d; want 2, %d", started, notices, wantNotices)
			}
		})
	}
}

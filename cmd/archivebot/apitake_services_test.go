package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// timedAnnouncer records each line posted and when.
type timedAnnouncer struct {
	mu    sync.Mutex
	lines map[string]time.Time // text → first posted
}

func (a *timedAnnouncer) Announce(_ context.Context, _, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lines == nil {
		a.lines = map[string]time.Time{}
	}
	if _, ok := a.lines[text]; !ok {
		a.lines[text] = time.Now()
	}
	return nil
}

func (a *timedAnnouncer) Channels() []string { return []string{"#chan"} }

// startedAt is when the start line of job ident was posted.
func (a *timedAnnouncer) startedAt(ident string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for l, at := range a.lines {
		if strings.Contains(l, "has started on ") && strings.HasSuffix(l, "("+ident+")") {
			return at, true
		}
	}
	return time.Time{}, false
}

// queuedHandler records when the tweeter logged "queued" for an ident.
type queuedHandler struct {
	slog.Handler
	mu *sync.Mutex
	at map[string]time.Time
}

func (h queuedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "queued" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "ident" {
				h.mu.Lock()
				h.at[a.Value.String()] = time.Now()
				h.mu.Unlock()
			}
			return true
		})
	}
	return nil
}

func (h queuedHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h queuedHandler) WithGroup(string) slog.Handler      { return h }

// apiHarness is a pipeline API server of its own over a store, for the
// tests of what the node does with an API take (they build the leader's
// services, which package pipelineapi does not import).
type apiHarness struct {
	t     *testing.T
	store *store.Store
	url   string
}

func newAPIHarness(t *testing.T, b *redistest.Backend, opt pipelineapi.Options) *apiHarness {
	t.Helper()
	h := &apiHarness{t: t, store: store.New(b.Client)}
	opt.Store = h.store
	h.url = apitest.Serve(t, opt).URL
	return h
}

// addKey registers a new key and returns a client of the server signing
// with it, once the server knows it.
func (h *apiHarness) addKey(name string) *client.Client {
	h.t.Helper()
	return apitest.Client(h.t, h.store, h.url, name)
}

// takeWatchers runs what reacts to a take in the node (the leader's
// services: start notices, history; the tweeter: the feed) over h's store
// and Redis, wired as cmd/archivebot wires them, with the given start
// scan and tweeter sweep intervals. It returns once the updates
// subscription is up.
func takeWatchers(t *testing.T, h *apiHarness, startEvery, sweepEvery time.Duration) (*timedAnnouncer, func(ident string) (time.Time, bool)) {
	t.Helper()
	ctx := context.Background()
	ann := &timedAnnouncer{}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	svc := coordinator.NewServices(h.store, ann, coordinator.ServicesConfig{
		Start:     coordinator.StartConfig{Interval: startEvery, Notify: true},
		Reaper:    coordinator.ReaperConfig{Interval: time.Hour},
		Finish:    coordinator.FinishConfig{Interval: time.Hour},
		Pipelines: coordinator.PipelineNotifierConfig{Interval: time.Hour, SilentAfter: time.Hour},
		Analyzer:  coordinator.AnalyzerConfig{SweepInterval: time.Hour},
	}, log)
	var mu sync.Mutex
	queued := map[string]time.Time{}
	tw, err := tweeter.New(h.store, tweeter.Config{Interval: time.Hour, Delay: -1, SweepInterval: sweepEvery,
		Logger: slog.New(queuedHandler{Handler: log.Handler(), mu: &mu, at: queued})})
	if err != nil {
		t.Fatal(err)
	}
	svc.Updates.OnUpdate(tw.JobUpdated)
	svc.Updates.OnSubscribe(tw.SweepSoon)
	svc.Add(coordinator.Work{Name: "tweeter", Start: tw.Start, Stop: tw.Stop})
	subscribed := make(chan struct{})
	var once sync.Once
	svc.Updates.OnSubscribe(func(context.Context) { once.Do(func() { close(subscribed) }) })
	svc.Start(ctx)
	t.Cleanup(svc.Stop)
	select {
	case <-subscribed:
	case <-time.After(testproc.WaitFor):
		t.Fatal("the updates listener did not subscribe")
	}
	return ann, func(ident string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := queued[ident]
		return at, ok
	}
}

// queueNotified is harness.queue for a job that asks for a start notice,
// as `!a` does by default.
func (h *apiHarness) queueNotified(ident string) {
	h.t.Helper()
	err := h.store.Register(context.Background(), store.NewJob{Ident: ident, URL: "http://example.com/" + ident,
		FetchDepth: "inf", Slug: "example.com-inf", StartedBy: "nick", StartedIn: "#chan",
		DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: store.KeyPending, NotifyStart: true})
	if err != nil {
		h.t.Fatalf("register %s: %v", ident, err)
	}
}

// TestAPITakeReachesServices: a job taken through the API is seen by
// what reacts to a take as a direct pipeline's job is: its start notice
// is posted, its "Archiving URL" is queued for the
// feed and its history has the start, with the periodic scans far away
// (start scan hourly, the tweeter's sweep off).
func TestAPITakeReachesServices(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		h, ctx := newAPIHarness(t, b, pipelineapi.Options{}), context.Background()
		ann, queued := takeWatchers(t, h, time.Hour, -1)
		c := h.addKey("feedpipe")
		id := "apitake" + b.Name
		h.queueNotified(id)
		j, err := c.Take(ctx, wire.TakeRequest{})
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take: %+v %v", j, err)
		}
		testproc.Eventually(t, "the start notice of the API job", func() bool { _, ok := ann.startedAt(id); return ok })
		testproc.Eventually(t, "the API job's tweet queued", func() bool { _, ok := queued(id); return ok })
		text := tweeter.ArchivingText("http://example.com/" + id)
		inQueue := b.Client.ZScore(ctx, store.KeyTweetsQueue, text).Err() == nil
		inDone := b.Client.ZScore(ctx, store.KeyTweetsDone, text).Err() == nil
		if !inQueue && !inDone {
			t.Errorf("%q is neither in tweets:queue nor in tweets:done", text)
		}
		hist, err := h.store.History(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		started := false
		for _, e := range hist {
			started = started || e.Event == store.EventStarted
		}
		if !started {
			t.Errorf("history of %s has no start: %+v", id, hist)
		}
	})
}

// TestMeasureTakeToServices measures, in one run against a real
// redis-server and with the node's default intervals (start scan every
// 5 s, tweeter sweep every minute), the time from a take to the job's
// start notice and to its "Archiving URL" in tweets:queue, for jobs taken
// directly in Redis (the simulator's Redis mode: take, then the first log
// entry publishes `updates`, as upstream's pipeline does) and through the
// pipeline API. It asserts nothing about time. Run it with
//
//	ARCHIVEBOT_PIPELINEAPI_MEASURE=1 ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 \
//	  go test ./cmd/archivebot/ -run TestMeasureTakeToServices -v
func TestMeasureTakeToServices(t *testing.T) {
	if os.Getenv("ARCHIVEBOT_PIPELINEAPI_MEASURE") == "" {
		t.Skip("ARCHIVEBOT_PIPELINEAPI_MEASURE not set")
	}
	b := redistest.RealRedis(t)
	if b == nil {
		t.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	h := newAPIHarness(t, b, pipelineapi.Options{Rate: 100000, LogRate: 1e6, KeyRefresh: pipelineapi.DefaultKeyRefresh, FlushInterval: pipelineapi.DefaultFlushInterval})
	ann, queued := takeWatchers(t, h, 0, 0) // 0: the defaults
	ctx := context.Background()
	c := h.addKey("measureapi")
	direct := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "measuredirect"})
	if err := direct.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	const jobs = 20
	took := map[string]time.Time{}
	mode := map[string]string{}
	for i := range jobs {
		id := fmt.Sprintf("measure%02d", i)
		h.queueNotified(id)
		if i%2 == 0 {
			j, err := direct.Take(ctx)
			if err != nil || j == nil {
				t.Fatalf("direct take: %v %v", j, err)
			}
			took[j.Ident], mode[j.Ident] = time.Now(), "direct"
			if _, err := j.LogStdout(ctx, "Starting wpull"); err != nil {
				t.Fatal(err)
			}
		} else {
			j, err := c.Take(ctx, wire.TakeRequest{})
			if err != nil || j == nil {
				t.Fatalf("API take: %v %v", j, err)
			}
			took[j.Ident], mode[j.Ident] = time.Now(), "api"
			if _, err := c.Update(ctx, j.Ident, wire.UpdateRequest{Log: []json.RawMessage{json.RawMessage(`{"type":"stdout","message":"Starting wpull","ts":1}`)}}); err != nil {
				t.Fatal(err)
			}
		}
		// Apart, so the start scan of one take does not serve the next.
		time.Sleep(time.Duration(300+i*137%700) * time.Millisecond)
	}
	var notice, feed = map[string][]time.Duration{}, map[string][]time.Duration{}
	deadline := time.Now().Add(90 * time.Second)
	for id, at := range took {
		var s, q time.Time
		for {
			var ok1, ok2 bool
			s, ok1 = ann.startedAt(id)
			q, ok2 = queued(id)
			if ok1 && ok2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !s.IsZero() {
			notice[mode[id]] = append(notice[mode[id]], s.Sub(at))
		}
		if !q.IsZero() {
			feed[mode[id]] = append(feed[mode[id]], q.Sub(at))
		}
	}
	show := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "none"
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return fmt.Sprintf("%d jobs, min %v p50 %v max %v", len(ds), ds[0].Round(time.Millisecond),
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	for _, m := range []string{"direct", "api"} {
		t.Logf("%-6s take → start notice: %s", m, show(notice[m]))
		t.Logf("%-6s take → tweets:queue: %s", m, show(feed[m]))
	}
}

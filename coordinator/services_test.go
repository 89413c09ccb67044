package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// svcLine is one line an Announcer was asked to post.
type svcLine struct{ Channel, Text string }

// svcAnnouncer is the IRC front end as the services see it: it records
// delivered lines, and can be "down" (every Announce fails) or refuse some
// channels (ErrCannotDeliver).
type svcAnnouncer struct {
	mu       sync.Mutex
	channels []string
	lines    []svcLine
	down     error
	cannot   map[string]bool
	// delivered gets every delivered line (buffered), for tests to wait on.
	delivered chan svcLine
}

func newSvcAnnouncer(channels ...string) *svcAnnouncer {
	return &svcAnnouncer{channels: channels, cannot: map[string]bool{}, delivered: make(chan svcLine, 10000)}
}

func (a *svcAnnouncer) Announce(ctx context.Context, channel, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down != nil {
		return a.down
	}
	if a.cannot[channel] {
		return news.ErrCannotDeliver
	}
	if strings.ContainsAny(text, "\r\n\x00") {
		return fmt.Errorf("line with CR, LF or NUL: %q", text)
	}
	l := svcLine{channel, text}
	a.lines = append(a.lines, l)
	a.delivered <- l
	return nil
}

func (a *svcAnnouncer) Channels() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string{}, a.channels...)
}

func (a *svcAnnouncer) setDown(err error) {
	a.mu.Lock()
	a.down = err
	a.mu.Unlock()
}

// take returns the lines delivered since the last take.
func (a *svcAnnouncer) take() []svcLine {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lines
	a.lines = nil
	for len(a.delivered) > 0 {
		<-a.delivered
	}
	return l
}

// waitLine waits for the next delivered line.
func (a *svcAnnouncer) waitLine(t *testing.T, timeout time.Duration) svcLine {
	t.Helper()
	select {
	case l := <-a.delivered:
		return l
	case <-time.After(timeout):
		t.Fatalf("no line announced within %v", timeout)
		return svcLine{}
	}
}

var errIRCDown = errors.New("not connected to IRC")

// svcLog is a logger for the services under test: test output only.
func svcLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// svcClock is a settable clock.
type svcClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *svcClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *svcClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// mustTake takes the next job on pipeline p and fails the test if there
// is none.
func mustTake(t *testing.T, ctx context.Context, p *pipelinesim.Pipeline) *pipelinesim.Job {
	t.Helper()
	j, err := p.Take(ctx)
	if err != nil || j == nil {
		t.Fatalf("take: %v %v", j, err)
	}
	return j
}

// svcQueue registers a job for url as nick in channel on queue, the way
// !a does, and returns its ident.
func svcQueue(t *testing.T, s *store.Store, rawURL, nick, channel, queue string) string {
	t.Helper()
	norm, id := identOfURL(t, rawURL)
	depth := "inf"
	if queue == store.KeyPendingAO {
		depth = "shallow"
	}
	err := s.Register(context.Background(), store.NewJob{
		Ident: id, URL: norm, FetchDepth: depth, Slug: "slug-" + depth,
		StartedBy: nick, StartedIn: channel, DelayMin: 250, DelayMax: 375,
		Concurrency: 3, SettingsAge: 4, Queue: queue, Patterns: []string{"global-pattern"},
	})
	if err != nil {
		t.Fatalf("register %s: %v", rawURL, err)
	}
	return id
}

// startSubscribed starts svc, stopped when the test ends, and returns once
// its `updates` listener is subscribed (messages published before that
// would be lost).
func startSubscribed(t *testing.T, ctx context.Context, svc *Services) {
	t.Helper()
	subscribed := make(chan struct{})
	var once sync.Once
	svc.Updates.OnSubscribe(func(context.Context) { once.Do(func() { close(subscribed) }) })
	svc.Start(ctx)
	t.Cleanup(svc.Stop)
	<-subscribed
}

// writesNothing runs fn, a step Redis must refuse, and fails the test
// (saying what, and the difference) if it changed the database.
func writesNothing(t *testing.T, b *redistest.Backend, what string, fn func()) {
	t.Helper()
	before := b.Dump(t)
	fn()
	if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
		t.Errorf("%s:\n%s", what, diff)
	}
}

// identOfURL is the normalized URL and ident of raw.
func identOfURL(t *testing.T, raw string) (string, string) {
	t.Helper()
	norm, id, err := ident.FromURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return norm, id
}

// TestServicesEndToEnd runs the scheduled services against an autonomous
// simulated pipeline: a job goes queued → taken → logging → finished, the
// channel gets exactly one finish line with the ident, and the analyzer's
// counts match the log.
func TestServicesEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		ann := newSvcAnnouncer("#archivebot", "#other")
		id := svcQueue(t, st, "http://e2e.example.org/", "alice", "#archivebot", store.KeyPending)

		svc := NewServices(st, ann, ServicesConfig{
			Reaper:    ReaperConfig{Interval: 20 * time.Millisecond, Threshold: 1000},
			Finish:    FinishConfig{Interval: 20 * time.Millisecond},
			Pipelines: PipelineNotifierConfig{Interval: 20 * time.Millisecond, SilentAfter: time.Hour},
			Analyzer:  AnalyzerConfig{SweepInterval: time.Hour, Debounce: -1, TrimAfter: 1000},
		}, svcLog(t))
		analyzed := make(chan AnalyzeResult, 1000)
		svc.Analyzer.analyzed = func(id string, res AnalyzeResult, err error) {
			if id == id && err == nil {
				analyzed <- res
			}
		}
		startSubscribed(t, ctx, svc)

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "e2epipe"})
		runDone := make(chan error, 1)
		go func() {
			runDone <- pipe.Run(ctx, pipelinesim.RunOptions{
				ReportInterval: 10 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
				PollInterval: 5 * time.Millisecond, EntryInterval: time.Millisecond,
				Entries: 30, InvalidEvery: 7, IgnoreEvery: 5, MaxJobs: 1,
			})
		}()
		if err := <-runDone; err != nil {
			t.Fatalf("pipeline run: %v", err)
		}

		// The pipeline connected and disconnected between two notifier
		// cycles or not; what matters here is the finish line.
		want := svcLine{"#archivebot", fmt.Sprintf("alice: Your job for http://e2e.example.org/ has finished. (%s)", id)}
		deadline := time.After(10 * time.Second)
		for {
			l := ann.waitLine(t, 10*time.Second)
			if strings.Contains(l.Text, "Your job") {
				break
			}
		}

		// Counts: 30 entries, every 7th invalid (4), every 5th an ignore
		// entry unless invalid (6 - 1 (35 is out of range) = 6: 5,10,15,20,25,30),
		// the other 20 downloads cycling 200,200,200,301,404,500 by index.
		var wantCounts record.LogCounts
		codes := []int{200, 200, 200, 301, 404, 500}
		for i := 1; i <= 30; i++ {
			if i%7 == 0 || i%5 == 0 {
				continue
			}
			switch codes[(i-1)%len(codes)] {
			case 200:
				wantCounts.R2xx++
			case 301:
				wantCounts.R3xx++
			case 404:
				wantCounts.R4xx++
			case 500:
				wantCounts.R5xx++
				wantCounts.Errors++
			}
		}
		var total record.LogCounts
		for total != wantCounts {
			select {
			case r := <-analyzed:
				total.Add(r.Counts)
			case <-deadline:
				t.Fatalf("analyzer counts %+v, want %+v", total, wantCounts)
			}
		}
		job, err := st.GetJob(ctx, id)
		if err != nil || job == nil {
			t.Fatalf("job %s: %v %v", id, job, err)
		}
		if got := news.JobProgress(job).Counts; got != wantCounts {
			t.Errorf("job counters %+v, want %+v", got, wantCounts)
		}

		// Exactly one line is ever said about this job.
		svc.Stop()
		var got []svcLine
		for _, l := range ann.take() {
			if strings.Contains(l.Text, "Your job") || strings.Contains(l.Text, id) {
				got = append(got, l)
			}
		}
		if diff := cmp.Diff([]svcLine{want}, got); diff != "" {
			t.Errorf("lines about the job (-want +got):\n%s", diff)
		}
	})
}

// TestGoroutineTable: the table of the leader's background work in
// doc/architecture.md (Goroutines) lists exactly the entries of
// Services' list, in order: those NewServices declares, then those
// cmd/archivebot's startServices adds.
func TestGoroutineTable(t *testing.T) {
	// Added by startServices (cmd/archivebot/services.go), in its order.
	added := []string{"tweeter", "firehose", "pipeline API term"}
	want := append(NewServices(nil, newSvcAnnouncer(), ServicesConfig{}, svcLog(t)).WorkNames(), added...)

	doc, err := os.ReadFile("../doc/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "| work | shape | does |")
	if start < 0 {
		t.Fatal("doc/architecture.md: no table of the leader's background work")
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var got []string
	for _, l := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("row without a work name: %q", l)
		}
		got = append(got, m[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc/architecture.md lists %q\nthe list of background work is %q", got, want)
	}
}

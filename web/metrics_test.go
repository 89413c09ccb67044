package web

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// scrape reads /metrics with the Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	r := get(t, h, "/metrics", "text/plain")
	if r.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", r.StatusCode, body(t, r))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of family name with the given labels
// (name=value pairs); -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

type replies struct {
	mu    sync.Mutex
	lines []string
}

func (r *replies) Reply(text string)   { r.mu.Lock(); r.lines = append(r.lines, text); r.mu.Unlock() }
func (r *replies) Private(text string) { r.Reply(text) }

// announcer records lines and signals each one.
type announcer struct{ lines chan string }

func (a *announcer) Announce(_ context.Context, _, text string) error {
	a.lines <- text
	return nil
}
func (a *announcer) Channels() []string { return []string{"#archivebot"} }

// The counters move when things happen: commands (by command and
// outcome), finish reports, log entries analyzed, reaper cycles; the
// Redis-backed gauges follow the state.
func TestMetricsMove(t *testing.T) {
	b := redistest.Mini(t)
	f := newFixture(t, b)
	h := f.srv.Handler()
	ctx := context.Background()

	before := scrape(t, h)
	// Gauges from Redis.
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"archivebot_queue_jobs", []string{"queue", "pending"}, 2},
		{"archivebot_queue_jobs", []string{"queue", "pending-ao"}, 1},
		{"archivebot_queue_jobs", []string{"queue", "pending-large"}, 1},
		{"archivebot_queue_jobs", []string{"queue", "pending-named"}, 1},
		{"archivebot_working_jobs", nil, 2},
		{"archivebot_pipelines", nil, 1},
		{"archivebot_finish_notices_waiting", nil, 2}, // the finished and the aborted job
		{"archivebot_jobs_outcome", []string{"outcome", "failed"}, 1},
		{"archivebot_redis_up", nil, 1},
	} {
		if got := value(before, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := before["archivebot_irc_connected"]; ok {
		t.Errorf("archivebot_irc_connected in console mode")
	}

	// Commands.
	bt := bot.New(f.store, bot.Options{Catalog: bot.DefaultCatalog(), Schemes: []string{"http", "https"}})
	var out replies
	for _, req := range []bot.Request{
		{Nick: "op", Channel: "#archivebot", Rank: bot.RankOp, Text: "!status"},
		{Nick: "op", Channel: "#archivebot", Rank: bot.RankOp, Text: "!a http://new.example.com/"},
		{Nick: "nobody", Channel: "#archivebot", Rank: bot.RankNone, Text: "!a http://other.example.com/"},
		{Nick: "op", Channel: "#archivebot", Rank: bot.RankOp, Text: "!abort"},
	} {
		bt.Handle(ctx, req, &out)
	}
	after := scrape(t, h)
	for _, c := range []struct{ cmd, outcome string }{{"!status", "ok"}, {"!archive", "ok"}, {"!archive", "denied"}, {"!abort", "usage"}} {
		was := max(value(before, "archivebot_commands_total", "command", c.cmd, "outcome", c.outcome), 0)
		if got := value(after, "archivebot_commands_total", "command", c.cmd, "outcome", c.outcome); got != was+1 {
			t.Errorf("commands_total{%s,%s} = %v, want %v (replies %q)", c.cmd, c.outcome, got, was+1, out.lines)
		}
	}
	if got := value(after, "archivebot_queue_jobs", "queue", "pending"); got != 3 {
		t.Errorf("pending after !a = %v", got)
	}

	// A new job starts and logs three entries: the analyzer's sweep must
	// count them.
	analyzedBefore := value(after, "archivebot_log_entries_analyzed_total")
	j, err := f.pipe.Take(ctx)
	if err != nil || j == nil {
		t.Fatalf("take: %v %v", j, err)
	}
	for _, code := range []int{200, 404, 500} {
		if _, err := j.LogDownload(ctx, "http://pend1.example.com/"+strings.Repeat("x", code%7), code); err != nil {
			t.Fatal(err)
		}
	}

	// Reports and a reaper cycle: run the services until the finish
	// notifier has reported both finished jobs and the reaper has cycled.
	ann := &announcer{lines: make(chan string, 16)}
	svc := coordinator.NewServices(f.store, ann, coordinator.ServicesConfig{
		Reaper:   coordinator.ReaperConfig{Interval: 20 * time.Millisecond},
		Finish:   coordinator.FinishConfig{Interval: 20 * time.Millisecond},
		Analyzer: coordinator.AnalyzerConfig{SweepInterval: 20 * time.Millisecond},
	}, nil)
	sctx, cancel := context.WithCancel(ctx)
	svc.Start(sctx)
	t.Cleanup(func() {
		cancel()
		svc.Stop()
		for _, n := range []string{"reaper", "finish-notifier", "pipeline-notifier", "analyzer-sweep"} {
			metrics.UnregisterService(n)
		}
	})
	for range 2 {
		select {
		case line := <-ann.lines:
			if !strings.Contains(line, "Your job for") {
				t.Fatalf("unexpected line %q", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no finish report")
		}
	}
	testproc.Eventually(t, "a reaper cycle, the finish notices gone and the analyzer counting", func() bool {
		m := scrape(t, h)
		return value(m, "archivebot_service_cycle_seconds", "service", "reaper") > value(before, "archivebot_service_cycle_seconds", "service", "reaper") &&
			value(m, "archivebot_finish_notices_waiting") == 0 &&
			value(m, "archivebot_service_cycle_seconds", "service", "finish-notifier") > 0 &&
			value(m, "archivebot_log_entries_analyzed_total") >= analyzedBefore+3
	})
	// Finished jobs reported by the notifier are in the /finished index.
	var fin []map[string]any
	decode(t, get(t, h, "/finished", ""), &fin)
	if len(fin) != 3 {
		t.Errorf("/finished after the notifier ran: %d entries", len(fin))
	}
}

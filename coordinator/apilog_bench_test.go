package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// benchJob is a job record as the pipeline API's snapshot has it under
// load (the fields of a real one, read from Redis during
// BenchmarkLeaderProfile).
func benchJob(ident string) *record.Job {
	m := map[string]string{
		"url": "http://" + ident + ".example/", "fetch_depth": "inf", "log_key": ident + "_log",
		"ignore_patterns_set_key": ident + "_ignores", "user_agent": "", "slug": "x", "started_by": "bench",
		"started_in": "#bench", "delay_min": "250", "delay_max": "375", "concurrency": "3", "settings_age": "0",
		"suppress_ignore_reports": "true", "queued_at": "1796676723", "started_at": "1796676723.743883",
		"pipeline_id": "pipeline:7e363a3e8b172cccaf8f18bb4fe568ed", "last_acknowledged_heartbeat": "31",
		"bytes_downloaded": "57000", "error_count": "0", "heartbeat": "40", "items_downloaded": "57",
		"r1xx": "0", "r2xx": "57", "r3xx": "0", "r4xx": "0", "r5xx": "0", "runk": "0", "log_score": "57", "death_timer": "0",
	}
	return record.DecodeJob(ident, m)
}

func benchDoc(ident string, i int) string {
	return `{"type":"download","url":"http://` + ident + `.example/page/` + strconv.Itoa(i) +
		`","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1796676723.743883}`
}

// BenchmarkRelayCodec: the relay's CPU per entry without Redis: one
// update of N entries encoded into the channel's message (the
// publisher's encodeLogMessages) and decoded and handed to a sink (the
// listener's handle), as every update of the pipeline API is on the
// leader. At the soak's load an update carries one or two entries, so
// the job's record, sent with each message, is most of it.
//
//	go test ./coordinator/ -run '^$' -bench BenchmarkRelayCodec -benchmem
func BenchmarkRelayCodec(b *testing.B) {
	for _, n := range []int{1, 2, 50} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			job := benchJob("ld00000")
			entries := make([]record.LogEntry, n)
			for i := range entries {
				entries[i] = record.NewLogEntry(benchDoc("ld00000", i), float64(i+1))
			}
			sink := &countSink{}
			l := NewAPILogListener(nil, sink, APILogConfig{}, slog.New(slog.DiscardHandler))
			q := []apiLogUpdate{{job: job, entries: entries}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, m := range encodeLogMessages(q, DefaultAPILogMessageEntries, DefaultAPILogMessageBytes, func(string) {}) {
					l.handle(m.body)
				}
			}
			b.StopTimer()
			if got := sink.n.Load(); got != int64(n*b.N) {
				b.Fatalf("sink got %d entries, want %d", got, n*b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/entry")
		})
	}
}

// processCPU is this process's CPU time (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// publishCalls is the real Redis's PUBLISH count (INFO commandstats).
func publishCalls(b *testing.B, be *redistest.Backend) int64 {
	s, _ := be.Client.Info(context.Background(), "commandstats").Result()
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, "cmdstat_publish:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkAPILogRelayPaced: the relay as the soak's load drives it:
// updates of one entry from 175 jobs, 700 a second (each job ships every
// 250 ms), through a real redis-server to a listener in this process.
// Reported: this process's CPU per entry (publisher, go-redis both ways,
// listener; Redis's own is not counted) and the PUBLISH round trips per
// entry. b.N is the number of updates; -benchtime 2100x is 3 s.
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 go test ./coordinator/ -run '^$' -bench BenchmarkAPILogRelayPaced -benchtime 2100x
func BenchmarkAPILogRelayPaced(b *testing.B) {
	be := redistest.RealRedis(b)
	if be == nil {
		b.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS): the CPU of miniredis would be counted")
	}
	s := store.New(be.Client)
	sink, pub := startAPILogRelay(b, s)
	jobs := make([]*record.Job, 175)
	for i := range jobs {
		jobs[i] = benchJob(fmt.Sprintf("ld%05d", i))
	}
	const perSecond = 700
	pubs0, cpu0 := publishCalls(b, be), processCPU()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / perSecond)); d > 0 {
			time.Sleep(d)
		}
		j := jobs[i%len(jobs)]
		pub.StreamLog(j, []record.LogEntry{record.NewLogEntry(benchDoc(j.Ident, i), float64(i+1))})
	}
	deadline := time.Now().Add(30 * time.Second)
	for sink.n.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cpu, pubs := processCPU()-cpu0, publishCalls(b, be)-pubs0
	if got := sink.n.Load(); got != int64(b.N) {
		b.Fatalf("sink got %d entries, want %d", got, b.N)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/entry")
	b.ReportMetric(float64(pubs)/float64(b.N), "publishes/entry")
}

// BenchmarkRelayEncode: the publisher's half of BenchmarkRelayCodec
// alone: one update of N entries encoded into the channel's message.
//
//	go test ./coordinator/ -run '^$' -bench BenchmarkRelayEncode -benchmem
func BenchmarkRelayEncode(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			entries := make([]record.LogEntry, n)
			for i := range entries {
				entries[i] = record.NewLogEntry(benchDoc("ld00000", i), float64(i+1))
			}
			q := []apiLogUpdate{{job: benchJob("ld00000"), entries: entries}}
			b.ReportAllocs()
			for b.Loop() {
				encodeLogMessages(q, DefaultAPILogMessageEntries, DefaultAPILogMessageBytes, func(string) {})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/entry")
		})
	}
}

// startAPILogRelay runs an API log listener (into a countSink) and a
// publisher on s until tb ends, and waits for the listener.
func startAPILogRelay(tb testing.TB, s *store.Store) (*countSink, *APILogPublisher) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	sink := &countSink{}
	l := NewAPILogListener(s, sink, APILogConfig{}, slog.New(slog.DiscardHandler))
	pub := NewAPILogPublisher(s, APILogConfig{}, slog.New(slog.DiscardHandler))
	wg.Add(2)
	go func() { defer wg.Done(); l.Run(ctx) }()
	go func() { defer wg.Done(); pub.Run(ctx) }()
	<-l.Ready()
	return sink, pub
}

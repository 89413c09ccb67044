package embeddedredis

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
)

// BenchmarkServerSide times the server's own work for one command,
// without the network: a pipeline's log entry (its log script through
// EVALSHA: HINCRBY, ZADD, PUBLISH) dispatched as a client's command, with
// and without the log; and the Sync an acknowledgement waits for (one
// record appended, written and fsynced).
func BenchmarkServerSide(b *testing.B) {
	src, err := os.ReadFile("../pipelinesim/scripts/log.lua")
	if err != nil {
		b.Fatal(err)
	}
	entry := `{"type":"download","url":"http://bench.example/page","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":1767225600.5}`
	for _, persisted := range []bool{false, true} {
		b.Run(fmt.Sprintf("log-entry/persisted=%v", persisted), func(b *testing.B) {
			opts := Options{}
			if persisted {
				opts.DataDir = b.TempDir()
			}
			s := start(b, opts)
			peer := server.NewPeer(bufio.NewWriter(io.Discard))
			s.srv.Dispatch(peer, []string{"HSET", "job", "url", "http://bench.example/"})
			s.srv.Dispatch(peer, []string{"SCRIPT", "LOAD", string(src)})
			sha := scriptSHA(string(src))
			cpu := startCPU()
			for b.Loop() {
				s.srv.Dispatch(peer, []string{"EVALSHA", sha, "2", "job", "job_log", entry, "updates"})
			}
			cpu.report(b)
			if n := s.m.DB(0).HGet("job", "log_score"); n == "" {
				b.Fatal("the script did not run")
			}
		})
	}
	b.Run("sync", func(b *testing.B) {
		s := start(b, Options{DataDir: b.TempDir()})
		rec := &aofRecord{timeMs: 1, cmds: [][]string{{"EVAL", string(src), "2", "job", "job_log", entry, "updates"}}}
		cpu := startCPU()
		for b.Loop() {
			s.aof.append(rec)
			if err := s.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b)
	})
}

// cpuClock measures the CPU time of this process (user + system), which
// the load of other processes on a shared machine disturbs much less than
// the wall time ns/op reports.
type cpuClock time.Duration

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock(cpuNow()) }

// report adds the CPU time per operation since startCPU, "cpu-ns/op".
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-time.Duration(c))/float64(b.N), "cpu-ns/op")
}

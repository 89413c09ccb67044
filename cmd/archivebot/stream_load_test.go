package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// logEntryScript is what a pipeline runs per log entry (its log script).
const logEntryScript = `local n = redis.call('HINCRBY', KEYS[1], 'log_score', 1)
redis.call('ZADD', KEYS[2], n, ARGV[1])
redis.call('PUBLISH', 'updates', KEYS[1])
return n`

// procStat returns the CPU seconds (user+system) and RSS in MB of pid.
func procStat(pid int) (cpu float64, rssMB float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		cpu = (ut + st) / 100 // clock ticks, 100 Hz
	}
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, l := range strings.Split(string(s), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
				rssMB = kb / 1024
			}
		}
	}
	return
}

// TestStreamLoad measures the live stream end to end (on demand:
// ARCHIVEBOT_STREAM_LOAD=SECONDS per step, needs ARCHIVEBOT_TEST_REDIS):
// the node in a child process on a real redis-server; this process writes
// log entries of 200 running jobs at a rising rate (pipelined, as
// pipelines' log script does) and runs 50 WebSocket clients of
// /stream?v=2 subscribed to everything, which count entries from each
// frame's header ("n") and take the delay from the first (oldest) entry's
// ts. It reports delivered entries/s per client, p99 delay, node CPU and
// RSS per step.
func TestStreamLoad(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("ARCHIVEBOT_STREAM_LOAD"))
	if secs <= 0 {
		t.Skip("set ARCHIVEBOT_STREAM_LOAD=SECONDS (per step) and ARCHIVEBOT_TEST_REDIS to measure the stream")
	}
	b := redistest.RealRedis(t)
	if b == nil {
		t.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	const jobs, clients = 200, 50
	rates := []int{1000, 5000, 10000, 20000, 30000}
	if r := os.Getenv("ARCHIVEBOT_STREAM_LOAD_RATES"); r != "" {
		rates = nil
		for _, f := range strings.Split(r, ",") {
			n, _ := strconv.Atoi(f)
			rates = append(rates, n)
		}
	}
	// mode: "all" (every client subscribed to everything), "mix" (each client
	// watches 10 of the jobs), "upstream" (upstream's one frame per entry).
	mode := os.Getenv("ARCHIVEBOT_STREAM_LOAD_MODE")
	if mode == "" {
		mode = "all"
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "node.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = \"\"\n", b.URL, addr)), 0o644)
	exe, _ := os.Executable()
	args := []string{"-config", cfg}
	// ARCHIVEBOT_STREAM_LOAD_PROFILE=FILE: a CPU profile of the node for
	// the whole run (go tool pprof -top FILE).
	if p := os.Getenv("ARCHIVEBOT_STREAM_LOAD_PROFILE"); p != "" {
		args = append(args, "-cpuprofile", p)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envChild+"=1")
	stdin, _ := cmd.StdinPipe() // kept open: the console runs until EOF
	var logBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	for i := 0; ; i++ {
		if r, err := http.Get("http://" + addr + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if i > 200 {
			t.Fatalf("node did not come up:\n%s", logBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	st := store.NewStore(b.Client)
	idents := make([]string, jobs)
	for i := range jobs {
		idents[i] = fmt.Sprintf("loadjob%04d", i)
		if err := st.Register(ctx, store.NewJob{Ident: idents[i], URL: fmt.Sprintf("http://load%d.example/", i),
			FetchDepth: "inf", Slug: "x", StartedBy: "load", StartedIn: "#ab", DelayMin: 250, DelayMax: 375,
			Concurrency: 3, SettingsAge: 1, Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
		b.Client.RPush(ctx, "working", idents[i])
	}

	var mu sync.Mutex
	got := 0
	var delays []float64
	var wg sync.WaitGroup
	for ci := range clients {
		d := websocket.Dialer{EnableCompression: true}
		q := "?v=2"
		switch mode {
		case "mix":
			var ids []string
			for k := range 10 {
				ids = append(ids, idents[(ci*10+k)%jobs])
			}
			q += "&jobs=" + strings.Join(ids, ",")
		case "upstream":
			q = ""
		}
		c, _, err := d.Dial("ws://"+addr+"/stream"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				now := float64(time.Now().UnixNano()) / 1e9
				if mode == "upstream" {
					var d float64
					if k := bytes.Index(msg, []byte(`"ts":`)); k > 0 {
						r := msg[k+5:]
						ts, _ := strconv.ParseFloat(string(r[:bytes.IndexAny(r, ",}")]), 64)
						d = now - ts
					}
					mu.Lock()
					got++
					delays = append(delays, d)
					mu.Unlock()
					continue
				}
				i := bytes.Index(msg, []byte(`,"n":`))
				if i < 0 {
					continue
				}
				rest := msg[i+5:]
				n, _ := strconv.Atoi(string(rest[:bytes.IndexByte(rest, ',')]))
				if n == 0 {
					continue
				}
				var d float64
				if k := bytes.Index(msg, []byte(`"ts":`)); k > 0 {
					r := msg[k+5:]
					end := bytes.IndexAny(r, ",}")
					ts, _ := strconv.ParseFloat(string(r[:end]), 64)
					d = now - ts
				}
				mu.Lock()
				got += n
				delays = append(delays, d)
				mu.Unlock()
			}
		}()
	}
	script := redis.NewScript(logEntryScript)
	script.Load(ctx, b.Client)
	// In "mix", each client should get 10/200 of the entries: delivered is
	// reported as a share of what the client asked for.
	share := 1.0
	if mode == "mix" {
		share = 10.0 / jobs
	}
	t.Logf("mode %s", mode)
	t.Logf("%8s %10s %12s %10s %8s %8s", "offered", "written/s", "delivered/s", "p99 delay", "CPU %", "RSS MB")
	n := 0
	for _, rate := range rates {
		mu.Lock()
		got, delays = 0, nil
		mu.Unlock()
		cpu0, _ := procStat(cmd.Process.Pid)
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		written := 0
		for time.Since(start) < time.Duration(secs)*time.Second {
			<-tick.C
			due := int(time.Since(start).Seconds()*float64(rate)) - written
			if due <= 0 {
				continue
			}
			p := b.Client.Pipeline()
			for range due {
				id := idents[n%jobs]
				entry := fmt.Sprintf(`{"type":"download","url":"http://load.example/p/%d","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":%.6f}`,
					n, float64(time.Now().UnixNano())/1e9)
				script.EvalSha(ctx, p, []string{id, id + "_log"}, entry)
				n++
			}
			p.Exec(ctx)
			written += due
		}
		tick.Stop()
		el := time.Since(start).Seconds()
		time.Sleep(2 * time.Second) // let the last batches arrive
		cpu1, rss := procStat(cmd.Process.Pid)
		mu.Lock()
		slices.Sort(delays)
		p99 := 0.0
		if len(delays) > 0 {
			p99 = delays[len(delays)*99/100]
		}
		t.Logf("%8d %10.0f %12.0f %9.3fs %8.0f %8.1f", rate, float64(written)/el, float64(got)/clients/el/share, p99,
			100*(cpu1-cpu0)/(el+2), rss)
		mu.Unlock()
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestAttackRSS measures the node's peak memory (VmHWM) under the
// network attacks of issue 18 (findings 2, 3, 4 and 8), each against a
// freshly started node on a real redis-server, and whether it survives.
// On demand (a measurement, nothing is asserted about the numbers):
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 ARCHIVEBOT_ATTACK=1 \
//	  go test -run TestAttackRSS -v ./cmd/archivebot/
//
// ARCHIVEBOT_ATTACK_BIN=PATH runs another build of the node instead of
// this one (to measure an older commit the same way);
// ARCHIVEBOT_ATTACK=NAME,NAME runs only those attacks.
func TestAttackRSS(t *testing.T) {
	which := os.Getenv("ARCHIVEBOT_ATTACK")
	if which == "" {
		t.Skip("set ARCHIVEBOT_ATTACK=1 (and ARCHIVEBOT_TEST_REDIS) to measure memory under attack")
	}
	b := redistest.RealRedis(t)
	if b == nil {
		t.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	ctx := context.Background()
	attacks := []struct {
		name, what string
		run        func(t *testing.T, addr string)
	}{
		{"bomb", "6 connections, each a 50 MB subscribe message deflated to ~50 KB (finding 2)", func(t *testing.T, addr string) {
			msg := []byte(`{"subscribe":["` + strings.Repeat("a", 50<<20) + `"]}`)
			var wg sync.WaitGroup
			for range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := websocket.Dialer{EnableCompression: true}
					c, _, err := d.Dial("ws://"+addr+"/stream?v=2", nil)
					if err != nil {
						t.Log(err)
						return
					}
					defer c.Close()
					c.EnableWriteCompression(true)
					c.SetCompressionLevel(9)
					c.WriteMessage(websocket.TextMessage, msg)
					time.Sleep(5 * time.Second)
				}()
			}
			wg.Wait()
		}},
		{"slow-v2", "2,000 entries/s of 1 KB for 30 s; 100 v2 clients, each subscribed to its own half of 200 jobs, reading a frame every 3 s (finding 3)", func(t *testing.T, addr string) {
			idents := attackJobs(t, b.Client, 200)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 100 {
				// Half of the jobs, a different half for each client: no
				// two clients share a frame.
				var sub []string
				for k := range 100 {
					sub = append(sub, idents[(i+k)%len(idents)])
				}
				d := websocket.Dialer{EnableCompression: true}
				c, _, err := d.Dial("ws://"+addr+"/stream?v=2", nil)
				if err != nil {
					t.Fatal(err)
				}
				c.WriteMessage(websocket.TextMessage, []byte(`{"subscribe":["`+strings.Join(sub, `","`)+`"]}`))
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					for {
						select {
						case <-stop:
							return
						case <-time.After(3 * time.Second):
						}
						c.SetReadDeadline(time.Now().Add(time.Second))
						if _, _, err := c.NextReader(); err != nil {
							return
						}
					}
				}()
			}
			writeEntries(ctx, b.Client, idents, 2000, 30*time.Second, 1000)
			close(stop)
			wg.Wait()
		}},
		{"big-entries", "30 log entries of 10 MB, then 20 concurrent GET /logs/recent (finding 4)", func(t *testing.T, addr string) {
			idents := attackJobs(t, b.Client, 1)
			script := redis.NewScript(logEntryScript)
			big := `{"type":"download","url":"http://x.example/","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"pad":"` +
				strings.Repeat("x", 10<<20) + `"}`
			for range 30 {
				script.Run(ctx, b.Client, []string{idents[0], idents[0] + "_log"}, big)
			}
			time.Sleep(5 * time.Second)
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r, err := http.Get("http://" + addr + "/logs/recent"); err == nil {
						io.Copy(io.Discard, r.Body)
						r.Body.Close()
					}
				}()
			}
			wg.Wait()
		}},
		{"job-events", "500,000 PUBLISH archivebot:job_events for jobs that do not exist (finding 8)", func(t *testing.T, addr string) {
			for k := 0; k < 500_000; k += 1000 {
				p := b.Client.Pipeline()
				for i := k; i < k+1000; i++ {
					p.Publish(ctx, store.ChannelJobEvents, fmt.Sprintf(`{"ident":"evleak%d","event":"queued"}`, i))
				}
				if _, err := p.Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Second)
		}},
	}
	bin := os.Getenv("ARCHIVEBOT_ATTACK_BIN")
	t.Logf("%-12s %8s %8s %8s  %s", "attack", "idle MB", "peak MB", "after MB", "")
	for _, a := range attacks {
		if which != "1" && !strings.Contains(","+which+",", ","+a.name+",") {
			continue
		}
		b.Client.FlushAll(ctx)
		addr, pid, stop := startAttackNode(t, b.URL, bin)
		time.Sleep(2 * time.Second)
		idle := procKB(pid, "VmRSS")
		a.run(t, addr)
		time.Sleep(2 * time.Second)
		peak, after := procKB(pid, "VmHWM"), procKB(pid, "VmRSS")
		alive := "survived"
		if r, err := http.Get("http://" + addr + "/healthz"); err != nil {
			alive = "DIED or stopped answering: " + err.Error()
		} else {
			r.Body.Close()
		}
		stop()
		t.Logf("%-12s %8.0f %8.0f %8.0f  %s; %s", a.name, idle/1024, peak/1024, after/1024, alive, a.what)
	}
}

// startAttackNode starts a node (bin, or this test binary as the node) on
// redisURL with its web server on a free port.
func startAttackNode(t *testing.T, redisURL, bin string) (addr string, pid int, stop func()) {
	t.Helper()
	dir := t.TempDir()
	addr = freeAddr(t)
	cfg := filepath.Join(dir, "node.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = \"\"\n", redisURL, addr)), 0o644)
	exe, env := bin, []string(nil)
	if bin == "" {
		exe, _ = os.Executable()
		env = append(os.Environ(), envChild+"=1")
	}
	// The console runs until its stdin ends.
	p := testproc.Start(t, "attack node", exe, []string{"-config", cfg}, testproc.Options{Env: env, Stdin: true})
	waitUp(t, "the node", func() bool {
		r, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	return addr, p.Pid(), func() {
		p.Stdin.Close()
		p.Kill()
	}
}

// attackJobs registers n running jobs.
func attackJobs(t *testing.T, rdb *redis.Client, n int) []string {
	t.Helper()
	ctx := context.Background()
	st := store.NewStore(rdb)
	idents := make([]string, n)
	for i := range idents {
		idents[i] = fmt.Sprintf("attackjob%04d", i)
		if err := st.Register(ctx, store.NewJob{Ident: idents[i], URL: fmt.Sprintf("http://attack%d.example/", i),
			FetchDepth: "inf", Slug: "x", StartedBy: "load", StartedIn: "#ab", DelayMin: 250, DelayMax: 375,
			Concurrency: 3, SettingsAge: 1, Queue: "pending"}); err != nil {
			t.Fatal(err)
		}
		rdb.RPush(ctx, "working", idents[i])
	}
	return idents
}

// writeEntries writes rate log entries per second over the jobs for d, as
// pipelines do (their log script, pipelined), each padded to about size
// bytes.
func writeEntries(ctx context.Context, rdb *redis.Client, idents []string, rate int, d time.Duration, size int) {
	script := redis.NewScript(logEntryScript)
	script.Load(ctx, rdb)
	pad := strings.Repeat("p", max(size-150, 0))
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for time.Since(start) < d {
		<-tick.C
		due := int(time.Since(start).Seconds()*float64(rate)) - n
		if due <= 0 {
			continue
		}
		p := rdb.Pipeline()
		for range due {
			k := idents[n%len(idents)]
			entry := fmt.Sprintf(`{"type":"download","url":"http://load.example/%d/%s","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":%.6f}`,
				n, pad, float64(time.Now().UnixNano())/1e9)
			script.EvalSha(ctx, p, []string{k, k + "_log"}, entry)
			n++
		}
		p.Exec(ctx)
	}
}

// procKB reads a kB field of /proc/PID/status (VmRSS, VmHWM).
func procKB(pid int, field string) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(l, field+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb
		}
	}
	return 0
}

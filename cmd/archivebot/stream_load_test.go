package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// logEntryScript is what a pipeline runs per log entry (its log script).
const logEntryScript = `local n = redis.call('HINCRBY', KEYS[1], 'log_score', 1)
redis.call('ZADD', KEYS[2], n, ARGV[1])
redis.call('PUBLISH', 'updates', KEYS[1])
return n`

// procStat returns the CPU seconds (user+system) and RSS in MB of pid.
func procStat(pid int) (cpu float64, rssMB float64) {
	return procCPU(pid).Seconds(), procKB(pid, "VmRSS") / 1024
}

// procCPU returns the CPU time (user+system) of pid; 0 when it is gone.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// TestStreamLoad measures the live stream end to end (on demand:
// ARCHIVEBOT_STREAM_LOAD=SECONDS per step, needs ARCHIVEBOT_TEST_REDIS):
// the node in a child process on a real redis-server; this process writes
// log entries of 200 running jobs at each offered rate (pipelined, as
// pipelines' log script does) and runs 50 WebSocket clients that offer
// permessage-deflate as browsers do. Each client takes the latency of
// every entry it gets (now minus the entry's own ts) and counts them; per
// step the test reports delivered entries/s per client and latency for
// the median and the worst client, node CPU and RSS.
//
//	ARCHIVEBOT_STREAM_LOAD_RATES   offered entries/s (1000,2000,5000,10000,20000)
//	ARCHIVEBOT_STREAM_LOAD_MODE    targets, in order, each round:
//	                               upstream (/stream), v2 (/stream?v=2,
//	                               everything), mix (v2, 10 jobs each)
//	                               (default upstream,v2)
//	ARCHIVEBOT_STREAM_LOAD_ROUNDS  rounds, interleaved (1)
//	ARCHIVEBOT_STREAM_LOAD_WSPY    path to upstream's dashboard/websocket.py:
//	                               adds the target websocket.py, run with
//	                               /usr/bin/python3 through
//	                               testdata/wspy_shim.py and fed its input
//	                               lines directly (the frames the node
//	                               sends), same clients
//	ARCHIVEBOT_STREAM_LOAD_PROFILE a CPU profile of the node, whole run
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
	rates := []int{1000, 2000, 5000, 10000, 20000}
	if r := os.Getenv("ARCHIVEBOT_STREAM_LOAD_RATES"); r != "" {
		rates = nil
		for _, f := range strings.Split(r, ",") {
			n, _ := strconv.Atoi(f)
			rates = append(rates, n)
		}
	}
	modes := []string{"upstream", "v2"}
	if m := os.Getenv("ARCHIVEBOT_STREAM_LOAD_MODE"); m != "" {
		modes = strings.Split(m, ",")
	}
	wspy := os.Getenv("ARCHIVEBOT_STREAM_LOAD_WSPY")
	if wspy != "" {
		modes = append([]string{"websocket.py"}, modes...)
	}
	rounds, _ := strconv.Atoi(os.Getenv("ARCHIVEBOT_STREAM_LOAD_ROUNDS"))
	rounds = max(rounds, 1)

	cfg, addr := loadNodeConfig(t, b.URL)
	args := []string{"-config", cfg}
	if p := os.Getenv("ARCHIVEBOT_STREAM_LOAD_PROFILE"); p != "" {
		args = append(args, "-cpuprofile", p)
	}
	// The console runs until its stdin (kept open) ends: closing it stops
	// the node cleanly, writing the profile.
	node := startChildWith(t, args, testproc.Options{Env: append(os.Environ(), envChild+"=1"), Stdin: true})
	defer func() { node.Stdin.Close(); <-node.Exited() }()
	cmd := node.Cmd
	waitHealthy(t, addr)
	ctx := context.Background()
	idents := runningJobs(t, b.Client, "load", jobs)
	jobData := make([][]byte, jobs)
	for i := range jobs {
		// websocket.py's input: the frames the node sends, job_data as it
		// writes it (the hash plus ident and zero counters).
		h := b.Client.HGetAll(ctx, idents[i]).Val()
		h["ident"] = idents[i]
		for _, k := range []string{"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count",
			"bytes_downloaded", "items_downloaded", "items_queued"} {
			if _, ok := h[k]; !ok {
				h[k] = "0"
			}
		}
		jobData[i], _ = json.Marshal(h)
	}
	var py *exec.Cmd
	var pyIn io.WriteCloser
	pyAddr := ""
	if wspy != "" {
		pyAddr = freeAddr(t)
		_, port, _ := strings.Cut(pyAddr, ":")
		p := testproc.Start(t, "websocket.py", testproc.Python(t, "websockets"), []string{"testdata/wspy_shim.py", wspy, port},
			testproc.Options{Env: append(os.Environ(), "PYTHONUNBUFFERED=1"), Stdin: true})
		py, pyIn = p.Cmd, p.Stdin
		waitUp(t, "websocket.py", func() bool {
			c, err := net.Dial("tcp", pyAddr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	script := redis.NewScript(logEntryScript)
	script.Load(ctx, b.Client)

	t.Logf("%d clients offering permessage-deflate, %d s per step, %d round(s); latency per entry", clients, secs, rounds)
	t.Logf("%-12s %8s %10s %9s %9s %8s %8s %8s %8s %6s %7s", "target", "offered", "written/s",
		"med cl/s", "worst/s", "med p50", "med p99", "worst99", "lost %", "CPU %", "RSS MB")
	n := 0
	for range rounds {
		for _, rate := range rates {
			for _, mode := range modes {
				url, pid := "ws://"+addr+"/stream", cmd.Process.Pid
				switch mode {
				case "websocket.py":
					url, pid = "ws://"+pyAddr+"/", py.Process.Pid
				case "v2", "all":
					url += "?v=2"
				}
				cs := make([]*loadClient, clients)
				for ci := range clients {
					u := url
					if mode == "mix" {
						var ids []string
						for k := range 10 {
							ids = append(ids, idents[(ci*10+k)%jobs])
						}
						u += "?v=2&jobs=" + strings.Join(ids, ",")
					}
					cs[ci] = dialLoad(t, u)
				}
				time.Sleep(300 * time.Millisecond) // every client counted
				for _, c := range cs {
					c.reset()
				}
				cpu0, _ := procStat(pid)
				start := time.Now()
				tick := time.NewTicker(5 * time.Millisecond)
				written := 0
				var line bytes.Buffer
				for time.Since(start) < time.Duration(secs)*time.Second {
					<-tick.C
					due := int(time.Since(start).Seconds()*float64(rate)) - written
					if due <= 0 {
						continue
					}
					var p redis.Pipeliner
					if mode != "websocket.py" {
						p = b.Client.Pipeline()
					}
					line.Reset()
					for range due {
						k := n % jobs
						entry := fmt.Sprintf(`{"type":"download","url":"http://load.example/p/%d","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":%.6f}`,
							n, float64(time.Now().UnixNano())/1e9)
						if p != nil {
							script.EvalSha(ctx, p, []string{idents[k], idents[k] + "_log"}, entry)
						} else {
							line.WriteString(entry[:len(entry)-1])
							line.WriteString(`,"job_data":`)
							line.Write(jobData[k])
							line.WriteString("}\n")
						}
						n++
					}
					if p != nil {
						p.Exec(ctx)
					} else {
						pyIn.Write(line.Bytes())
					}
					written += due
				}
				tick.Stop()
				el := time.Since(start).Seconds()
				time.Sleep(2 * time.Second) // let the last entries arrive
				cpu1, rss := procStat(pid)
				for _, c := range cs {
					c.conn.Close()
				}
				type res struct {
					got           int
					p50, p99, max float64
				}
				var rs []res
				for _, c := range cs {
					c.mu.Lock()
					slices.Sort(c.lat)
					r := res{got: len(c.lat)}
					if len(c.lat) > 0 {
						r.p50, r.p99 = c.lat[len(c.lat)/2], c.lat[len(c.lat)*99/100]
					}
					c.mu.Unlock()
					rs = append(rs, r)
				}
				// The median and worst client by entries delivered.
				slices.SortFunc(rs, func(a, b res) int { return b.got - a.got })
				med, worst := rs[len(rs)/2], rs[len(rs)-1]
				worst99 := 0.0
				for _, r := range rs {
					worst99 = max(worst99, r.p99)
				}
				share := 1.0
				if mode == "mix" {
					share = 10.0 / jobs
				}
				t.Logf("%-12s %8d %10.0f %9.0f %9.0f %7.3fs %7.3fs %7.3fs %7.1f%% %6.0f %7.1f", mode, rate,
					float64(written)/el, float64(med.got)/el/share, float64(worst.got)/el/share, med.p50, med.p99,
					worst99, 100*(1-float64(med.got)/share/float64(written)), 100*(cpu1-cpu0)/(el+2), rss)
			}
		}
	}
}

// loadClient is one stream client of TestStreamLoad: the latency of every
// entry it got.
type loadClient struct {
	conn *websocket.Conn
	mu   sync.Mutex
	lat  []float64
}

func (c *loadClient) reset() {
	c.mu.Lock()
	c.lat = c.lat[:0]
	c.mu.Unlock()
}

var tsKey = []byte(`"ts":`)

// dialLoad connects a client to url (either protocol: each entry carries
// its own numeric "ts"; job hashes' ts is a string and is skipped).
func dialLoad(t *testing.T, url string) *loadClient {
	t.Helper()
	d := websocket.Dialer{EnableCompression: true}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &loadClient{conn: conn}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			now := float64(time.Now().UnixNano()) / 1e9
			c.mu.Lock()
			for rest := msg; ; {
				k := bytes.Index(rest, tsKey)
				if k < 0 {
					break
				}
				rest = rest[k+len(tsKey):]
				if len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
					continue
				}
				end := bytes.IndexAny(rest, ",}")
				if end < 0 {
					break
				}
				if ts, err := strconv.ParseFloat(string(rest[:end]), 64); err == nil {
					c.lat = append(c.lat, now-ts)
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// loadNodeConfig writes the configuration of a node on redisURL with its
// web server on a free address (returned) and no upstream stream
// listener.
func loadNodeConfig(t *testing.T, redisURL string) (cfg, addr string) {
	t.Helper()
	addr = freeAddr(t)
	cfg = writeTemp(t, "node.toml", fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = \"\"\n", redisURL, addr))
	return cfg, addr
}

// waitHealthy waits until the node's web server at addr answers /healthz.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	waitUp(t, "the node", func() bool {
		r, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
}

// waitUp waits up to 10 s for a started program to answer.
func waitUp(t testing.TB, what string, up func() bool) {
	t.Helper()
	testproc.EventuallyWithin(t, 10*time.Second, what+" to come up", up)
}

// TestAttackRSS measures the node's peak memory (VmHWM) under the
// network attacks of doc/benchmarks.md (memory under network attacks),
// each against a freshly started node on a real redis-server, and
// whether it survives.
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
		{"bomb", "6 connections, each a 50 MB subscribe message deflated to ~50 KB", func(t *testing.T, addr string) {
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
		{"slow-v2", "2,000 entries/s of 1 KB for 30 s; 100 v2 clients, each subscribed to its own half of 200 jobs, reading a frame every 3 s", func(t *testing.T, addr string) {
			idents := runningJobs(t, b.Client, "attack", 200)
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
		{"big-entries", "30 log entries of 10 MB, then 20 concurrent GET /logs/recent", func(t *testing.T, addr string) {
			idents := runningJobs(t, b.Client, "attack", 1)
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
		{"job-events", "500,000 PUBLISH archivebot:job_events for jobs that do not exist", func(t *testing.T, addr string) {
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
		b.Client.FlushDB(ctx)
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
	cfg, addr := loadNodeConfig(t, redisURL)
	exe, env := bin, []string(nil)
	if bin == "" {
		exe, _ = os.Executable()
		env = append(os.Environ(), envChild+"=1")
	}
	// The console runs until its stdin ends.
	p := testproc.Start(t, "attack node", exe, []string{"-config", cfg}, testproc.Options{Env: env, Stdin: true})
	waitHealthy(t, addr)
	return addr, p.Pid(), func() {
		p.Stdin.Close()
		p.Kill()
	}
}

// runningJobs registers n running jobs (in working, as a pipeline took
// them), NAMEjob0000 for http://NAME0.example/ and so on.
func runningJobs(t *testing.T, rdb *redis.Client, name string, n int) []string {
	t.Helper()
	ctx := context.Background()
	st := store.New(rdb)
	idents := make([]string, n)
	for i := range idents {
		idents[i] = fmt.Sprintf("%sjob%04d", name, i)
		if err := st.Register(ctx, store.NewJob{Ident: idents[i], URL: fmt.Sprintf("http://%s%d.example/", name, i),
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

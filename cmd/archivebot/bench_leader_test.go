package main

// The leader under API-fed log load, measured: the harness behind
// BenchmarkLeaderProfile (the profile by stage), BenchmarkCostCurve (CPU
// and memory against entries/s and viewers) and BenchmarkAPIStream50k
// (doc/benchmarks.md, The cost of a log entry).
//
// The node runs as a child process (this test binary re-executed) as the
// soak runs its leader: ha.enabled on a real redis-server, connected to
// ngircd when it is installed, its web server serving the v2 viewers.
// This process plays the API pipelines (each key takes its jobs, then
// ships each job's entries every 250 ms in one signed update, as
// upstream's ship_logs thread and the simulator's shipper do) and the
// viewers (gorilla/websocket, permessage-deflate offered as browsers
// do). The node's CPU and RSS come from /proc; its CPU profile from its
// own -cpuprofile flag, written when it exits (SIGTERM), so it spans the
// whole run, the takes and warm-up included.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// leaderLoad is one run of the harness.
type leaderLoad struct {
	Rate      int           // log entries/s offered, in all
	Viewers   int           // /stream?v=2 clients
	Pipelines int           // API keys
	JobsEach  int           // jobs each key holds
	Measure   time.Duration // the measured window (after Warm)
	Warm      time.Duration // shipping before the window
	Profile   bool          // take the node's CPU profile and cut it by stage
}

// leaderResult is what a run measured.
type leaderResult struct {
	Window        time.Duration
	Offered       int     // entries shipped in the window
	Accepted      int     // entries the node accepted in the window
	AcceptedAll   int     // accepted over the whole run (the profile's span)
	Refused       int     // entries in updates the node refused (any time)
	CPU           float64 // node cores over the window
	RSSPeakMB     float64 // node RSS, peak sampled in the window
	MedianClient  float64 // entries/s the median viewer got in the window
	WorstClient   float64
	P50, P99, Max float64 // seconds, entry latency (frame's oldest entry, per entry)
	Lost          int     // accepted − got, summed over the viewers, after the drain
	Dropped       int     // what the node told viewers it dropped
	Stages        *stageProfile
	IRC           bool
	Closed        map[string]int // viewers the node closed, by reason
	RefusedBy     map[string]int // refused entries by the node's error code
	// NodeDrops is what the node counted as dropped or lost on the
	// stream's way (its /metrics: the API log's drops by reason, the
	// hub's, the relay's), where a viewer is not told.
	NodeDrops map[string]float64
}

// CoresPer1000 is the node's cores per 1,000 entries/s carried.
func (r leaderResult) CoresPer1000() float64 {
	rate := float64(r.Accepted) / r.Window.Seconds()
	if rate == 0 {
		return 0
	}
	return r.CPU / rate * 1000
}

func (r leaderResult) String() string {
	return fmt.Sprintf("offered %.0f/s, accepted %.0f/s (refused %d), node %.2f cores = %.3f cores per 1,000 entries/s, RSS peak %.0f MB; "+
		"viewers: median %.0f/s, worst %.0f/s, p50 %.3f s, p99 %.3f s, max %.3f s, lost %d, dropped %d; IRC %v; viewers closed %v; refused by code %v; node counted %v",
		float64(r.Offered)/r.Window.Seconds(), float64(r.Accepted)/r.Window.Seconds(), r.Refused, r.CPU, r.CoresPer1000(), r.RSSPeakMB,
		r.MedianClient, r.WorstClient, r.P50, r.P99, r.Max, r.Lost, r.Dropped, r.IRC, r.Closed, r.RefusedBy, r.NodeDrops)
}

func (r leaderResult) report(b *testing.B) {
	b.ReportMetric(float64(r.Accepted)/r.Window.Seconds(), "entries/s")
	b.ReportMetric(r.CPU, "cores")
	b.ReportMetric(r.CoresPer1000(), "cores/1000eps")
	b.ReportMetric(r.RSSPeakMB, "rss-MB")
	b.ReportMetric(r.MedianClient, "median-client/s")
	b.ReportMetric(r.P99*1000, "p99-ms")
	b.ReportMetric(float64(r.Lost), "lost")
	b.ReportMetric(float64(r.Dropped), "dropped")
	b.ReportMetric(float64(r.Refused), "refused")
}

// loadViewer is one v2 client: entries got (frames' "n"), the node's
// drop notices, and the latency of each frame's oldest entry (its first
// numeric "ts"), counted once per entry of the frame: an upper bound of
// every entry's latency that costs this process one number per frame,
// where parsing every entry's ts would make the viewers, not the node,
// the limit at high rates.
type loadViewer struct {
	n, dropped atomic.Int64
	mu         sync.Mutex
	lat        []float64 // one per frame
	weight     []int     // entries of that frame
	inWindow   atomic.Int64
	counting   atomic.Bool
	closed     atomic.Pointer[string] // why the connection ended, if it did
}

func dialLoadViewer(tb testing.TB, url string) *loadViewer {
	d := websocket.Dialer{EnableCompression: true}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	v := &loadViewer{}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				why := err.Error()
				v.closed.Store(&why)
				return
			}
			now := float64(time.Now().UnixNano()) / 1e9
			if d := intAfter(msg, droppedKey); d > 0 {
				v.dropped.Add(int64(d))
			}
			n := intAfter(msg, nKey)
			if n <= 0 {
				continue
			}
			v.n.Add(int64(n))
			if v.counting.Load() {
				v.inWindow.Add(int64(n))
			}
			if ts, ok := firstTS(msg); ok {
				v.mu.Lock()
				v.lat = append(v.lat, now-ts)
				v.weight = append(v.weight, n)
				v.mu.Unlock()
			}
		}
	}()
	return v
}

// firstTS is the first numeric "ts" of a frame (job hashes' ts are
// strings and are skipped).
func firstTS(msg []byte) (float64, bool) {
	for rest := msg; ; {
		k := bytes.Index(rest, tsKey)
		if k < 0 {
			return 0, false
		}
		rest = rest[k+len(tsKey):]
		if len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
			continue
		}
		end := bytes.IndexAny(rest, ",}")
		if end < 0 {
			return 0, false
		}
		ts, err := strconv.ParseFloat(string(rest[:end]), 64)
		return ts, err == nil
	}
}

// leaderNodeConfig is the node of the harness: the soak's leader's shape
// (ha.enabled, one node), IRC when ircURL is set (else the console),
// pipeline API rates high enough never to refuse the load.
func leaderNodeConfig(tb testing.TB, ircURL, redisURL, web, api string) string {
	irc := ""
	if ircURL != "" {
		irc = fmt.Sprintf("[irc]\nserver = %q\nnick = %q\nchannels = [\"#bench\"]\n\n", ircURL, botNick)
	}
	return writeTemp(tb, "archivebot.toml", fmt.Sprintf(`%s[redis]
url = %q

[ha]
enabled = true
lease_ttl = "3s"
node_id = "bench-leader"

[tweeter]
interval = "1h"

[http]
listen = %q
stream_listen = ""
max_conns = 2000
max_conns_per_addr = 2000

[pipelines]
listen = %q
rate = 10000
log_rate = 1000000
max_conns = 4096
max_conns_per_addr = 4096
`, irc, redisURL, web, api))
}

// runLeaderLoad runs one load against a fresh node.
func runLeaderLoad(tb testing.TB, rb *redistest.Backend, l leaderLoad) leaderResult {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rb.Client.FlushDB(ctx)
	st := store.New(rb.Client)
	var res leaderResult
	ircURL := ""
	if _, err := exec.LookPath("ngircd"); err == nil {
		ircURL = irctest.StartNgircd(tb, irctest.NgircdOptions{}).URL()
		res.IRC = true
	}
	web, api := freeAddr(tb), freeAddr(tb)
	prof := filepath.Join(tb.TempDir(), "leader.prof")
	args := []string{"-config", leaderNodeConfig(tb, ircURL, rb.URL, web, api), "-log-level", "warn"}
	if l.Profile {
		args = append(args, "-cpuprofile", prof)
	}
	node := startChildWith(tb, args, testproc.Options{Env: childEnv(), Stdin: ircURL == ""})
	testproc.Eventually(tb, "the node's /readyz to say it leads", func() bool {
		r, err := http.Get("http://" + web + "/readyz")
		if err != nil {
			return false
		}
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		r.Body.Close()
		return bytes.Contains(body.Bytes(), []byte(`"role":"leader"`))
	})

	// Jobs, keys, takes.
	type held struct {
		c     *client.Client
		ident string
	}
	var jobs []held
	for p := range l.Pipelines {
		name := fmt.Sprintf("bench-%02d", p)
		pub, priv, _ := ed25519.GenerateKey(nil)
		if err := st.AddPipelineKey(ctx, name, wire.FormatPublicKey(pub)); err != nil {
			tb.Fatal(err)
		}
		c, _ := client.New("http://"+api, name, priv)
		// /readyz can say "leader" a moment before the pipeline API's
		// term starts (503 not_leader until then).
		var rerr error
		testproc.Eventually(tb, "the pipeline API to take "+name+"'s report", func() bool {
			rerr = pipelinesim.NewAPI(c, pipelinesim.Config{Nickname: name}).Report(ctx, "")
			return rerr == nil || !client.IsCode(rerr, "not_leader")
		})
		if rerr != nil {
			tb.Fatal(rerr)
		}
		for j := range l.JobsEach {
			ident := fmt.Sprintf("ld%02d%03d", p, j)
			if err := st.Register(ctx, store.NewJob{Ident: ident, URL: "http://" + ident + ".example/", FetchDepth: "inf", Slug: "x",
				StartedBy: "bench", StartedIn: "#bench", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: "pending"}); err != nil {
				tb.Fatal(err)
			}
			got, err := c.Take(ctx, wire.TakeRequest{Queues: []string{"pending"}})
			if err != nil || got == nil {
				tb.Fatalf("take for %s: %v (job %v)", name, err, got)
			}
			jobs = append(jobs, held{c, got.Ident})
		}
	}
	vs := make([]*loadViewer, l.Viewers)
	for i := range vs {
		vs[i] = dialLoadViewer(tb, "ws://"+web+"/stream?v=2")
	}

	// Ship: each job every 250 ms, the entries due by then.
	var offered, acceptedAll, acceptedWin, refused atomic.Int64
	var refMu sync.Mutex
	res.RefusedBy, res.Closed = map[string]int{}, map[string]int{}
	var inWindow atomic.Bool
	perJob := float64(l.Rate) / float64(len(jobs))
	start := time.Now()
	shipCtx, stopShip := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for k, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the jobs' ticks over the 250 ms.
			time.Sleep(time.Duration(k) * 250 * time.Millisecond / time.Duration(len(jobs)))
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			sent, page := 0, 0
			buf := make([]byte, 0, 256)
			for {
				select {
				case <-shipCtx.Done():
					return
				case <-tick.C:
				}
				due := int(perJob*time.Since(start).Seconds()) - sent
				if due <= 0 {
					continue
				}
				now := float64(time.Now().UnixNano()) / 1e9
				log := make([]json.RawMessage, due)
				for i := range log {
					page++
					buf = buf[:0]
					buf = append(buf, `{"type":"download","url":"http://`...)
					buf = append(buf, j.ident...)
					buf = append(buf, `.example/page/`...)
					buf = strconv.AppendInt(buf, int64(page), 10)
					buf = append(buf, `","response_code":200,"wget_code":"OK","is_error":false,"is_warning":false,"ts":`...)
					buf = strconv.AppendFloat(buf, now, 'f', 6, 64)
					buf = append(buf, '}')
					log[i] = slices.Clone(buf)
				}
				sent += due
				win := inWindow.Load()
				if win {
					offered.Add(int64(due))
				}
				r, err := j.c.Update(shipCtx, j.ident, wire.UpdateRequest{Log: log, Heartbeat: 1,
					Incr: map[string]int64{"bytes_downloaded": int64(1000 * due), "items_downloaded": int64(due)}})
				if err != nil {
					if shipCtx.Err() == nil {
						refused.Add(int64(due))
						code := "transport"
						if e, ok := err.(*client.Error); ok {
							code = e.Code
						}
						refMu.Lock()
						res.RefusedBy[code] += due
						refMu.Unlock()
					}
					continue
				}
				acceptedAll.Add(int64(r.LogAccepted))
				if win {
					acceptedWin.Add(int64(r.LogAccepted))
				}
			}
		}()
	}
	time.Sleep(l.Warm)
	for _, v := range vs {
		v.counting.Store(true)
	}
	inWindow.Store(true)
	cpu0, t0 := procCPU(node.Pid()), time.Now()
	for time.Since(t0) < l.Measure {
		time.Sleep(250 * time.Millisecond)
		res.RSSPeakMB = max(res.RSSPeakMB, procKB(node.Pid(), "VmRSS")/1024)
	}
	inWindow.Store(false)
	for _, v := range vs {
		v.counting.Store(false)
	}
	res.Window = time.Since(t0)
	res.CPU = (procCPU(node.Pid()) - cpu0).Seconds() / res.Window.Seconds()
	stopShip()
	wg.Wait()
	res.Offered, res.Accepted, res.AcceptedAll, res.Refused = int(offered.Load()), int(acceptedWin.Load()), int(acceptedAll.Load()), int(refused.Load())

	// Drain: until every viewer has every accepted entry, or none came
	// for 5 s.
	total := int64(res.AcceptedAll)
	last, lastAt := int64(-1), time.Now()
	for time.Since(lastAt) < 5*time.Second {
		var got int64
		all := true
		for _, v := range vs {
			n := v.n.Load()
			got += n
			all = all && n >= total
		}
		if all {
			break
		}
		if got != last {
			last, lastAt = got, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rates []float64
	type wl struct {
		lat float64
		w   int
	}
	var lats []wl
	sum := 0
	for _, v := range vs {
		rates = append(rates, float64(v.inWindow.Load())/res.Window.Seconds())
		res.Lost += int(max(total-v.n.Load(), 0))
		res.Dropped += int(v.dropped.Load())
		if why := v.closed.Load(); why != nil {
			res.Closed[*why]++
		}
		v.mu.Lock()
		for i, x := range v.lat {
			lats = append(lats, wl{x, v.weight[i]})
			sum += v.weight[i]
		}
		v.mu.Unlock()
	}
	slices.Sort(rates)
	if len(rates) > 0 {
		res.MedianClient, res.WorstClient = rates[len(rates)/2], rates[0]
	}
	slices.SortFunc(lats, func(a, b wl) int {
		switch {
		case a.lat < b.lat:
			return -1
		case a.lat > b.lat:
			return 1
		}
		return 0
	})
	q := func(p float64) float64 {
		target, acc := int(p*float64(sum)), 0
		for _, x := range lats {
			acc += x.w
			if acc > target {
				return x.lat
			}
		}
		if len(lats) > 0 {
			return lats[len(lats)-1].lat
		}
		return 0
	}
	res.P50, res.P99, res.Max = q(0.5), q(0.99), q(1)

	res.NodeDrops = nodeDrops(web)
	if code, _ := node.term(); code != 0 {
		tb.Errorf("node exited with %d after SIGTERM", code)
	}
	if l.Profile {
		sp, err := readStageProfile(prof)
		if err != nil {
			tb.Fatal(err)
		}
		res.Stages = sp
		if keep := os.Getenv("ARCHIVEBOT_BENCH_PROFILE_OUT"); keep != "" {
			if b, err := os.ReadFile(prof); err == nil {
				os.WriteFile(keep, b, 0o644)
			}
		}
	}
	return res
}

// nodeDrops reads the node's counters of entries dropped or lost on the
// live stream's way (series with a non-zero value).
func nodeDrops(web string) map[string]float64 {
	out := map[string]float64{}
	r, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		out["metrics unreadable: "+err.Error()] = 1
		return out
	}
	defer r.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	for _, l := range strings.Split(body.String(), "\n") {
		for _, name := range []string{"archivebot_stream_api_dropped_total", "archivebot_stream_dropped_total", "archivebot_stream_relay_lost_total"} {
			if strings.HasPrefix(l, name) {
				f := strings.Fields(l)
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
					out[strings.Join(f[:len(f)-1], " ")] = v
				}
			}
		}
	}
	return out
}

// benchEnv is an integer from the environment, or def.
func benchEnv(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func needRealRedis(b *testing.B) *redistest.Backend {
	rb := redistest.RealRedis(b)
	if rb == nil {
		b.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	return rb
}

// BenchmarkLeaderProfile: the leader at the soak's load-only scale (25
// API keys × 7 jobs, 20 v2 viewers) carrying ARCHIVEBOT_BENCH_RATE
// entries/s (default 1,000), its CPU per 1,000 entries/s, and its CPU
// profile cut by stage (printed as a table; -v or the benchmark's log).
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 [ARCHIVEBOT_BENCH_RATE=1000] \
//	[ARCHIVEBOT_BENCH_VIEWERS=20] [ARCHIVEBOT_BENCH_SECONDS=20] [ARCHIVEBOT_BENCH_PROFILE_OUT=/tmp/leader.prof] \
//	  go test ./cmd/archivebot/ -run '^$' -bench BenchmarkLeaderProfile -benchtime 1x
func BenchmarkLeaderProfile(b *testing.B) {
	rb := needRealRedis(b)
	for range b.N {
		r := runLeaderLoad(b, rb, leaderLoad{Rate: benchEnv("ARCHIVEBOT_BENCH_RATE", 1000), Viewers: benchEnv("ARCHIVEBOT_BENCH_VIEWERS", 20),
			Pipelines: 25, JobsEach: 7, Measure: time.Duration(benchEnv("ARCHIVEBOT_BENCH_SECONDS", 20)) * time.Second, Warm: 2 * time.Second, Profile: true})
		r.report(b)
		b.Logf("%s\nprofile by stage (the whole run: %d entries accepted):\n%s", r, r.AcceptedAll, r.Stages.table(r.AcceptedAll))
	}
}

// BenchmarkCostCurve: the leader's CPU and memory against entries/s (20
// viewers) and against viewers (1,000 entries/s), one fresh node per
// point, for sizing a machine. ARCHIVEBOT_BENCH_RATES and
// ARCHIVEBOT_BENCH_VIEWER_COUNTS (comma-separated) replace the points;
// ARCHIVEBOT_BENCH_SECONDS the window (default 10).
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 go test ./cmd/archivebot/ -run '^$' -bench BenchmarkCostCurve -benchtime 1x
func BenchmarkCostCurve(b *testing.B) {
	rb := needRealRedis(b)
	secs := time.Duration(benchEnv("ARCHIVEBOT_BENCH_SECONDS", 10)) * time.Second
	points := func(env string, def []int) []int {
		var out []int
		for _, f := range bytes.Split([]byte(os.Getenv(env)), []byte(",")) {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(f))); err == nil && n > 0 {
				out = append(out, n)
			}
		}
		if len(out) == 0 {
			return def
		}
		return out
	}
	run := func(b *testing.B, rate, viewers int) {
		for range b.N {
			r := runLeaderLoad(b, rb, leaderLoad{Rate: rate, Viewers: viewers, Pipelines: 25, JobsEach: 7, Measure: secs, Warm: 2 * time.Second})
			r.report(b)
			b.Logf("%d entries/s, %d viewers: %s", rate, viewers, r)
		}
	}
	for _, rate := range points("ARCHIVEBOT_BENCH_RATES", []int{250, 500, 1000, 2000, 5000, 10000, 20000}) {
		b.Run(fmt.Sprintf("rate=%d/viewers=20", rate), func(b *testing.B) { run(b, rate, 20) })
	}
	for _, n := range points("ARCHIVEBOT_BENCH_VIEWER_COUNTS", []int{1, 10, 50, 100, 200}) {
		b.Run(fmt.Sprintf("rate=1000/viewers=%d", n), func(b *testing.B) { run(b, 1000, n) })
	}
}

// BenchmarkAPIStream50k: API pipelines send 50,000 entries/s
// (ARCHIVEBOT_BENCH_RATE) to a node that 50 v2 clients watch; the
// entries' only Redis path is the relay (the API log's PUBLISH, or under
// ha.enabled the relay stream). Reported: entries/s accepted and
// delivered to the median client, p99 latency (goal under 0.5 s), entries
// lost (accepted, not received: goal 0) and dropped (said so to the
// viewer), refused (the node said no: counted, not silent), the node's
// cores per 1,000 entries/s, and the profile by stage.
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 go test ./cmd/archivebot/ -run '^$' -bench BenchmarkAPIStream50k -benchtime 1x
func BenchmarkAPIStream50k(b *testing.B) {
	rb := needRealRedis(b)
	for range b.N {
		r := runLeaderLoad(b, rb, leaderLoad{Rate: benchEnv("ARCHIVEBOT_BENCH_RATE", 50000), Viewers: benchEnv("ARCHIVEBOT_BENCH_VIEWERS", 50),
			Pipelines: 25, JobsEach: 8, Measure: time.Duration(benchEnv("ARCHIVEBOT_BENCH_SECONDS", 10)) * time.Second, Warm: 2 * time.Second, Profile: true})
		r.report(b)
		b.Logf("%s\nprofile by stage (the whole run: %d entries accepted):\n%s", r, r.AcceptedAll, r.Stages.table(r.AcceptedAll))
	}
}

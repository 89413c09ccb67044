package soak

// The deployment: the node binary, Redis behind Sentinel, two HA nodes,
// the proxies that stand where an operator's load balancer would, and
// the pipelines of the three kinds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/clock"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/soak/history"
)

const (
	botNick = "ArchiveBot"
	channel = "#soak"
)

// buildNode builds the archivebot binary once into a temporary directory.
func buildNode(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SOAK_BIN"); p != "" {
		return p
	}
	// Readable by the other users the processes run as (net_test.go).
	out := filepath.Join(irctest.ReadableTempDir(t), "archivebot")
	cmd := exec.Command("go", "build", "-o", out, "github.com/archiveteam/archivebot-go/cmd/archivebot")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// ---------------------------------------------------------------------
// Redis: the cluster of redistest, with the means to kill the master and
// bring it back as a replica on its port.

type redisSet struct {
	t   *testing.T
	bin string
	cl  *redistest.Cluster
	dir string

	mu    sync.Mutex
	procs map[int]func() // port → kill of the process on it now
	pids  map[int]int
}

func startRedis(t *testing.T) *redisSet {
	profile, tm := sentinelProfile(t)
	leaseTTL = profileLease(profile)
	cl := redistest.StartClusterWith(t, tm)
	r := &redisSet{t: t, bin: redistest.RedisServer(t), cl: cl, dir: t.TempDir(), procs: map[int]func(){}, pids: map[int]int{}}
	for _, p := range append([]*redistest.Proc{cl.Master}, cl.Replicas...) {
		p := p
		r.procs[p.Port] = p.Kill
	}
	watchRedis(t, r, profile, tm)
	return r
}

func (r *redisSet) failoverClient() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: r.cl.SentinelAddrs(),
		DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
}

func (r *redisSet) masterAddr() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a, _ := r.cl.MasterAddr(ctx)
	return a
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// killMaster kills the master the sentinels name and returns its port.
func (r *redisSet) killMaster() (int, bool) {
	addr := r.masterAddr()
	port := portOf(addr)
	r.mu.Lock()
	kill := r.procs[port]
	r.mu.Unlock()
	if kill == nil {
		return port, false
	}
	kill()
	return port, true
}

// restartAsReplica starts a redis-server on port replicating the current
// master (Sentinel would reconfigure it anyway). Test goroutine only.
func (r *redisSet) restartAsReplica(port int) {
	m := r.masterAddr()
	host, mp, _ := net.SplitHostPort(m)
	p := testproc.Start(r.t, fmt.Sprintf("redis (port %d, restarted)", port), r.bin, []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--replicaof", host, mp,
	}, testproc.Options{Dir: r.dir, Tail: 30})
	r.mu.Lock()
	r.procs[port] = p.Kill
	r.pids[port] = p.Pid()
	r.mu.Unlock()
}

// ports are the Redis servers' ports (evidence_test.go).
func (r *redisSet) ports() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for p := range r.procs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// pid is the pid of the restarted server on port (0: the cluster's own).
func (r *redisSet) pid(port int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pids[port]
}

// ---------------------------------------------------------------------
// The nodes.

type node struct {
	name string
	uid  int
	cfg  string
	// clockFile is the node's ARCHIVEBOT_CLOCK_OFFSET_FILE
	// (internal/clock): the clock-skew fault writes an offset into it.
	clockFile string
	web       string // http.listen
	stream    string // http.stream_listen
	api       string // pipelines.listen
	logFile   *os.File

	mu   sync.Mutex
	proc *testproc.Proc
}

func (n *node) current() *testproc.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

func (n *node) pid() int {
	if p := n.current(); p != nil && p.Running() {
		return p.Pid()
	}
	return 0
}

type feedURLs struct{ mastodon, bluesky string }

// writeNodeConfig writes a node's configuration. The outbox sends rate
// lines a second after a burst of 2 (a deployment's IRC server allows
// about 1): a burst of finish reports waits its turn there, and the node
// acknowledges each notice only as its line is written, so a leader
// killed in the middle of one must leave the rest to its successor.
func writeNodeConfig(t *testing.T, dir, name, ircURL string, sentinels []string, feed feedURLs, web, stream, api string, rate float64) string {
	s, _ := json.Marshal(sentinels)
	body := fmt.Sprintf(`[irc]
server = %q
nick = %q
channels = [%q]
messages_per_second = %g
burst = 2
commands_per_minute = 1000

[redis]
sentinels = %s
master_name = %q
wait_replicas = 1
wait_timeout = "1s"

[ha]
enabled = true
lease_ttl = %q
node_id = %q

[reaper]
interval = "1s"
threshold = 30
auto_fail = true

[notifier]
finish_interval = "200ms"
pipeline_interval = "1s"

[analyzer]
sweep_interval = "1s"

[tweeter]
interval = "1s"
delay = "1s"

[tweeter.mastodon]
server = %q
access_token = "soak"

[tweeter.bluesky]
service = %q
identifier = "soak.test"
app_password = "soak"

[http]
listen = %q
stream_listen = %q

[pipelines]
listen = %q
# Every pipeline of the soak connects from 127.0.0.1, as pipelines behind
# one proxy do: the per-address cap would refuse most of them.
max_conns_per_addr = 0
`, ircURL, botNick, channel, rate, s, redistest.SentinelMaster, leaseTTL.String(), name, feed.mastodon, feed.bluesky, web, stream, api)
	p := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// leaseTTL is the nodes' ha.lease_ttl (a freeze lasts longer): the
// Sentinel profile's (sentinelProfile; startRedis sets it).
var leaseTTL = recommendedLease

// start runs the node; test goroutine only.
func (n *node) start(t *testing.T, bin string) {
	exe, args := asUser(t, n.uid, bin, []string{"-config", n.cfg})
	// The node runs under its own uid: the dump file is made for it.
	dump := filepath.Join(filepath.Dir(n.logFile.Name()), "goroutines-"+n.name+".txt")
	if f, err := os.OpenFile(dump, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666); err == nil {
		f.Chmod(0o666)
		f.Close()
	}
	env := append(os.Environ(), clock.EnvOffsetFile+"="+n.clockFile, "ARCHIVEBOT_GOROUTINE_DUMP="+dump)
	p := testproc.Start(t, n.name, exe, args, testproc.Options{Output: n.logFile, Tail: 40, Env: env})
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
}

// skew sets the node's clock offset (0: its clock is right again).
func (n *node) skew(d time.Duration) error {
	tmp := n.clockFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.clockFile)
}

// readyz is the role and leader a node reports ("" when it does not answer).
func readyz(addr string) (role, leader string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	var body struct {
		Role   string `json:"role"`
		Leader *struct {
			Node string `json:"node"`
		} `json:"leader"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &body) != nil {
		return "", ""
	}
	if body.Leader != nil {
		leader = body.Leader.Node
	}
	return body.Role, leader
}

// ---------------------------------------------------------------------
// Proxies: where a deployment puts a load balancer.

// apiProxy forwards the pipeline API to the current leader (a standby
// answers 503 anyway); with no leader it answers 503 with Retry-After.
func apiProxy(t *testing.T, s *soak) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.proxyHandler(func() string {
		n := s.leaderNode()
		if n == nil {
			n = s.nodes[0]
		}
		return n.api
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// proxyHandler is the API proxy's handler, forwarding to the address
// node() names at each request. It records each take in flight (the
// soak's flights, revoke_test.go) until the node's answer or the
// proxy's failure.
func (s *soak) proxyHandler(node func() string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			u, _ := url.Parse("http://" + node())
			r.SetURL(u)
			r.Out.Host = r.In.Host
			// A take's take_id, for its answer's record: a retry of a
			// take whose answer was lost is answered the same job
			// again under the same take_id (doc/pipeline-api.md).
			if r.In.URL.Path == wire.PathTake && r.Out.Body != nil {
				b, err := io.ReadAll(io.LimitReader(r.Out.Body, 1<<20))
				r.Out.Body.Close()
				r.Out.Body = io.NopCloser(bytes.NewReader(b))
				var tr wire.TakeRequest
				ctx := r.Out.Context()
				if err == nil && json.Unmarshal(b, &tr) == nil && tr.TakeID != "" {
					ctx = context.WithValue(ctx, takeIDKey{}, tr.TakeID)
				}
				ctx = context.WithValue(ctx, flightKey{}, s.flights.begin(r.In.Header.Get(wire.HeaderKey), tr.TakeID))
				r.Out = r.Out.WithContext(ctx)
			}
		},
		FlushInterval: -1,
		// A load balancer keeps its connections to the node: with
		// net/http's default of 2 idle connections per host, most of
		// the pipelines' requests paid a new connection to the node.
		Transport: proxyTransport(),
		// The node's answers to takes (proxyRecord).
		ModifyResponse: s.proxyRecord,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.flights.end(r)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "soak proxy: no leader reachable: "+err.Error(), http.StatusServiceUnavailable)
		},
	}
}

// proxyRecord is the API proxy's ModifyResponse: the node's answers to
// takes. A job the node handed a key is held by that key even when its
// pipeline never gets the answer (partitioned, killed, its bridge gone
// in the middle of the take), and the node rightly says "running" until
// the reaper fails it: the model learns of it here, and of the takes the
// node refused.
func (s *soak) proxyRecord(resp *http.Response) error {
	if resp.Request.URL.Path != wire.PathTake {
		return nil
	}
	waited := s.flights.end(resp.Request)
	if resp.StatusCode != http.StatusOK {
		s.takeRefused(resp, waited)
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	var tr wire.TakeResponse
	if json.Unmarshal(b, &tr) != nil {
		return nil
	}
	if tr.Job == nil {
		s.takesNone.Add(1) // the schedule's pause counts them
	}
	if tr.Job != nil {
		id, _ := resp.Request.Context().Value(takeIDKey{}).(string)
		s.rec.Add(history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy,
			Target: resp.Request.Header.Get(wire.HeaderKey), Ident: tr.Job.Ident, URL: s.jobs.urlOf(tr.Job.Ident), Text: id,
			Num: waitedNum(waited)})
	}
	return nil
}

// takeRefused records a take the node refused, as the proxy saw its
// answer (Outcome history.TakeRefused, Text the error's code,
// Num["status"], Num["wait_ms"] how long it was in flight at the
// proxy): invariant 3's evidence that a revoked key asked again and got
// nothing.
func (s *soak) takeRefused(resp *http.Response, waited time.Duration) {
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var e wire.Error
	if err != nil || json.Unmarshal(b, &e) != nil || e.Error == "" {
		return
	}
	s.rec.Add(history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Outcome: history.TakeRefused,
		Target: resp.Request.Header.Get(wire.HeaderKey), Text: e.Error, Num: waitedNum(waited, "status", float64(resp.StatusCode))})
}

// takeIDKey carries a take's take_id from its request to its answer.
type takeIDKey struct{}

func proxyTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	return t
}

// masterProxy is a TCP proxy to the master the sentinels name now, for
// pipelines that speak to Redis directly (upstream's pipelines know one
// address; a deployment with Sentinel gives them one that follows the
// master). Connections made before a failover die with their master.
type masterProxy struct {
	l     net.Listener
	r     *redisSet
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func startMasterProxy(t *testing.T, r *redisSet) *masterProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &masterProxy{l: l, r: r, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); p.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *masterProxy) addr() string { return p.l.Addr().String() }

func (p *masterProxy) serve(c net.Conn) {
	defer c.Close()
	addr := p.r.masterAddr()
	if addr == "" {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (p *masterProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// ---------------------------------------------------------------------
// Pipelines: `archivebot simulate-pipeline` processes, their stdout read
// into the history (take, done, abort), their deaths noticed.

const (
	viaAPI    = "api"
	viaBridge = "bridge"
	viaDirect = "direct"
)

type pipe struct {
	name string // nickname, and key name for api
	uid  int
	via  string
	key  string // key name (api; bridge: the bridge's key)
	args []string
	gen  int

	mu      sync.Mutex
	proc    *testproc.Proc
	held    map[string]bool
	aborted map[string]bool
	killed  bool // by the soak: its death is recorded already
	dead    bool
	// frozeAt and thawedAt: the soak's last SIGSTOP and SIGCONT of the
	// process (frozen, noted, thawed). A take in flight at the stop is
	// made in Redis while the process is stopped; the process prints it
	// after the thaw.
	frozeAt, thawedAt time.Time
}

// frozen records a SIGSTOP (true) or SIGCONT (false) the soak sends.
func (p *pipe) frozen(stop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stop {
		p.frozeAt, p.thawedAt = time.Now(), time.Time{}
	} else if !p.frozeAt.IsZero() && p.thawedAt.IsZero() {
		p.thawedAt = time.Now()
	}
}

// thawSettle: a line a pipeline prints this soon after a thaw may tell of
// a step made before the stop.
const thawSettle = time.Second

// takeUnsure is how much earlier than its line a take printed at at may
// have been made: since the last stop, when the line came just after the
// thaw (0: at its line).
func (p *pipe) takeUnsure(at time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozeAt.IsZero() || p.thawedAt.IsZero() || at.Before(p.thawedAt.Add(-50*time.Millisecond)) || at.After(p.thawedAt.Add(thawSettle)) {
		return 0
	}
	return at.Sub(p.frozeAt)
}

// startPipe runs p; test goroutine only.
func (s *soak) startPipe(p *pipe, outcome string) {
	exe, args := asUser(s.t, p.uid, s.bin, p.args)
	// One P each: the 40 simulator processes stand for pipelines on other
	// machines, and with a P per core each spent most of its CPU in the
	// scheduler looking for work between its timers (the soak's profile,
	// doc/soak.md), CPU the node under test then did not get.
	env := append(os.Environ(), "GOMAXPROCS=1")
	proc := testproc.Start(s.t, "pipeline "+p.name, exe, args, testproc.Options{Lines: 4096, Tail: 20, Env: env})
	p.mu.Lock()
	p.proc, p.held, p.aborted, p.killed, p.dead = proc, map[string]bool{}, map[string]bool{}, false, false
	p.gen++
	gen := p.gen
	p.mu.Unlock()
	s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: outcome})
	go s.readPipe(p, proc, gen)
}

// readPipe turns the simulator's step lines into history events until it
// exits; an exit the soak did not cause is a silent death.
func (s *soak) readPipe(p *pipe, proc *testproc.Proc, gen int) {
	target := ""
	if p.via != viaDirect {
		target = p.key
	}
	for line := range proc.Lines {
		f := strings.Fields(line)
		if len(f) < 3 || len(f[0]) != len("15:04:05.000") {
			continue
		}
		kind, id := f[1], strings.TrimSuffix(f[2], ":")
		// The simulator stamps each step as it happens; the history
		// takes that time, not the time the line was read.
		at := stepTime(f[0])
		switch kind {
		case "take":
			p.mu.Lock()
			p.held[id] = true
			p.mu.Unlock()
			ev := history.Event{T: at, Kind: history.Take, Actor: p.name, Via: p.via, Target: target, Ident: id, URL: s.jobs.urlOf(id)}
			if at.IsZero() {
				at = time.Now()
			}
			if u := p.takeUnsure(at); u > 0 {
				// Printed just after the soak thawed the process: the
				// take may have been made in Redis any time since the
				// stop (seed 1 at 4fbba84: two direct takes made as
				// the pipelines were stopped, printed 3 s later).
				ev.Num = map[string]float64{history.TakeUnsureMS: float64(u.Milliseconds())}
			}
			s.rec.Add(ev)
		case "abort":
			p.mu.Lock()
			p.aborted[id] = true
			p.mu.Unlock()
		case "drop":
			// The node refused its writes: the pipeline let the job go.
			p.mu.Lock()
			held := p.held[id]
			delete(p.held, id)
			delete(p.aborted, id)
			p.mu.Unlock()
			if held {
				s.rec.Add(history.Event{T: at, Kind: history.JobEnd, Actor: p.name, Via: p.via, Ident: id, Outcome: "abandoned"})
			}
		case "done":
			p.mu.Lock()
			outcome := "done"
			if p.aborted[id] {
				outcome = "aborted"
			}
			delete(p.held, id)
			delete(p.aborted, id)
			p.mu.Unlock()
			s.rec.Add(history.Event{T: at, Kind: history.JobEnd, Actor: p.name, Via: p.via, Ident: id, Outcome: outcome})
		}
	}
	<-proc.Exited()
	p.mu.Lock()
	if p.gen != gen {
		p.mu.Unlock()
		return
	}
	killed := p.killed
	p.dead = true
	var held []string
	for id := range p.held {
		held = append(held, id)
	}
	p.held = map[string]bool{}
	p.mu.Unlock()
	if !killed {
		s.pipeDied(p, held, "exited by itself: "+lastLine(proc))
	}
}

// stepTime is the time a simulator's line names (15:04:05.000, local
// time, today); the zero time (the recorder's now) when it names none.
func stepTime(hms string) time.Time {
	c, err := time.ParseInLocation("15:04:05.000", hms, time.Local)
	if err != nil {
		return time.Time{}
	}
	now := time.Now()
	at := time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), time.Local)
	if at.After(now.Add(time.Hour)) { // the line is from before midnight
		at = at.AddDate(0, 0, -1)
	}
	return at
}

func lastLine(p *testproc.Proc) string {
	l := strings.TrimSpace(p.Tail(1))
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}

// pipeDied records a pipeline's death and the jobs it left, and asks the
// main loop to start it again.
func (s *soak) pipeDied(p *pipe, held []string, why string) {
	for _, id := range held {
		s.rec.Add(history.Event{Kind: history.JobEnd, Actor: p.name, Via: p.via, Ident: id, Outcome: "abandoned"})
	}
	s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "died", Target: why})
	select {
	case s.restart <- p:
	default:
	}
}

// kill -9s p's process and records its death (test goroutine or not).
func (s *soak) killPipe(p *pipe, why string) {
	p.mu.Lock()
	proc := p.proc
	if p.dead || proc == nil {
		p.mu.Unlock()
		return
	}
	p.killed = true
	p.mu.Unlock()
	proc.Kill()
	p.mu.Lock()
	var held []string
	for id := range p.held {
		held = append(held, id)
	}
	p.held = map[string]bool{}
	p.dead = true
	p.mu.Unlock()
	s.pipeDied(p, held, why)
}

func (p *pipe) signal(sig syscall.Signal) {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
			p.frozen(sig == syscall.SIGSTOP)
		}
		proc.Signal(sig)
	}
}

// Signal is p.signal, for pipeProcs' callers.
func (p *pipe) Signal(sig syscall.Signal) error {
	p.signal(sig)
	return nil
}

// newKey makes a key pair with `archivebot bridge -init` and registers it
// with `archivebot pipeline-key add`; it returns the key file, owned by
// uid (the user its pipeline runs as).
func (s *soak) newKey(name string, uid int) string {
	file := filepath.Join(s.work, name+".key")
	out, err := exec.Command(s.bin, "bridge", "-init", "-key", file, "-name", name).Output()
	if err != nil {
		s.t.Fatalf("bridge -init %s: %v", name, err)
	}
	pub := strings.TrimSpace(string(out))
	if os.Getuid() == 0 {
		os.Chown(file, uid, uid)
	}
	if b, err := exec.Command(s.bin, "pipeline-key", "-config", s.nodes[0].cfg, "add", name, pub).CombinedOutput(); err != nil {
		s.t.Fatalf("pipeline-key add %s: %v\n%s", name, err, b)
	}
	return file
}

// bridge is an `archivebot bridge` process with upstream-protocol
// pipelines behind it.
type bridgeProc struct {
	name   string
	uid    int
	key    string
	listen string
	args   []string
	proc   *testproc.Proc
	mu     sync.Mutex
}

// startBridge runs b (with -debug: it logs each job it takes) and
// records its own takes: a job the bridge took through the API for a
// pipeline behind it that never got the answer (the pipeline or the
// bridge went away in the middle of the take) is held by the bridge's key
// and by no pipeline, and the node rightly says "running" until the
// reaper fails it. A (re)start releases what the previous process held.
func (s *soak) startBridge(b *bridgeProc) {
	b.mu.Lock()
	restarted := b.proc != nil
	b.mu.Unlock()
	outcome := "started"
	if restarted {
		outcome = "restarted"
	}
	s.rec.Add(history.Event{Kind: history.Pipe, Actor: b.name, Via: history.ViaBridgeSelf, Outcome: outcome})
	exe, args := asUser(s.t, b.uid, s.bin, append(slices.Clone(b.args), "-debug"))
	lw := &lineWriter{line: func(l string) { s.bridgeLine(b, l) }}
	p := testproc.Start(s.t, b.name, exe, args, testproc.Options{Tail: 20, Output: lw,
		Ready: func(l string) bool { return strings.HasPrefix(l, "bridge") && strings.Contains(l, "redis://") }})
	b.mu.Lock()
	b.proc = p
	b.mu.Unlock()
}

// bridgeLine turns the bridge's "bridge: job taken" log line (slog's
// text format, -debug) into a Take by the bridge itself, stamped with the
// bridge's own time.
func (s *soak) bridgeLine(b *bridgeProc, l string) {
	if !strings.Contains(l, `msg="bridge: job taken"`) {
		return
	}
	var at time.Time
	var id string
	for _, f := range strings.Fields(l) {
		if v, ok := strings.CutPrefix(f, "time="); ok {
			at, _ = time.Parse(time.RFC3339Nano, v)
		}
		if v, ok := strings.CutPrefix(f, "ident="); ok {
			id = strings.Trim(v, `"`)
		}
	}
	if id == "" {
		return
	}
	s.rec.Add(history.Event{T: at, Kind: history.Take, Actor: b.name, Via: history.ViaBridgeSelf, Target: b.key, Ident: id, URL: s.jobs.urlOf(id)})
}

// lineWriter calls line for each complete line written to it.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	line    func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
}

func (b *bridgeProc) current() *testproc.Proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

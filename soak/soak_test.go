package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/soak/check"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// scale is the size of the deployment and its load.
type scale struct {
	Name       string
	APIPipes   int // API pipelines (one key, one process each)
	APIWorkers int // jobs each runs at once
	Direct     int // direct-Redis pipelines (one job at a time)
	Bridges    int // bridge processes
	// PerBridge is the number of pipelines behind each bridge
	// (simulate-pipeline -upstream: upstream's exact commands and
	// scripts, the only ones the bridge runs).
	PerBridge int
	Viewers   int
	Users     int
	// Entries per job (drawn between the two) at EntryInterval.
	MinEntries, MaxEntries int
	EntryInterval          time.Duration
	Think                  time.Duration // a user's mean pause between commands
	// PickWindow: commands about a job pick it among this many of the
	// latest acknowledged (about the jobs live at once).
	PickWindow int
	// IRCRate is the nodes' irc.messages_per_second (burst 2): about
	// twice the lines the users' commands and the reports need.
	IRCRate float64
}

var scales = map[string]scale{
	// The scale: 200 jobs at once on 50 pipelines, 1,000 log
	// entries/s (200 jobs × 5/s), 20 viewers, 10 users.
	// Jobs last 200–400 entries (40–80 s): the 10 users queue about
	// 3.7 jobs/s (44 % of a command every 1.2 s each), which keeps
	// 3.7 × 60 s ≈ 220 jobs wanting a slot, so the 200 slots stay busy
	// (with 100–300 entries only about 150 were: 740 entries/s at most).
	"full": {Name: "full", APIPipes: 25, APIWorkers: 7, Direct: 15, Bridges: 2, PerBridge: 5, Viewers: 20, Users: 10,
		MinEntries: 200, MaxEntries: 400, EntryInterval: 200 * time.Millisecond, Think: 1500 * time.Millisecond, PickWindow: 300, IRCRate: 30},
	"ci": {Name: "ci", APIPipes: 6, APIWorkers: 3, Direct: 3, Bridges: 1, PerBridge: 2, Viewers: 4, Users: 4,
		MinEntries: 30, MaxEntries: 100, EntryInterval: 200 * time.Millisecond, Think: 1500 * time.Millisecond, PickWindow: 30, IRCRate: 10},
}

// bridgedArgs are the simulator's flags for a pipeline behind a bridge:
// upstream's commands (the simulator's own Lua is refused there).
var bridgedArgs = []string{"-upstream"}

// sampleEvery is the period of resource samples and viewer figures.
const sampleEvery = 5 * time.Second

type soak struct {
	t    *testing.T
	seed uint64
	sc   scale
	rec  *history.Recorder
	dir  string // the run's output
	work string // keys, configs
	bin  string

	redis   *redisSet
	net     *netFaults
	ircPort int
	nodes   [2]*node
	api     string // the API proxy
	master  *masterProxy
	pipes   []*pipe
	bridges []*bridgeProc
	jobs    *jobList
	restart chan *pipe

	gate sync.RWMutex // users hold it read-locked per command; quiet points lock it
	// reportSeen gets a value (when empty) each time the observer sees a
	// finish report in the channel.
	reportSeen chan struct{}
	nextID     atomic.Int64

	leaderMu sync.Mutex
	leader   string

	ev *evidence // evidence_test.go
}

func (s *soak) leaderNode() *node {
	s.leaderMu.Lock()
	l := s.leader
	s.leaderMu.Unlock()
	for _, n := range s.nodes {
		if n.name == l {
			return n
		}
	}
	return nil
}

func (s *soak) otherNode(n *node) *node {
	if s.nodes[0] == n {
		return s.nodes[1]
	}
	return s.nodes[0]
}

func (s *soak) note(format string, a ...any) {
	s.rec.Add(history.Event{Kind: history.Note, Text: fmt.Sprintf(format, a...)})
	s.t.Logf(format, a...)
}

// step is one entry of the schedule, drawn up front from the seed.
type step struct {
	At   time.Duration
	What string // a fault name, "quiet" or "pipeline-death"
	Dur  time.Duration
	Pick float64
}

// faultKinds, in the priority order.
var faultKinds = []string{
	"kill-leader", "freeze-leader", "kill-redis-master", "pause-pipeline",
	"revoke-waiting", "restart-bridge",
	"partition-node-redis", "partition-pipeline-node", "partition-leader-irc", "clock-skew",
}

// makeSchedule draws the schedule: a warm-up, then faults one at a time
// 12–24 s apart, a quiet point every 40 s or so, now and then a
// pipeline's silent death, and a cool-down. Faults come in rounds, each
// a permutation of the kinds (those in only, or all when only is
// empty), so that a long run injects each kind about as often; the
// first round starts with revoke-waiting, whose invariant (3) has no
// other witness and must be checked by a short run too.
func makeSchedule(r *rand.Rand, d time.Duration, only map[string]bool) []step {
	var out []step
	warm, cool := 25*time.Second, 20*time.Second
	var kinds []string
	for _, f := range faultKinds {
		if len(only) == 0 || only[f] {
			kinds = append(kinds, f)
		}
	}
	for _, f := range optInFaults {
		if only[f] {
			kinds = append(kinds, f)
		}
	}
	var round []string
	first := true
	next := func() string {
		if len(round) == 0 {
			round = append([]string(nil), kinds...)
			r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			if first {
				if i := slices.Index(round, "revoke-waiting"); i > 0 {
					round[0], round[i] = round[i], round[0]
				}
				first = false
			}
		}
		f := round[0]
		round = round[1:]
		return f
	}
	lastQuiet := time.Duration(0)
	for at := warm; at < d-cool; {
		if at-lastQuiet > 40*time.Second {
			out = append(out, step{At: at, What: "quiet", Dur: 3 * time.Second})
			lastQuiet = at
			at += 12 * time.Second
			continue
		}
		if r.IntN(5) == 0 {
			out = append(out, step{At: at, What: "pipeline-death", Pick: r.Float64()})
		}
		if len(kinds) == 0 {
			at += 15 * time.Second
			continue
		}
		out = append(out, step{At: at, What: next(), Dur: time.Duration(3+r.IntN(5)) * time.Second, Pick: r.Float64()})
		at += time.Duration(12+r.IntN(12)) * time.Second
	}
	return out
}

func TestSoak(t *testing.T) {
	durEnv := os.Getenv("SOAK_DURATION")
	if durEnv == "" {
		t.Skip("SOAK_DURATION not set: the soak runs only on demand (doc/soak.md)")
	}
	dur, err := time.ParseDuration(durEnv)
	if err != nil {
		t.Fatalf("SOAK_DURATION=%q: %v", durEnv, err)
	}
	seed := uint64(1)
	if v := os.Getenv("SOAK_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
	}
	scName := os.Getenv("SOAK_SCALE")
	if scName == "" {
		scName = "full"
	}
	sc, ok := scales[scName]
	if !ok {
		t.Fatalf("SOAK_SCALE=%q: full or ci", scName)
	}
	// SOAK_LOAD multiplies the log entries' rate and keeps the jobs'
	// length (and so the jobs at once): k times the entries, each k
	// times sooner. The highest load the machine sustains is the
	// largest k whose entries/s follow (doc/soak.md, "Load").
	if v := os.Getenv("SOAK_LOAD"); v != "" {
		k, err := strconv.ParseFloat(v, 64)
		if err != nil || k < 1 || k > 100 {
			t.Fatalf("SOAK_LOAD=%q: a factor from 1 to 100", v)
		}
		sc.EntryInterval = time.Duration(float64(sc.EntryInterval) / k)
		sc.MinEntries = int(float64(sc.MinEntries) * k)
		sc.MaxEntries = int(float64(sc.MaxEntries) * k)
		sc.Name += fmt.Sprintf("×%g", k)
	}
	dir := os.Getenv("SOAK_OUT")
	if dir == "" {
		dir, err = os.MkdirTemp("", "soak-")
		if err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: %v, seed %d, scale %s, output in %s", dur, seed, sc.Name, dir)
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, seed: seed, sc: sc, rec: rec, dir: dir, work: irctest.ReadableTempDir(t), jobs: newJobList(sc.PickWindow), restart: make(chan *pipe, 256), reportSeen: make(chan struct{}, 1), ev: &evidence{dir: dir}}
	closed := false
	defer func() {
		if !closed {
			rec.Close()
		}
	}()

	// One source drives the whole schedule; the users' plans and the
	// pipelines' shapes are drawn from it before anything starts.
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	only := map[string]bool{}
	if v := os.Getenv("SOAK_FAULTS"); v != "" {
		known := map[string]bool{}
		for _, f := range append(faultKinds, optInFaults...) {
			known[f] = true
		}
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "none" && !known[f] {
				t.Fatalf("SOAK_FAULTS: unknown fault %q", f)
			}
			only[f] = true
		}
	}
	sched := makeSchedule(rng, dur, only)
	s.note("soak: duration %v, seed %d, scale %+v", dur, seed, sc)
	for _, st := range sched {
		s.rec.Add(history.Event{Kind: history.Note, Text: fmt.Sprintf("schedule: at %v %s for %v (pick %.3f)", st.At, st.What, st.Dur, st.Pick)})
	}
	plans := make([][]cmdPlan, sc.Users)
	for i := range plans {
		plans[i] = planCommands(rng, 500, sc.Think)
		var kinds []string
		for _, c := range plans[i][:40] {
			kinds = append(kinds, c.Kind)
		}
		s.rec.Add(history.Event{Kind: history.Note, Text: fmt.Sprintf("schedule: user%d plan starts %s", i, strings.Join(kinds, " "))})
	}
	entries := func() string { return strconv.Itoa(sc.MinEntries + rng.IntN(sc.MaxEntries-sc.MinEntries+1)) }
	type shape struct{ entries string }
	var shapes []shape
	for range sc.APIPipes + sc.Direct + sc.Bridges*sc.PerBridge {
		shapes = append(shapes, shape{entries()})
	}
	probeSeed := rng.Uint64()

	// The deployment.
	s.bin = buildNode(t)
	s.redis = startRedis(t)
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	s.ircPort = portOf(irc.Addr())
	s.net = startNetFaults(t)
	feeds := s.fakeFeeds(t)
	for i, name := range []string{"node-a", "node-b"} {
		lf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		n := &node{name: name, uid: uidNode + i, web: testproc.FreeAddr(t), stream: testproc.FreeAddr(t), api: testproc.FreeAddr(t), logFile: lf,
			clockFile: filepath.Join(s.work, name+".clock")}
		n.cfg = writeNodeConfig(t, s.work, name, irc.URL(), s.redis.cl.SentinelAddrs(), feeds, n.web, n.stream, n.api, sc.IRCRate)
		s.nodes[i] = n
	}
	observer := irctest.Dial(t, irc.Addr(), "observer")
	observer.Join(channel) // first in: +o, gives it to the users
	s.nodes[0].start(t, s.bin)
	testproc.EventuallyWithin(t, time.Minute, "node-a to lead", func() bool { r, _ := readyz(s.nodes[0].web); return r == "leader" })
	s.nodes[1].start(t, s.bin)
	testproc.EventuallyWithin(t, time.Minute, "node-b to stand by", func() bool { r, _ := readyz(s.nodes[1].web); return r == "standby" })
	s.leader = "node-a"
	s.rec.Add(history.Event{Kind: history.Leader, Actor: "node-a"})
	observer.WaitBotPresent(botNick, channel)

	stopLoad := make(chan struct{})
	stopBG := make(chan struct{})
	var loadWG, bgWG sync.WaitGroup
	bgWG.Add(1)
	go func() { defer bgWG.Done(); s.pollLeader(stopBG) }()
	bgWG.Add(1)
	go func() { defer bgWG.Done(); s.observe(observer, stopBG) }()

	// Pipelines.
	s.api = apiProxy(t, s)
	s.master = startMasterProxy(t, s.redis)
	k := 0
	common := func(nick string) []string {
		a := []string{"simulate-pipeline", "-nickname", nick, "-entries", shapes[k].entries, "-entry-interval", sc.EntryInterval.String(),
			"-heartbeat-interval", "2s", "-report-interval", "5s", "-poll-interval", "3s"}
		k++
		return a
	}
	for i := range sc.APIPipes {
		name := fmt.Sprintf("api%02d", i)
		uid := uidPipe + len(s.pipes)
		key := s.newKey(name, uid)
		p := &pipe{name: name, uid: uid, via: viaAPI, key: name}
		p.args = append(common(name), "-node", "http://"+s.api, "-key", key, "-workers", strconv.Itoa(sc.APIWorkers))
		s.pipes = append(s.pipes, p)
	}
	for i := range sc.Direct {
		name := fmt.Sprintf("direct%02d", i)
		p := &pipe{name: name, uid: uidPipe + len(s.pipes), via: viaDirect}
		p.args = append(common(name), "-redis", "redis://"+s.master.addr()+"/0")
		s.pipes = append(s.pipes, p)
	}
	for i := range sc.Bridges {
		name := fmt.Sprintf("bridge-%d", i)
		b := &bridgeProc{name: name, uid: uidBridge + i, key: name, listen: testproc.FreeAddr(t)}
		keyFile := s.newKey(name, b.uid)
		b.args = []string{"bridge", "-key", keyFile, "-node", "http://" + s.api, "-listen", b.listen}
		s.startBridge(b)
		s.bridges = append(s.bridges, b)
		for j := range sc.PerBridge {
			pn := fmt.Sprintf("bridged%d-%d", i, j)
			p := &pipe{name: pn, uid: uidPipe + len(s.pipes), via: viaBridge, key: name}
			p.args = append(common(pn), append(bridgedArgs, "-redis", "redis://"+b.listen+"/0")...)
			s.pipes = append(s.pipes, p)
		}
	}
	for _, p := range s.pipes {
		s.startPipe(p, "started")
	}

	// Users: each its own connection, made op by the observer.
	var users []*irctest.User
	for i := range sc.Users {
		u := irctest.Dial(t, irc.Addr(), fmt.Sprintf("user%d", i))
		u.Join(channel)
		observer.Send("MODE %s +o %s", channel, u.Nick)
		users = append(users, u)
	}
	prober := irctest.Dial(t, irc.Addr(), "prober")
	prober.Join(channel)
	for _, u := range users {
		u.Expect("op", func(m ircmsg.Message) bool {
			return m.Command == "MODE" && strings.Contains(strings.Join(m.Params, " "), u.Nick)
		})
	}
	for i, u := range users {
		loadWG.Add(1)
		go func() { defer loadWG.Done(); s.runUser(u, plans[i], stopLoad) }()
	}
	for i := range sc.Viewers {
		loadWG.Add(1)
		go func() { defer loadWG.Done(); s.runViewer(fmt.Sprintf("viewer%02d", i), i%2 == 0, stopLoad) }()
	}
	bgWG.Add(1)
	go func() { defer bgWG.Done(); s.sampler(stopBG) }()

	// The schedule.
	start := time.Now()
	s.note("soak: load started; %d pipelines, %d users, %d viewers", len(s.pipes), len(users), sc.Viewers)
	probeRand := rand.New(rand.NewPCG(probeSeed, 1))
	faults := map[string]int{}
	for _, st := range sched {
		s.waitUntil(start.Add(st.At))
		switch st.What {
		case "quiet":
			s.quietPoint(prober, probeRand, st.Dur)
		case "pipeline-death":
			p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
			s.killPipe(p, "killed by the soak (a pipeline dying silently)")
		default:
			faults[st.What]++
			s.fault(st)
		}
	}
	s.waitUntil(start.Add(dur))

	// The end: load stops, the system drains, the last probe, Redis's
	// state, the checker.
	close(stopLoad)
	loadWG.Wait()
	s.note("soak: load stopped after %v; faults injected: %v", time.Since(start).Round(time.Second), faults)
	s.waitUntil(time.Now().Add(5 * time.Second))
	s.quietPoint(prober, probeRand, 0)
	// The observer reads the channel until Redis's state is taken: a
	// report of a job that ended in the last seconds is then either seen
	// or still waiting in Redis.
	s.goroutineDumps()
	s.fdView()
	s.redisView("the end, before the dump")
	// One atomic read (redistest.Snapshot): read key by key, while
	// pipelines still take and finish jobs, a job's hash of one moment
	// sat beside a queue of another, "stranded" jobs every server held
	// started and finished (the first long run's invariant 5).
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: s.redis.cl.SentinelAddrs(),
		DialTimeout: time.Second, ReadTimeout: time.Minute, WriteTimeout: 3 * time.Second})
	defer rdb.Close()
	dumpStarted := time.Now()
	dump, err := redistest.Snapshot(context.Background(), rdb)
	dumped := time.Now()
	if err != nil {
		t.Errorf("dump Redis at the end: %v", err)
	}
	close(stopBG)
	bgWG.Wait()
	s.strandedEvidence(dump)
	s.redisView("the end, after the dump")
	b, _ := json.MarshalIndent(dump, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "final_redis.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s.rec.Add(history.Event{T: dumped, Kind: history.Final, Text: "final_redis.json",
		Num: map[string]float64{"dump_started": float64(dumpStarted.UnixMicro()) / 1e6}})
	closed = true
	if err := rec.Close(); err != nil {
		t.Fatalf("history: %v", err)
	}
	t.Logf("soak: history in %s", filepath.Join(dir, "history.jsonl"))
	res, err := check.Run(dir)
	if err != nil {
		t.Fatalf("checker: %v", err)
	}
	t.Logf("soak: seed %d\n%s", seed, res.Summary())
	if res.Failed() {
		t.Errorf("soak: the checker found violations (seed %d; report %s)", seed, res.Report)
	}
}

// waitUntil sleeps until at, restarting pipelines that died meanwhile
// (the test goroutine starts processes).
func (s *soak) waitUntil(at time.Time) {
	for {
		d := time.Until(at)
		if d <= 0 {
			return
		}
		select {
		case p := <-s.restart:
			s.startPipe(p, "restarted")
		case <-time.After(d):
			return
		}
	}
}

// pollLeader records each change of the node holding the lease.
func (s *soak) pollLeader(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		// The lease holder: a node that says it leads, else the leader a
		// standby names; when neither node answers (one frozen, the other
		// slow), the last one known.
		cur, named, answered := "", "", false
		for _, n := range s.nodes {
			r, l := readyz(n.web)
			answered = answered || r != ""
			if r == "leader" {
				cur = n.name
			} else if l != "" {
				named = l
			}
		}
		if cur == "" {
			cur = named
		}
		s.leaderMu.Lock()
		if cur == "" && !answered {
			cur = s.leader
		}
		changed := cur != s.leader
		s.leader = cur
		s.leaderMu.Unlock()
		if changed {
			s.rec.Add(history.Event{Kind: history.Leader, Actor: cur})
		}
	}
}

// sampler records the processes' resources every sampleEvery.
func (s *soak) sampler(stop <-chan struct{}) {
	rdb := s.redis.failoverClient()
	defer rdb.Close()
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	cpu := newCPUMeter(s.bin)
	cpu.read()
	for tick := 1; ; tick++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if by, busy, cores, ok := cpu.read(); ok {
			num := map[string]float64{"cpu_busy": busy, "cores": cores}
			for g, v := range by {
				num["cpu_"+g] = v
			}
			s.rec.Add(history.Event{Kind: history.Sample, Actor: "machine", Num: num})
		}
		if tick%12 == 0 { // every minute
			s.fdView()
		}
		if tick%36 == 0 { // every 3 minutes
			s.goroutineDumps()
		}
		for _, n := range s.nodes {
			pid := n.pid()
			if pid == 0 {
				continue
			}
			num := procStats(pid)
			if g, ok := metric(n.web, "go_goroutines"); ok {
				num["goroutines"] = g
			}
			s.rec.Add(history.Event{Kind: history.Sample, Actor: n.name, Num: num})
		}
		for _, b := range s.bridges {
			if p := b.current(); p != nil && p.Running() {
				s.rec.Add(history.Event{Kind: history.Sample, Actor: b.name, Num: procStats(p.Pid())})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := rdb.Info(ctx, "memory").Result()
		if err == nil {
			for _, l := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
					f, _ := strconv.ParseFloat(v, 64)
					num := map[string]float64{"redis_used_memory": f}
					if tick%6 == 0 { // every 30 s
						if exp, err := expiringScript.Run(ctx, rdb, nil).Int64(); err == nil {
							num["redis_expiring_memory"] = float64(exp)
							num["redis_live_memory"] = f - float64(exp)
						}
					}
					s.rec.Add(history.Event{Kind: history.Sample, Actor: "redis", Num: num})
				}
			}
		}
		cancel()
	}
}

// expiringScript sums the memory of the keys that carry a TTL: what the
// deployment keeps by design until it expires (an ended job's record, log
// and history: 48 h or 7 days; nonces, sessions, take_ids), which grows
// with the jobs ended, not with time alone. Invariant 6 judges Redis
// memory less this (redis_live_memory); the raw figure is reported. One
// pass over the keyspace: tens of milliseconds every 30 s at the long
// run's size.
var expiringScript = redis.NewScript(`
local sum = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  if redis.call('PTTL', k) > 0 then
    sum = sum + (redis.call('MEMORY', 'USAGE', k) or 0)
  end
end
return sum`)

// procStats reads a process's RSS, open descriptors and CPU time.
func procStats(pid int) map[string]float64 {
	num := map[string]float64{}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					num["rss_bytes"] = kb * 1024
				}
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		num["fds"] = float64(len(ents))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b)[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				num["cpu_seconds"] = (ut + st) / 100 // USER_HZ
			}
		}
	}
	return num
}

// metric reads one unlabelled gauge from a node's /metrics.
func metric(addr, name string) (float64, bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// ---------------------------------------------------------------------
// Faults. Each runs on the test goroutine, recorded as a window from
// Fault start to Fault end.

func (s *soak) fault(st step) {
	start := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "start", Target: target})
		s.t.Logf("%s fault %s on %s", time.Now().Format("15:04:05"), st.What, target)
	}
	end := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "end", Target: target})
	}
	switch st.What {
	case "kill-leader":
		l := s.leaderNode()
		if l == nil {
			s.note("kill-leader skipped: no leader")
			return
		}
		// The hardest moment for at-least-once delivery: in the middle
		// of a burst of finish reports. The pipelines pause for 3 s and
		// go on, ending at once the jobs whose time came; the leader
		// dies as the burst's first report reaches the channel (or
		// after 10 s), its other notices taken and not yet said.
		procs := s.pipeProcs()
		for _, p := range procs {
			p.Signal(syscall.SIGSTOP)
		}
		time.Sleep(3 * time.Second)
		drain(s.reportSeen)
		for _, p := range procs {
			p.Signal(syscall.SIGCONT)
		}
		select {
		case <-s.reportSeen:
		case <-time.After(10 * time.Second):
		}
		start(l.name)
		l.current().Kill()
		s.waitLeader(s.otherNode(l).name, 30*time.Second)
		l.start(s.t, s.bin)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
	case "freeze-leader":
		l := s.leaderNode()
		if l == nil {
			s.note("freeze-leader skipped: no leader")
			return
		}
		start(l.name)
		p := l.current()
		p.Signal(syscall.SIGSTOP)
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		p.Signal(syscall.SIGCONT)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
	case "lose-redis-write":
		s.loseRedisWrite(st, start, end)
	case "kill-redis-master":
		addr := s.redis.masterAddr()
		start(addr)
		port, ok := s.redis.killMaster()
		if !ok {
			s.note("kill-redis-master: no process on port %d", port)
		}
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			if a := s.redis.masterAddr(); a != "" && a != addr {
				break
			}
			s.waitUntil(time.Now().Add(250 * time.Millisecond))
		}
		s.redisView(fmt.Sprintf("kill-redis-master of %s: the sentinels moved on", addr))
		if ok {
			s.redis.restartAsReplica(port)
		}
		end(addr)
		go func() {
			time.Sleep(10 * time.Second)
			s.redisView(fmt.Sprintf("kill-redis-master of %s: 10 s after its end", addr))
		}()
	case "pause-pipeline":
		// A pipeline process, or now and then a bridge.
		if len(s.bridges) > 0 && st.Pick < 0.2 {
			b := s.bridges[int(st.Pick/0.2*float64(len(s.bridges)))]
			start(b.name)
			p := b.current()
			p.Signal(syscall.SIGSTOP)
			s.waitUntil(time.Now().Add(st.Dur))
			p.Signal(syscall.SIGCONT)
			end(b.name)
			return
		}
		p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
		start(p.name)
		p.signal(syscall.SIGSTOP)
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "paused"})
		s.waitUntil(time.Now().Add(st.Dur))
		p.signal(syscall.SIGCONT)
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "resumed"})
		end(p.name)
	case "revoke-waiting":
		var api []*pipe
		for _, p := range s.pipes {
			if p.via == viaAPI {
				api = append(api, p)
			}
		}
		if len(api) == 0 {
			return
		}
		p := api[int(st.Pick*float64(len(api)))]
		old := p.key
		start(old)
		out, err := exec.Command(s.bin, "pipeline-key", "-config", s.nodes[0].cfg, "revoke", old).CombinedOutput()
		if err != nil {
			s.note("revoke %s failed: %v: %s", old, err, strings.TrimSpace(string(out)))
		} else {
			s.rec.Add(history.Event{Kind: history.Revoke, Target: old})
		}
		// Its pipeline keeps asking with the revoked key for a while;
		// then the volunteer gets a fresh key and starts again.
		s.waitUntil(time.Now().Add(st.Dur))
		s.killPipe(p, "its key was revoked")
		fresh := fmt.Sprintf("%s-r%d", p.name, p.gen)
		file := s.newKey(fresh, p.uid)
		p.key = fresh
		for i, a := range p.args {
			if a == "-key" {
				p.args[i+1] = file
			}
		}
		end(old)
	case "partition-node-redis":
		// The leader (mostly) or the standby, cut from every Redis
		// server and sentinel for longer than the lease.
		n := s.leaderNode()
		if n == nil || st.Pick >= 0.7 {
			n = s.nodes[int(st.Pick*10)%2]
		}
		var ports []int
		for _, p := range append(append([]*redistest.Proc{s.redis.cl.Master}, s.redis.cl.Replicas...), s.redis.cl.Sentinels...) {
			ports = append(ports, p.Port)
		}
		h := s.net.cut(n.uid, ports)
		if h == 0 {
			s.note("partition-node-redis skipped: no nftables")
			return
		}
		start(n.name)
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		s.net.heal(h)
		s.waitUntil(time.Now().Add(3 * time.Second))
		end(n.name)
	case "partition-pipeline-node":
		// A pipeline cut from where it reaches the node: the API's
		// address, the master's, or its bridge.
		p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
		ports := []int{portOf(s.api), portOf(s.master.addr())}
		for _, b := range s.bridges {
			ports = append(ports, portOf(b.listen))
		}
		h := s.net.cut(p.uid, ports)
		if h == 0 {
			s.note("partition-pipeline-node skipped: no nftables")
			return
		}
		start(p.name)
		s.waitUntil(time.Now().Add(st.Dur))
		s.net.heal(h)
		end(p.name)
	case "partition-leader-irc":
		l := s.leaderNode()
		if l == nil {
			s.note("partition-leader-irc skipped: no leader")
			return
		}
		// Half the time the packets are dropped (the connection
		// hangs, its keepalive outlasts the fault), half the time
		// answered with a reset: the leader's IRC connection breaks and
		// it reconnects when the fault ends (a server restart, a
		// netsplit), while notices keep coming due.
		h, target := 0, l.name
		if st.Pick < 0.5 {
			h = s.net.cut(l.uid, []int{s.ircPort})
		} else {
			h, target = s.net.reset(l.uid, []int{s.ircPort}), l.name+" reset"
		}
		if h == 0 {
			s.note("partition-leader-irc skipped: no nftables")
			return
		}
		start(target)
		s.waitUntil(time.Now().Add(st.Dur + 5*time.Second))
		s.net.heal(h)
		end(target)
	case "clock-skew":
		// One node's clock 30 s ahead of or behind the other's (and
		// Redis's), through its ARCHIVEBOT_CLOCK_OFFSET_FILE
		// (internal/clock): the leader (mostly) or the standby. A node
		// whose clock is off by more than ha.max_clock_skew does not
		// lead (doc/reliability.md): a skewed leader steps down at its
		// next renewal and the other takes over; a skewed standby does
		// not campaign. Then the clock is put right.
		n := s.leaderNode()
		if n == nil || st.Pick >= 0.7 {
			n = s.nodes[int(st.Pick*10)%2]
		}
		d := 30 * time.Second
		if int(st.Pick*100)%2 == 1 {
			d = -d
		}
		target := fmt.Sprintf("%s %+ds", n.name, int(d/time.Second))
		start(target)
		if err := n.skew(d); err != nil {
			s.note("clock-skew: %v", err)
		}
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		if err := n.skew(0); err != nil {
			s.note("clock-skew: %v", err)
		}
		s.waitUntil(time.Now().Add(3 * time.Second))
		end(target)
	case "restart-bridge":
		if len(s.bridges) == 0 {
			return
		}
		b := s.bridges[int(st.Pick*float64(len(s.bridges)))]
		start(b.name)
		if p := b.current(); p != nil {
			p.Term(10 * time.Second)
		}
		s.startBridge(b)
		end(b.name)
	}
}

func (s *soak) waitLeader(name string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if n := s.leaderNode(); n != nil && n.name == name {
			return
		}
		s.waitUntil(time.Now().Add(200 * time.Millisecond))
	}
	s.note("%s did not take the lease within %v", name, within)
}

func (s *soak) waitRole(n *node, role string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if r, _ := readyz(n.web); r == role {
			return
		}
		s.waitUntil(time.Now().Add(200 * time.Millisecond))
	}
	s.note("%s was not %s within %v", n.name, role, within)
}

// ---------------------------------------------------------------------
// Quiet points: no fault is active (faults run one at a time, between
// steps), the users' commands are held, the pipelines are frozen so
// nothing changes while the node is asked, and each of up to 50 jobs is
// probed on /jobs/IDENT, with !status IDENT, and in the dashboard's list
// (/jobs).

// pipeProcs are the pipelines' processes now running.
func (s *soak) pipeProcs() []interface{ Signal(syscall.Signal) error } {
	var procs []interface{ Signal(syscall.Signal) error }
	for _, p := range s.pipes {
		p.mu.Lock()
		if p.proc != nil && !p.dead {
			procs = append(procs, p.proc)
		}
		p.mu.Unlock()
	}
	return procs
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func (s *soak) quietPoint(prober *irctest.User, r *rand.Rand, settle time.Duration) {
	s.gate.Lock()
	defer s.gate.Unlock()
	procs := s.pipeProcs()
	for _, p := range procs {
		p.Signal(syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range procs {
			p.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(settle + time.Second)
	s.rec.Add(history.Event{Kind: history.Quiet, Outcome: "start"})
	defer s.rec.Add(history.Event{Kind: history.Quiet, Outcome: "end"})
	l := s.leaderNode()
	if l == nil {
		s.note("quiet point without a leader: probes skipped")
		return
	}
	ids := s.jobs.sample(r, 50)
	c := http.Client{Timeout: 5 * time.Second}
	listed := map[string]string{}
	// The list is read once, here: each job's dashboard probe is stamped
	// with this time, not with when the loop below gets to it (up to 50
	// jobs later, seconds after; a job the reaper failed meanwhile read
	// as "stale").
	listedAt := time.Now()
	if resp, err := c.Get("http://" + l.web + "/jobs"); err == nil {
		var body struct {
			Jobs []struct {
				Ident string `json:"ident"`
				State string `json:"state"`
			} `json:"jobs"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		for _, j := range body.Jobs {
			listed[j.Ident] = j.State
		}
	}
	for _, id := range ids {
		state, raw := "absent", ""
		if resp, err := c.Get("http://" + l.web + "/jobs/" + id); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			raw = string(b)
			var v struct {
				State string `json:"state"`
			}
			if resp.StatusCode == 200 && json.Unmarshal(b, &v) == nil && v.State != "" {
				state = v.State
			}
		} else {
			state, raw = "error", err.Error()
		}
		s.rec.Add(history.Event{Kind: history.Probe, Via: "jobs_api", Ident: id, Outcome: state, Text: cut(raw, 500)})
		ls, ok := listed[id]
		if !ok {
			ls = "absent"
		}
		s.rec.Add(history.Event{T: listedAt, Kind: history.Probe, Via: "dashboard", Ident: id, Outcome: ls})
		prober.Mark()
		prober.Say(channel, "!status "+id)
		m, err := prober.WaitWithin(replyWait, "status", replyTo(prober.Nick))
		if err != nil {
			s.rec.Add(history.Event{Kind: history.Probe, Via: "status", Ident: id, Outcome: "timeout"})
			continue
		}
		text := strings.TrimPrefix(m.Params[1], prober.Nick+": ")
		s.rec.Add(history.Event{Kind: history.Probe, Via: "status", Ident: id, Outcome: statusState(text), Text: cut(text, 500)})
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// statusState reads the state a !status IDENT answer states (the checker
// has the raw text too).
func statusState(text string) string {
	l := strings.ToLower(text)
	switch {
	case strings.Contains(l, "no job") || strings.Contains(l, "unknown") || strings.Contains(l, "not found") || strings.Contains(l, "don't know"):
		return "absent"
	case strings.Contains(l, "failed"):
		return "failed"
	case strings.Contains(l, "aborted"):
		return "aborted"
	case strings.Contains(l, "finished") || strings.Contains(l, "completed"):
		return "finished"
	case strings.Contains(l, "in progress") || strings.Contains(l, "running"):
		return "running"
	case strings.Contains(l, "queued") || strings.Contains(l, "pending") || strings.Contains(l, "waiting"):
		return "queued"
	}
	return "other"
}

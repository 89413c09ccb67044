package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// QuietEvery is the time between quiet points.
	QuietEvery time.Duration
}

var scales = map[string]scale{
	// The scale: 200 jobs at once on 50 pipelines, 1,000 log
	// entries/s (200 jobs × 5/s), 20 viewers, 10 users.
	// Jobs last 200–400 entries (40–80 s): the 10 users queue about
	// 3.7 jobs/s (44 % of a command every 1.2 s each), which keeps
	// 3.7 × 60 s ≈ 220 jobs wanting a slot, so the 200 slots stay busy
	// (with 100–300 entries only about 150 were: 740 entries/s at most).
	"full": {Name: "full", APIPipes: 25, APIWorkers: 7, Direct: 15, Bridges: 2, PerBridge: 5, Viewers: 20, Users: 10,
		MinEntries: 200, MaxEntries: 400, EntryInterval: 200 * time.Millisecond, Think: 1500 * time.Millisecond, PickWindow: 300, IRCRate: 30, QuietEvery: 40 * time.Second},
	"ci": {Name: "ci", APIPipes: 6, APIWorkers: 3, Direct: 3, Bridges: 1, PerBridge: 2, Viewers: 4, Users: 4,
		MinEntries: 30, MaxEntries: 100, EntryInterval: 200 * time.Millisecond, Think: 1500 * time.Millisecond, PickWindow: 30, IRCRate: 10, QuietEvery: 80 * time.Second},
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
	// prober: the IRC user of the quiet points, the schedule's pause and
	// the command a frozen leader holds (hold_test.go); test goroutine
	// only. held: the held commands so far.
	prober *irctest.User
	held   int
	// flights: the API takes in flight at the proxy (revoke_test.go);
	// revokeJobs: the jobs queued for a revoked key's waiting take so
	// far (test goroutine only).
	flights    flights
	revokeJobs int

	gate sync.RWMutex // users hold it read-locked per command; quiet points lock it
	// reportSeen gets a value (when empty) each time the observer sees a
	// finish report in the channel.
	reportSeen chan struct{}
	nextID     atomic.Int64
	// takesNone counts the API takes the node answered with no job
	// (the API proxy's; pause_test.go).
	takesNone atomic.Int64

	leaderMu sync.Mutex
	leader   string

	ev *evidence // evidence_test.go

	// The faults: the kinds the schedule drew, each kind's injections,
	// and why each one that could not be injected was not
	// (faults_test.go).
	wanted   []string
	injected map[string]int
	skipped  map[string][]string
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
	s := &soak{t: t, seed: seed, sc: sc, rec: rec, dir: dir, work: irctest.ReadableTempDir(t), jobs: newJobList(sc.PickWindow), restart: make(chan *pipe, 256), reportSeen: make(chan struct{}, 1), ev: &evidence{dir: dir}, injected: map[string]int{}, skipped: map[string][]string{}}
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
	profile, _ := sentinelProfile(t)
	sched, schedEnd := makeSchedule(rng, dur, only, profileLease(profile), sc.QuietEvery)
	s.wanted = scheduledKinds(sched)
	s.note("soak: duration %v, seed %d, scale %+v", dur, seed, sc)
	if need := schedEnd + scheduleCool; need > dur {
		// The first round of faults is drawn whole: every kind once.
		s.note("soak: the schedule (its first round of faults drawn whole: every kind once) and the cool-down need %v: the run lasts that, not SOAK_DURATION=%v", need.Round(time.Second), dur)
		dur = need
	}
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
	// The prober is op too: the schedule's own pause (pause_test.go).
	prober := irctest.Dial(t, irc.Addr(), "prober")
	s.prober = prober
	prober.Join(channel)
	observer.Send("MODE %s +o %s", channel, prober.Nick)
	for _, u := range append(users, prober) {
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
	for _, st := range sched {
		s.waitUntil(start.Add(st.At))
		switch st.What {
		case "quiet":
			s.quietPoint(prober, probeRand, st.Dur)
		case pauseQueue:
			s.pauseWithBacklog(prober, st)
		case "pipeline-death":
			p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
			s.killPipe(p, "killed by the soak (a pipeline dying silently)")
		default:
			s.runFault(st)
		}
	}
	// A step that ran late still gets the cool-down after it.
	end := start.Add(dur)
	if late := time.Now().Add(scheduleCool); late.After(end) {
		s.note("soak: the schedule ran %v late: the load goes on until %v after its last step", late.Sub(end).Round(time.Second), scheduleCool)
		end = late
	}
	s.waitUntil(end)

	// The end: load stops, the system drains, the last probe, Redis's
	// state, the checker.
	close(stopLoad)
	loadWG.Wait()
	s.note("soak: load stopped after %v; %s", time.Since(start).Round(time.Second), s.faultLine())
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
	// The summary's first line: each fault kind and how many times it
	// was injected (a kind drawn and never injected says why).
	summary := fmt.Sprintf("faults injected (seed %d): %s\n%s", seed, s.faultLine(), res.Summary())
	os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644)
	t.Logf("soak summary:\n%s", summary)
	if msg := s.notInjectedFailure(); msg != "" {
		if os.Getenv("CI") != "" {
			t.Errorf("soak: %s (CI is set: a fault that could not be injected fails the run)", msg)
		} else {
			t.Logf("soak: WARNING: %s; this run does not show those faults", msg)
		}
	}
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

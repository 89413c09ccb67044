package main

// Helpers of the whole-process end-to-end tests (e2e_test.go,
// e2e_process_test.go): the control node run in this process through run()
// or as a child process, its log, pipeline simulators, and the lines the
// channel sees.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

const (
	botNick = "ArchiveBot"
	// envChild makes the test binary run the control node (run with the
	// remaining arguments) instead of the tests: the SIGKILL and SIGTERM
	// tests re-execute it as the real process.
	envChild = "ARCHIVEBOT_E2E_CHILD"
	// Keys as pipelines and our own code spell them (doc/protocol.md),
	// written out here so that a misspelt key fails the tests.
	keyNotices    = "finish_notifications"
	keyProcessing = "archivebot:finish_notifications:processing"
	keyWorking    = "working"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The configuration would take REDIS_URL over the test's redis.url.
	os.Unsetenv("REDIS_URL")
	// In-process nodes are stopped with SIGTERM to this process, as an
	// operator would stop the real one. run() catches it while it runs;
	// this catches one that comes when no node runs, so that it can never
	// kill the test binary.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM)
	// A node run without redis.data_dir keeps its state under
	// $XDG_STATE_HOME/archivebot: here a directory of this test run's
	// own, not the user's.
	state, err := os.MkdirTemp("", "archivebot-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", state)
	// The parallel tests mostly wait (on child nodes, ngircd, Redis,
	// leases): run four at once even on two cores, unless -parallel says
	// otherwise.
	testproc.WaitingParallel(4)
	code := m.Run()
	stopChrome() // the browser tests' chromium (browser_test.go)
	os.RemoveAll(state)
	os.Exit(code)
}

// ---------------------------------------------------------------------
// Recording and waiting.

// recorder keeps what arrives and lets the test wait for an item with a
// deadline.
type recorder[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newRecorder[T any]() *recorder[T] { return &recorder[T]{wake: make(chan struct{})} }

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

func (r *recorder[T]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// wait returns the first item from index from on that matches, and its
// index; ok is false when none came within d.
func (r *recorder[T]) wait(from int, d time.Duration, pred func(T) bool) (item T, idx int, ok bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.items); i++ {
			if pred(r.items[i]) {
				v := r.items[i]
				r.mu.Unlock()
				return v, i, true
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			var zero T
			return zero, -1, false
		}
	}
}

// lineLog is an io.Writer that records whole lines (a node's log output).
type lineLog struct {
	*recorder[string]
	pmu     sync.Mutex
	partial []byte
}

func newLineLog() *lineLog { return &lineLog{recorder: newRecorder[string]()} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := strings.IndexByte(string(l.partial), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.add(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

// waitFor returns the first line from index from on containing substr.
func (l *lineLog) waitFor(t testing.TB, from int, substr string) (string, int) {
	t.Helper()
	line, i, ok := l.wait(from, irctest.WaitFor, func(s string) bool { return strings.Contains(s, substr) })
	if !ok {
		t.Fatalf("no log line containing %q within %v; log tail:\n%s", substr, irctest.WaitFor, l.tail(40))
	}
	return line, i
}

func (l *lineLog) tail(n int) string {
	lines := l.all()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// ---------------------------------------------------------------------
// Configuration.

// nodeConfig is the TOML configuration of a node under test: short
// intervals so that every service acts within a second.
type nodeConfig struct {
	ircURL   string
	channels []string
	// redisURL is an external Redis; empty: the embedded one in dataDir.
	redisURL string
	dataDir  string
	// mps and burst are the outbox rate; default 50/s, burst 10.
	mps   float64
	burst int
	// extra is appended to the file as written (more sections).
	extra string
}

func (c nodeConfig) write(t testing.TB) string {
	t.Helper()
	if c.mps == 0 {
		c.mps, c.burst = 50, 10
	}
	chans, _ := json.Marshal(c.channels)
	var b strings.Builder
	fmt.Fprintf(&b, `[irc]
server = %q
nick = %q
channels = %s
messages_per_second = %v
burst = %d
commands_per_minute = 1000

[redis]
`, c.ircURL, botNick, chans, c.mps, c.burst)
	if c.redisURL != "" {
		fmt.Fprintf(&b, "url = %q\n", c.redisURL)
	} else {
		fmt.Fprintf(&b, "listen = \"127.0.0.1:0\"\ndata_dir = %q\nsave_interval = \"1h\"\n", c.dataDir)
	}
	b.WriteString(`
[reaper]
interval = "100ms"
threshold = 10
auto_fail = true

[notifier]
finish_interval = "200ms"
start_interval = "200ms"
pipeline_interval = "300ms"
pipeline_silent_after = "2s"

[analyzer]
sweep_interval = "1s"

[tweeter]
interval = "1h"

[http]
listen = "127.0.0.1:0"
stream_listen = "127.0.0.1:0"
`)
	b.WriteString(c.extra)
	p := filepath.Join(t.TempDir(), "archivebot.toml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---------------------------------------------------------------------
// The control node in this process.

// nodeMu allows one in-process node at a time: SIGTERM stops every run()
// of the process. The tests that start one are not parallel: made
// parallel, they waited here each holding one of the -parallel slots,
// and the child-process tests waited for the slots (121 s for the
// package, against 110 s with them in the sequential phase).
var nodeMu sync.Mutex

// node is run() in this process, as main runs it.
type node struct {
	t    testing.TB
	log  *lineLog // stderr: the slog output
	out  *lineLog // stdout
	done chan int
	code int
	over bool
}

// startNode runs the control node with the configuration file cfg until
// stop (or the end of the test).
func startNode(t testing.TB, cfg string) *node {
	t.Helper()
	nodeMu.Lock()
	n := &node{t: t, log: newLineLog(), out: newLineLog(), done: make(chan int, 1)}
	go func() { n.done <- run([]string{"-config", cfg}, strings.NewReader(""), n.out, n.log) }()
	t.Cleanup(func() {
		if !n.over {
			n.stop()
		}
		nodeMu.Unlock()
		if t.Failed() || os.Getenv("E2E_LOG") != "" {
			t.Logf("node log (tail):\n%s", n.log.tail(200))
		}
	})
	return n
}

// stop sends SIGTERM to this process and waits for run() to return; it
// checks the exit code is 0 and returns how long that took.
func (n *node) stop() time.Duration {
	n.t.Helper()
	n.over = true
	select {
	case code := <-n.done:
		n.t.Errorf("node had already exited with code %d", code)
		return 0
	default:
	}
	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		n.t.Fatal(err)
	}
	select {
	case n.code = <-n.done:
	case <-time.After(irctest.WaitFor):
		n.t.Fatalf("run() did not return within %v of SIGTERM", irctest.WaitFor)
	}
	if n.code != 0 {
		n.t.Errorf("run() returned %d after SIGTERM", n.code)
	}
	return time.Since(start)
}

// ---------------------------------------------------------------------
// The control node as a child process: this test binary re-executed with
// envChild set, so that it can be killed.

type child struct {
	*testproc.Proc
	log   *lineLog // stdout and stderr
	start time.Time
}

// childEnv is this process's environment for a child node: envChild set,
// REDIS_URL unset, and the race detector's exit delay off (under -race the
// child would sleep a second before exiting, to let race reports out,
// which would be measured as shutdown time; race reports still make it
// exit with code 66).
func childEnv() []string {
	gorace := "atexit_sleep_ms=0"
	env := []string{envChild + "=1"}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		case !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, envChild+"="):
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+gorace)
}

// startChild runs the node with the configuration file cfg as a child.
func startChild(t testing.TB, cfg string) *child {
	t.Helper()
	return startChildWith(t, []string{"-config", cfg}, testproc.Options{Env: childEnv()})
}

// startChildWith runs this test binary as the node with args and o (its
// output also goes to the child's lineLog; E2E_LOG logs it when the test
// passed too).
func startChildWith(t testing.TB, args []string, o testproc.Options) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{log: newLineLog(), start: time.Now()}
	o.Output, o.Tail, o.LogAlways = c.log, 200, os.Getenv("E2E_LOG") != ""
	c.Proc = testproc.Start(t, "child node", exe, args, o)
	return c
}

func (c *child) running() bool { return c.Running() }

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() { c.Kill() }

// term sends SIGTERM and returns the exit code and how long the process
// took to exit; -1 when it did not exit within irctest.WaitFor (then it
// is killed).
func (c *child) term() (int, time.Duration) { return c.Term(irctest.WaitFor) }

// ---------------------------------------------------------------------
// IRC.

// rolesIn connects an op (first to join, so ngircd makes them +o), a
// voiced user and a plain user to channel, before the bot.
func rolesIn(t testing.TB, irc *irctest.Ngircd, channel string) (op, voice, plain *irctest.User) {
	t.Helper()
	op = irctest.Dial(t, irc.Addr(), "opal")
	op.Join(channel)
	voice = irctest.Dial(t, irc.Addr(), "vera")
	voice.Join(channel)
	plain = irctest.Dial(t, irc.Addr(), "paul")
	plain.Join(channel)
	op.Send("MODE %s +v vera", channel)
	voice.Expect("+v", func(m ircmsg.Message) bool {
		return m.Command == "MODE" && len(m.Params) == 3 && m.Params[1] == "+v" && m.Params[2] == "vera"
	})
	return op, voice, plain
}

// channelWithRoles starts ngircd with an op, a voiced and a plain user in
// ch (rolesIn), and writes the configuration of a node in ch on b.
func channelWithRoles(t testing.TB, b *redistest.Backend, ch string) (irc *irctest.Ngircd, cfg string, op, voice, plain *irctest.User) {
	t.Helper()
	irc = irctest.StartNgircd(t, irctest.NgircdOptions{})
	cfg = nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t)
	op, voice, plain = rolesIn(t, irc, ch)
	return irc, cfg, op, voice, plain
}

// nodeInChannel is channelWithRoles with the node started in this process
// (startNode) in ch; it returns the users once the op saw the bot join.
func nodeInChannel(t testing.TB, b *redistest.Backend, ch string) (op, voice, plain *irctest.User) {
	t.Helper()
	_, cfg, op, voice, plain := channelWithRoles(t, b, ch)
	startNode(t, cfg)
	op.WaitBotIn(botNick, ch)
	return op, voice, plain
}

// childInChannel is channelWithRoles with the node started as a child
// process in ch; it returns the users once the plain user saw the bot
// join.
func childInChannel(t testing.TB, b *redistest.Backend, ch string) (op, voice, plain *irctest.User) {
	t.Helper()
	_, cfg, op, voice, plain := channelWithRoles(t, b, ch)
	startChild(t, cfg)
	plain.WaitBotIn(botNick, ch)
	return op, voice, plain
}

// ask sends text in channel and returns the bot's answers, joined.
func ask(u *irctest.User, channel, text string) string {
	return strings.Join(u.Ask(botNick, channel, text), "\n")
}

// fromBot matches a PRIVMSG from the bot (under its nick or an alternate,
// ArchiveBot_…, while a killed predecessor still holds it) in channel.
func fromBot(channel string, text func(string) bool) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) == 2 && strings.HasPrefix(m.Nick(), botNick) &&
			strings.EqualFold(m.Params[0], channel) && text(m.Params[1])
	}
}

func textIs(want string) func(string) bool { return func(s string) bool { return s == want } }

func textHas(parts ...string) func(string) bool {
	return func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	}
}

// botLines returns the text of the bot's PRIVMSGs in channel that u saw.
func botLines(u *irctest.User, channel string) []string {
	var out []string
	for _, m := range u.Messages(0) {
		if fromBot(channel, func(string) bool { return true })(m) {
			out = append(out, m.Params[1])
		}
	}
	return out
}

func countLines(lines []string, match func(string) bool) int {
	n := 0
	for _, l := range lines {
		if match(l) {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------------
// Jobs, notices, pipelines.

func identOf(t testing.TB, raw string) (normalized, id string) {
	t.Helper()
	normalized, id, err := ident.FromURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return normalized, id
}

// finishLine is the channel line for a finished job (doc/protocol.md, Counters, finish notices and tweets).
func finishLine(nick, url string, aborted bool) string {
	how := "has finished"
	if aborted {
		how = "was aborted"
	}
	return fmt.Sprintf("%s: Your job for %s %s. (%s)", nick, url, how, ident.Of(url))
}

// isFinishOf matches any finish line for the job with this ident: its
// own line, or a combined one ("vera: 6 of your jobs finished: URL
// (IDENT), …") when notices backed up.
func isFinishOf(id string) func(string) bool {
	return func(s string) bool {
		if strings.Contains(s, "Your job for ") {
			if strings.Contains(s, " has started on ") {
				return false
			}
			return strings.HasSuffix(s, "("+id+")")
		}
		return strings.Contains(s, "jobs finished: ") &&
			(strings.Contains(s, " ("+id+")") || strings.Contains(s, " ("+id+", aborted)"))
	}
}

// pushNotice RPUSHes a finish notification as a pipeline does (doc/protocol.md).
func pushNotice(t testing.TB, rdb *redis.Client, n pipelinesim.FinishNotice) {
	t.Helper()
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(context.Background(), keyNotices, b).Err(); err != nil {
		t.Fatal(err)
	}
}

// waitNoticesDrained waits until every finish notice is delivered and
// acknowledged: the notice list and the in-delivery list are both empty.
func waitNoticesDrained(t testing.TB, rdb *redis.Client) {
	t.Helper()
	for _, key := range []string{keyNotices, keyProcessing} {
		testproc.Eventually(t, key+" to be empty", func() bool {
			n, err := rdb.LLen(context.Background(), key).Result()
			return err == nil && n == 0
		})
	}
}

func notice(nick, channel, url string) pipelinesim.FinishNotice {
	return pipelinesim.FinishNotice{FetchDepth: "inf", PipelineID: "pipeline:e2e", QueuedAt: time.Now().Unix(),
		StartedBy: nick, StartedIn: channel, URL: url}
}

// simRun is a simulated pipeline running on its own (Pipeline.Run), with
// its events recorded.
type simRun struct {
	p      *pipelinesim.Pipeline
	events *recorder[pipelinesim.Event]
	cancel context.CancelFunc
	done   chan error
	err    error
	// firstReport is when its first report was written.
	firstReport chan time.Time
}

// fastRun are run options with the pipeline reporting every 100 ms and
// heartbeating every 50 ms; entries, entryInterval and crashAfter shape
// its jobs.
func fastRun(entries int, entryInterval time.Duration, crashAfter int) pipelinesim.RunOptions {
	return pipelinesim.RunOptions{
		ReportInterval:    100 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond,
		PollInterval:      50 * time.Millisecond,
		EntryInterval:     entryInterval,
		Entries:           entries,
		CrashAfter:        crashAfter,
	}
}

func runSim(t testing.TB, rdb *redis.Client, cfg pipelinesim.Config, o pipelinesim.RunOptions) *simRun {
	t.Helper()
	s := &simRun{p: pipelinesim.New(rdb, cfg), events: newRecorder[pipelinesim.Event](),
		done: make(chan error, 1), firstReport: make(chan time.Time, 1)}
	var once sync.Once
	o.OnEvent = func(e pipelinesim.Event) {
		if e.Kind == pipelinesim.EventReport && e.Err == nil {
			once.Do(func() { s.firstReport <- time.Now() })
			return
		}
		s.events.add(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- s.p.Run(ctx, o) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// waitEvent waits for an event of kind (for ident, when not empty).
func (s *simRun) waitEvent(t testing.TB, kind, id string) time.Time {
	t.Helper()
	_, _, ok := s.events.wait(0, irctest.WaitFor, func(e pipelinesim.Event) bool {
		return e.Kind == kind && (id == "" || e.Ident == id)
	})
	if !ok {
		t.Fatalf("pipeline %q: no %s event for %q; events: %v", s.p.Nickname(), kind, id, s.events.all())
	}
	return time.Now()
}

// waitLogs waits until the pipeline shipped n log entries of job id.
func (s *simRun) waitLogs(t testing.TB, id string, n int) {
	t.Helper()
	_, _, ok := s.events.wait(0, irctest.WaitFor, func(e pipelinesim.Event) bool {
		return e.Kind == pipelinesim.EventLog && e.Ident == id && e.N >= int64(n)
	})
	if !ok {
		t.Fatalf("pipeline %q: fewer than %d log entries for %s", s.p.Nickname(), n, id)
	}
}

// stop ends Run (a clean exit unless it crashed) and returns its error.
func (s *simRun) stop(t testing.TB) error {
	if s.cancel == nil {
		return s.err
	}
	s.cancel()
	s.cancel = nil
	select {
	case s.err = <-s.done:
	case <-time.After(irctest.WaitFor):
		t.Errorf("pipeline %q did not stop", s.p.Nickname())
	}
	return s.err
}

// wait waits for Run to return on its own (a crash).
func (s *simRun) wait(t testing.TB) error {
	t.Helper()
	select {
	case s.err = <-s.done:
		s.cancel()
		s.cancel = nil
		return s.err
	case <-time.After(irctest.WaitFor):
		t.Fatalf("pipeline %q still running", s.p.Nickname())
		return nil
	}
}

func connectedLine(p *pipelinesim.Pipeline, version string) string {
	return fmt.Sprintf("Pipeline %q (%s, version %s) connected.", p.Nickname(), p.Key(), version)
}

func disconnectedLine(p *pipelinesim.Pipeline) string {
	return fmt.Sprintf("Pipeline %q (%s) disconnected.", p.Nickname(), p.Key())
}

func silentPrefix(p *pipelinesim.Pipeline) string {
	return fmt.Sprintf("Pipeline %q (%s) has not reported for ", p.Nickname(), p.Key())
}

const simVersion = "20250101.01" // pipelinesim's default version

// expectEach waits for a message matching each of preds, in any order,
// from u's scan position; it leaves the scan position after the last one.
func expectEach(u *irctest.User, what string, preds ...func(ircmsg.Message) bool) []ircmsg.Message {
	start, end := u.Pos(), u.Pos()
	out := make([]ircmsg.Message, len(preds))
	for i, pred := range preds {
		u.SetPos(start)
		out[i] = u.Expect(fmt.Sprintf("%s (%d of %d)", what, i+1, len(preds)), pred)
		end = max(end, u.Pos())
	}
	u.SetPos(end)
	return out
}

// reaperCycles returns once the reaper has run at least n more cycles: a
// probe job in working whose heartbeat never advances gets one more
// death_timer step per cycle. n must stay below the threshold (the probe
// is taken out of working before it could be announced).
func reaperCycles(t testing.TB, rdb *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	probe := fmt.Sprintf("e2eprobe%d", time.Now().UnixNano())
	rdb.HSet(ctx, probe, "heartbeat", 1, "url", "https://example.com/probe")
	rdb.LPush(ctx, keyWorking, probe)
	defer func() {
		rdb.LRem(ctx, keyWorking, 0, probe)
		rdb.Del(ctx, probe)
	}()
	testproc.Eventually(t, fmt.Sprintf("%d reaper cycles", n), func() bool {
		v, err := rdb.HGet(ctx, probe, "death_timer").Int()
		return err == nil && v >= n
	})
}

func writeTemp(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

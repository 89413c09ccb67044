// Package testproc is the one harness the tests use to run real programs
// (redis-server, ngircd, chromium, Debian's python3, the control node as a
// child process) and the one way they wait for a condition.
//
//   - Bin finds a program. A missing one skips the test, except when the
//     environment variable CI is set (.ci/run sets it): then the test
//     fails, because CI must install it. Missing does the same for any
//     other missing prerequisite (a Python module).
//   - FreePort and FreeAddr give a loopback port that was free a moment ago.
//   - Start runs a command, records its output, optionally waits for a
//     line that says it is ready, stops it when the test ends and, when
//     the test failed, logs the tail of its output.
//   - Eventually polls a condition until it holds, failing the test after
//     WaitFor.
//
// Everything here reports through testing.TB and must be called from the
// test's goroutine (it calls t.Fatal), except the methods of Proc that say
// otherwise.
package testproc

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WaitFor bounds Eventually and every wait of this package; each step the
// tests wait for normally takes milliseconds.
const WaitFor = 10 * time.Second

// pollEvery is how often Eventually checks its condition.
const pollEvery = 10 * time.Millisecond

// InCI reports whether the environment variable CI is set: missing
// programs then fail the tests instead of skipping them.
func InCI() bool { return os.Getenv("CI") != "" }

// Missing skips the test saying what is missing, or fails it when CI is
// set (CI must provide it).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI is set: .ci/run must install it)", msg)
	}
	t.Skip(msg)
}

// Bin returns the path of the first of names found on PATH (a name with a
// slash is taken as a path and must exist); when none is, Missing.
func Bin(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if strings.Contains(n, "/") {
			if _, err := os.Stat(n); err == nil {
				return n
			}
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Missing(t, "%s not installed", strings.Join(names, " or "))
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// and that no earlier call in this process returned: the kernel may hand
// the port it just freed to the next bind(0), and two addresses of one
// configuration drawn one after the other were once the same (the soak's
// node-a, "http.stream_listen: 127.0.0.1:37215 is already in use", its
// web API on 37215).
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := listenLocal()
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port
		}
	}
	t.Fatal("FreePort: 100 ports in a row were ones handed out before")
	return 0
}

// listenLocal is FreePort's bind(0); a test stands in for the kernel.
var listenLocal = func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// handedOut holds the ports FreePort returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr is 127.0.0.1:FreePort.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// Eventually polls cond every 10 ms until it holds, failing the test with
// what after WaitFor. It returns how long it took.
func Eventually(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyWithin(t, WaitFor, what, cond)
}

// EventuallyWithin is Eventually with its own bound.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(pollEvery)
	}
	return time.Since(start)
}

// Options shape one process started by Start. The zero value runs the
// command with the test's environment, keeps its output for the failure
// log and kills it (SIGKILL) when the test ends.
type Options struct {
	// Env is the environment; nil: this process's.
	Env []string
	// Dir is the working directory; empty: the test's.
	Dir string
	// Stdin gives the process a pipe as its standard input (Proc.Stdin);
	// otherwise it reads from /dev/null.
	Stdin bool
	// Output also receives everything the process writes (stdout and
	// stderr), as it comes.
	Output io.Writer
	// Lines, when above zero, makes Proc.Lines a channel of this capacity
	// that carries each line of stdout and is closed when stdout ends.
	Lines int
	// Ready, when set, makes Start wait (up to WaitFor) for an output line
	// it accepts; the process exiting first fails the test.
	Ready func(line string) bool
	// Stop is the signal the end of the test sends (SIGKILL follows
	// after WaitFor); zero: SIGKILL.
	Stop syscall.Signal
	// Tail is how many lines of output the failure log shows; zero: 60.
	Tail int
	// LogAlways logs the tail even when the test passed.
	LogAlways bool
}

// Proc is a process started by Start.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Stdin is the process's standard input when Options.Stdin is set.
	Stdin io.WriteCloser
	// Lines carries stdout lines when Options.Lines is set.
	Lines <-chan string

	exited chan struct{}
	state  *os.ProcessState
	stop   syscall.Signal

	mu  sync.Mutex
	out bytes.Buffer
}

// output is the io.Writer both stdout and stderr end in.
type output struct {
	p     *Proc
	extra io.Writer
	ready func(string) bool
	lines chan string // stdout only; nil for stderr

	mu      sync.Mutex
	partial []byte
	readied *readied
}

// readied is closed once, by whichever stream shows the ready line.
type readied struct {
	ch   chan struct{}
	once sync.Once
}

func (o *output) Write(b []byte) (int, error) {
	o.p.mu.Lock()
	o.p.out.Write(b)
	o.p.mu.Unlock()
	if o.extra != nil {
		o.extra.Write(b)
	}
	if o.ready == nil && o.lines == nil {
		return len(b), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, b...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(o.partial[:i])
		o.partial = o.partial[i+1:]
		if o.ready != nil && o.ready(line) {
			o.readied.once.Do(func() { close(o.readied.ch) })
		}
		if o.lines != nil {
			o.lines <- line
		}
	}
}

// Start runs bin with args as the test's process name (for the logs). It
// returns once the process runs (and, with Options.Ready, once it said it
// is ready).
func Start(t testing.TB, name, bin string, args []string, o Options) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: exec.Command(bin, args...), exited: make(chan struct{}), stop: o.Stop}
	if p.stop == 0 {
		p.stop = syscall.SIGKILL
	}
	p.Cmd.Env, p.Cmd.Dir = o.Env, o.Dir
	ready := &readied{ch: make(chan struct{})}
	var lines chan string
	if o.Lines > 0 {
		lines = make(chan string, o.Lines)
		p.Lines = lines
	}
	// Each stream has its own line splitter; only stdout's lines reach
	// the channel.
	errOut := &output{p: p, extra: o.Output, ready: o.Ready, readied: ready}
	stdOut := &output{p: p, extra: o.Output, ready: o.Ready, readied: ready, lines: lines}
	var outPipe io.ReadCloser
	if lines != nil || o.Ready != nil {
		// Read through a pipe so that the lines arrive as they come and
		// stdout's end is seen when the process exits.
		r, err := p.Cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		outPipe = r
	} else {
		p.Cmd.Stdout = stdOut
	}
	p.Cmd.Stderr = errOut
	if o.Stdin {
		w, err := p.Cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin = w
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		if outPipe != nil {
			sc := bufio.NewScanner(outPipe)
			sc.Buffer(make([]byte, 64*1024), 4<<20)
			for sc.Scan() {
				stdOut.Write(append(sc.Bytes(), '\n'))
			}
			io.Copy(io.Discard, outPipe)
			if lines != nil {
				close(lines)
			}
		}
		p.Cmd.Wait()
		p.state = p.Cmd.ProcessState
		close(p.exited)
	}()
	tail := o.Tail
	if tail == 0 {
		tail = 60
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || o.LogAlways {
			t.Logf("%s (pid %d) output (tail):\n%s", name, p.Pid(), p.Tail(tail))
		}
	})
	if o.Ready != nil {
		select {
		case <-ready.ch:
		case <-p.exited:
			t.Fatalf("%s exited at startup (%v); output:\n%s", name, p.state, p.Tail(tail))
		case <-time.After(WaitFor):
			t.Fatalf("%s did not say it is ready within %v; output:\n%s", name, WaitFor, p.Tail(tail))
		}
	}
	return p
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited and its output is read.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitCode is the exit code once the process exited (-1 for a signal),
// -1 while it runs.
func (p *Proc) ExitCode() int {
	if p.Running() {
		return -1
	}
	return p.state.ExitCode()
}

// State is the process's state once it exited; nil while it runs.
func (p *Proc) State() *os.ProcessState {
	if p.Running() {
		return nil
	}
	return p.state
}

// Signal sends sig to the process; once it exited, it does nothing and
// returns os.ErrProcessDone.
func (p *Proc) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return os.ErrProcessDone
	}
	return p.Cmd.Process.Signal(sig)
}

// Freeze sends SIGSTOP and returns once the kernel reports the process
// stopped (state T in /proc/PID/stat), or after 5 s: the signal is
// delivered asynchronously, and a process that runs on for a moment may
// still read and act on what a test sends right after Signal returned.
func (p *Proc) Freeze() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.Pid())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return err
		}
		// pid (comm) state …: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("pid %d not stopped 5 s after SIGSTOP", p.Pid())
}

// Kill sends SIGKILL and waits for the process to be gone. Any goroutine
// may call it.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop continues the process (in case a test stopped it with SIGSTOP),
// sends the stop signal (Options.Stop) and waits for it to exit, killing
// it after WaitFor. Stopping an exited process does nothing. The end of
// the test calls it.
func (p *Proc) Stop() {
	if !p.Running() {
		return
	}
	p.Cmd.Process.Signal(syscall.SIGCONT)
	p.Cmd.Process.Signal(p.stop)
	select {
	case <-p.exited:
	case <-time.After(WaitFor):
		p.Kill()
	}
}

// Term sends SIGTERM and returns the exit code and how long the process
// took to exit; -1 when it did not exit within d (it is then killed).
func (p *Proc) Term(d time.Duration) (int, time.Duration) {
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.state.ExitCode(), time.Since(start)
	case <-time.After(d):
		p.Kill()
		return -1, time.Since(start)
	}
}

// Output is everything the process wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Tail is the last n lines of Output.
func (p *Proc) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Output(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Expect waits up to within for the next stdout line (Options.Lines) that
// is word, or starts with word and a space, and returns its fields. The
// lines it passes over are logged.
func (p *Proc) Expect(t testing.TB, word string, within time.Duration) []string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-p.Lines:
			if !ok {
				t.Fatalf("%s exited before %q", p.Name, word)
			}
			if l == word || strings.HasPrefix(l, word+" ") {
				return strings.Fields(l)
			}
			t.Logf("%s: %s", p.Name, l)
		case <-timeout:
			t.Fatalf("%s: no %q within %v", p.Name, word, within)
		}
	}
}

// DebianPython is the interpreter the Python-driven tests run: Debian's,
// which has the distribution's modules (python3-redis, python3-websockets;
// .ci/run installs them), not the first python3 on PATH.
const DebianPython = "/usr/bin/python3"

// Python returns DebianPython once it imports every one of modules (their
// versions are logged); otherwise Missing.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	py := Bin(t, DebianPython)
	for _, m := range modules {
		out, err := exec.Command(py, "-c", "import "+m+"; print(getattr("+m+", '__version__', '?'))").CombinedOutput()
		if err != nil {
			Missing(t, "%s cannot import %s (apt-get install python3-%s): %v\n%s", py, m, m, err, out)
		}
		t.Logf("%s: %s %s", py, m, strings.TrimSpace(string(out)))
	}
	return py
}

// WaitingParallel is for a TestMain whose parallel tests mostly wait (on
// child processes, IRC servers, Redis, leases) rather than compute: it
// parses the flags and, unless -parallel was given, lets n of them run at
// once (at least GOMAXPROCS, the testing package's default), so that a
// two-core machine does not run them two by two.
func WaitingParallel(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}

// Package irctest is the test kit for end-to-end IRC tests: a real ngircd
// started per test, and scripted IRC clients (User) that record every
// message they receive and wait for expected ones with deadlines.
//
// It is used by the tests of package irc and by the whole-process tests of
// cmd/archivebot. Everything here reports through testing.TB and must be
// called from the test's goroutine (it calls t.Fatal).
//
// Tests that need ngircd skip when it is not installed, unless the
// environment variable CI is set: then they fail, because CI must install
// it (the recipe is in the README's Tests section).
package irctest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WaitFor bounds every wait of this package; each step normally takes
// milliseconds.
const WaitFor = 10 * time.Second

// NgircdOptions shape one ngircd instance.
type NgircdOptions struct {
	// Penalties keeps ngircd's default flood control; otherwise
	// MaxPenaltyTime = 0 switches it off for speed.
	Penalties bool
	// CertFile and KeyFile, when set, add an SSL port serving them.
	CertFile, KeyFile string
}

// Ngircd is a real ngircd in the foreground, one per test, stopped at the
// end of the test. Stop and Start restart it on the same ports.
type Ngircd struct {
	t       testing.TB
	bin     string
	dir     string
	conf    string
	port    int
	sslPort int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
}

// NgircdPath finds the ngircd binary, or skips the test (fails it when the
// environment variable CI is set).
func NgircdPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("ngircd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/ngircd"); serr == nil {
			return "/usr/sbin/ngircd"
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("ngircd not found (CI must install it): %v", err)
		}
		t.Skipf("ngircd not installed: %v", err)
	}
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ReadableTempDir is a t.TempDir that ngircd can read after it dropped
// privileges to nobody (when the tests run as root).
func ReadableTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			break
		}
		if filepath.Dir(d) == os.TempDir() {
			break
		}
	}
	return dir
}

// StartNgircd starts ngircd on free ports and returns once it accepts
// connections. It is stopped when the test ends; when the test failed, the
// tail of its log is logged.
func StartNgircd(t testing.TB, o NgircdOptions) *Ngircd {
	t.Helper()
	n := &Ngircd{t: t, bin: NgircdPath(t), dir: ReadableTempDir(t), port: FreePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, `[Global]
	Name = irc.test
	Info = archivebot-go tests
	AdminInfo1 = tests
	AdminInfo2 = tests
	AdminEMail = tests@localhost
	Listen = 127.0.0.1
	Ports = %d
	MotdPhrase = "test"
[Limits]
	MaxConnectionsIP = 0
	MaxJoins = 0
	MaxNickLength = 31
	PingTimeout = 120
	PongTimeout = 20
`, n.port)
	if !o.Penalties {
		b.WriteString("\tMaxPenaltyTime = 0\n")
	}
	b.WriteString(`[Options]
	DNS = no
	Ident = no
	PAM = no
`)
	if o.CertFile != "" {
		n.sslPort = FreePort(t)
		fmt.Fprintf(&b, "[SSL]\n\tCertFile = %s\n\tKeyFile = %s\n\tPorts = %d\n", o.CertFile, o.KeyFile, n.sslPort)
	}
	n.conf = filepath.Join(n.dir, "ngircd.conf")
	if err := os.WriteFile(n.conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Create(filepath.Join(n.dir, "ngircd.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.logFile = lf
	t.Cleanup(func() {
		n.Stop()
		lf.Close()
		if t.Failed() {
			if data, err := os.ReadFile(lf.Name()); err == nil {
				lines := strings.Split(string(data), "\n")
				if len(lines) > 60 {
					lines = lines[len(lines)-60:]
				}
				t.Logf("ngircd log (tail):\n%s", strings.Join(lines, "\n"))
			}
		}
	})
	n.Start()
	return n
}

// Start runs ngircd in the foreground and returns once it says it is
// ready (it prints that after it listens). StartNgircd calls it; call it
// again after Stop to restart the server.
func (n *Ngircd) Start() {
	n.t.Helper()
	cmd := exec.Command(n.bin, "-n", "-f", n.conf)
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start ngircd: %v", err)
	}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(n.logFile, line)
			if strings.Contains(line, "ready.") {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait()
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	select {
	case <-ready:
	case <-exited:
		n.t.Fatalf("ngircd exited at startup; see %s", n.logFile.Name())
	case <-time.After(WaitFor):
		n.t.Fatal("ngircd did not become ready")
	}
}

// Stop terminates ngircd (SIGTERM; SIGKILL if it lingers) and waits for
// it to exit. Stopping a stopped server does nothing.
func (n *Ngircd) Stop() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(WaitFor):
		cmd.Process.Kill()
		<-exited
	}
}

// Addr is the plain-text listen address, 127.0.0.1:PORT.
func (n *Ngircd) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// URL is the bot's irc.server for the plain-text port.
func (n *Ngircd) URL() string { return "irc://" + n.Addr() }

// TLSURL is the bot's irc.server for the SSL port (NgircdOptions.CertFile).
func (n *Ngircd) TLSURL() string { return fmt.Sprintf("ircs://127.0.0.1:%d", n.sslPort) }

// LogText is what ngircd logged so far.
func (n *Ngircd) LogText() string { b, _ := os.ReadFile(n.logFile.Name()); return string(b) }

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
// it (the recipe is in doc/contributing.md, Tests).
package irctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// WaitFor bounds every wait of this package (testproc's bound); each step
// normally takes milliseconds.
const WaitFor = testproc.WaitFor

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
	proc    *testproc.Proc
	logFile *os.File
}

// NgircdPath finds the ngircd binary, or skips the test (fails it when the
// environment variable CI is set).
func NgircdPath(t testing.TB) string {
	t.Helper()
	return testproc.Bin(t, "ngircd", "/usr/sbin/ngircd")
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
// tail of its output is logged.
func StartNgircd(t testing.TB, o NgircdOptions) *Ngircd {
	t.Helper()
	n := &Ngircd{t: t, bin: NgircdPath(t), dir: ReadableTempDir(t), port: testproc.FreePort(t)}
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
		n.sslPort = testproc.FreePort(t)
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
	// Each run's process logs its own output's tail when the test failed
	// (testproc), and is stopped before this closes the file.
	t.Cleanup(func() {
		n.Stop()
		lf.Close()
	})
	n.Start()
	return n
}

// Start runs ngircd in the foreground and returns once it says it is
// ready (it prints that after it listens). StartNgircd calls it; call it
// again after Stop to restart the server. Its output goes to the log file.
func (n *Ngircd) Start() {
	n.t.Helper()
	p := testproc.Start(n.t, "ngircd", n.bin, []string{"-n", "-f", n.conf}, testproc.Options{
		Output: n.logFile,
		Ready:  func(line string) bool { return strings.Contains(line, "ready.") },
		Stop:   syscall.SIGTERM,
	})
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
}

// Stop terminates ngircd (SIGTERM; SIGKILL if it lingers) and waits for
// it to exit. Stopping a stopped server does nothing.
func (n *Ngircd) Stop() {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p != nil {
		p.Stop()
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

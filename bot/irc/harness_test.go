package irc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
)

// waitFor bounds every wait in these tests; each step normally takes
// milliseconds.
const waitFor = 10 * time.Second

// ---------------------------------------------------------------------
// A real ngircd, one per test.

type ngircdOpts struct {
	// penalties keeps ngircd's default flood control; otherwise
	// MaxPenaltyTime = 0 switches it off for speed.
	penalties bool
	// tls adds an SSL port serving certFile/keyFile.
	certFile, keyFile string
}

type ngircd struct {
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

func ngircdPath(t testing.TB) string {
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

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readableTempDir is a t.TempDir that ngircd can read after it dropped
// privileges to nobody (when the tests run as root).
func readableTempDir(t testing.TB) string {
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

func startNgircd(t testing.TB, o ngircdOpts) *ngircd {
	t.Helper()
	n := &ngircd{t: t, bin: ngircdPath(t), dir: readableTempDir(t), port: freePort(t)}
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
	if !o.penalties {
		b.WriteString("\tMaxPenaltyTime = 0\n")
	}
	b.WriteString(`[Options]
	DNS = no
	Ident = no
	PAM = no
`)
	if o.certFile != "" {
		n.sslPort = freePort(t)
		fmt.Fprintf(&b, "[SSL]\n\tCertFile = %s\n\tKeyFile = %s\n\tPorts = %d\n", o.certFile, o.keyFile, n.sslPort)
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
		n.stop()
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
	n.start()
	return n
}

// start runs ngircd in the foreground and returns once it says it is
// ready (it prints that after it listens).
func (n *ngircd) start() {
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
	case <-time.After(waitFor):
		n.t.Fatal("ngircd did not become ready")
	}
}

// stop terminates ngircd and waits for it to exit.
func (n *ngircd) stop() {
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
	case <-time.After(waitFor):
		cmd.Process.Kill()
		<-exited
	}
}

func (n *ngircd) addr() string    { return fmt.Sprintf("127.0.0.1:%d", n.port) }
func (n *ngircd) url() string     { return "irc://" + n.addr() }
func (n *ngircd) tlsURL() string  { return fmt.Sprintf("ircs://127.0.0.1:%d", n.sslPort) }
func (n *ngircd) logText() string { b, _ := os.ReadFile(n.logFile.Name()); return string(b) }

// ---------------------------------------------------------------------
// A scripted IRC user over raw TCP.

type user struct {
	t    testing.TB
	nick string
	conn net.Conn

	wmu sync.Mutex

	mu     sync.Mutex
	msgs   []ircmsg.Message
	next   int // expect scans from here
	seq    int // ask markers
	wake   chan struct{}
	closed bool
}

func dialUser(t testing.TB, addr, nick string) *user {
	t.Helper()
	u := startUser(t, addr, nick)
	u.registered()
	return u
}

// startUser connects and sends the registration without waiting for it,
// so several users can register at once (ngircd's flood control pauses
// each new client for a second).
func startUser(t testing.TB, addr, nick string) *user {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", nick, addr, err)
	}
	u := &user{t: t, nick: nick, conn: conn, wake: make(chan struct{})}
	t.Cleanup(func() { conn.Close() })
	go u.read()
	u.send("NICK %s", nick)
	u.send("USER %s 0 * :test user", strings.ToLower(nick))
	return u
}

// registered waits for the end of registration.
func (u *user) registered() {
	u.t.Helper()
	u.expect("welcome", func(m ircmsg.Message) bool { return m.Command == "001" })
	u.expect("end of MOTD", func(m ircmsg.Message) bool { return m.Command == "376" || m.Command == "422" })
}

func (u *user) read() {
	sc := bufio.NewScanner(u.conn)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		m, err := ircmsg.ParseLine(sc.Text())
		if err != nil {
			continue
		}
		if m.Command == "PING" && len(m.Params) > 0 {
			u.send("PONG :%s", m.Params[0])
			continue
		}
		u.mu.Lock()
		u.msgs = append(u.msgs, m)
		close(u.wake)
		u.wake = make(chan struct{})
		u.mu.Unlock()
	}
	u.mu.Lock()
	u.closed = true
	close(u.wake)
	u.wake = make(chan struct{})
	u.mu.Unlock()
}

func (u *user) send(format string, a ...any) {
	line := format
	if len(a) > 0 {
		line = fmt.Sprintf(format, a...)
	}
	u.line(line)
}

// line sends one line as it is.
func (u *user) line(line string) {
	u.wmu.Lock()
	defer u.wmu.Unlock()
	if _, err := io.WriteString(u.conn, line+"\r\n"); err != nil {
		u.t.Errorf("%s: send %q: %v", u.nick, line, err)
	}
}

// sendRaw writes bytes as they are (several lines at once).
func (u *user) sendRaw(data string) {
	u.wmu.Lock()
	defer u.wmu.Unlock()
	if _, err := io.WriteString(u.conn, data); err != nil {
		u.t.Errorf("%s: send: %v", u.nick, err)
	}
}

// expectWithin returns the first message from the scan position on that
// matches, and moves the scan position past it.
func (u *user) expectWithin(d time.Duration, what string, pred func(ircmsg.Message) bool) ircmsg.Message {
	u.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		for i := u.next; i < len(u.msgs); i++ {
			if pred(u.msgs[i]) {
				m := u.msgs[i]
				u.next = i + 1
				u.mu.Unlock()
				return m
			}
		}
		wake, closed := u.wake, u.closed
		u.mu.Unlock()
		if closed {
			u.t.Fatalf("%s: connection closed while waiting for %s; got:\n%s", u.nick, what, u.dump())
		}
		select {
		case <-wake:
		case <-deadline.C:
			u.t.Fatalf("%s: no %s within %v; got:\n%s", u.nick, what, d, u.dump())
		}
	}
}

func (u *user) expect(what string, pred func(ircmsg.Message) bool) ircmsg.Message {
	u.t.Helper()
	return u.expectWithin(waitFor, what, pred)
}

// waitClosed waits until the other side closed the connection.
func (u *user) waitClosed() {
	u.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		u.mu.Lock()
		wake, closed := u.wake, u.closed
		u.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			u.t.Fatalf("%s: connection still open", u.nick)
		}
	}
}

func (u *user) dump() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	start := len(u.msgs) - 40
	if start < 0 {
		start = 0
	}
	for _, m := range u.msgs[start:] {
		l, _ := m.Line()
		b.WriteString("  " + strings.TrimSpace(l) + "\n")
	}
	return b.String()
}

// mark moves the scan position to the end: later expects see only what
// arrives from now on.
func (u *user) mark() {
	u.mu.Lock()
	u.next = len(u.msgs)
	u.mu.Unlock()
}

func (u *user) join(channel string) {
	u.t.Helper()
	u.send("JOIN %s", channel)
	u.expect("end of NAMES for "+channel, func(m ircmsg.Message) bool {
		return m.Command == "366" && len(m.Params) > 1 && strings.EqualFold(m.Params[1], channel)
	})
}

func (u *user) say(target, text string) { u.send("PRIVMSG %s :%s", target, text) }

// isFrom reports whether m is a PRIVMSG from nick to target.
func isFrom(m ircmsg.Message, nick, target string) bool {
	return m.Command == "PRIVMSG" && len(m.Params) == 2 && strings.EqualFold(m.Nick(), nick) && strings.EqualFold(m.Params[0], target)
}

// reply waits for the bot's next answer to u: in channel, a line
// starting "nick: "; in private (channel ""), a private message.
func (u *user) reply(botNick, channel string) string {
	u.t.Helper()
	if channel == "" {
		return u.expect("private reply from "+botNick, func(m ircmsg.Message) bool { return isFrom(m, botNick, u.nick) }).Params[1]
	}
	prefix := u.nick + ": "
	m := u.expect("reply in "+channel, func(m ircmsg.Message) bool {
		return isFrom(m, botNick, channel) && strings.HasPrefix(m.Params[1], prefix)
	})
	return strings.TrimPrefix(m.Params[1], prefix)
}

// anyReply waits for the bot's next answer to u, in channel (prefixed) or
// in private: !pending answers privately even when asked in a channel.
func (u *user) anyReply(botNick, channel string) string {
	u.t.Helper()
	prefix := u.nick + ": "
	m := u.expect("any reply from "+botNick, func(m ircmsg.Message) bool {
		if isFrom(m, botNick, u.nick) {
			return true
		}
		return channel != "" && isFrom(m, botNick, channel) && strings.HasPrefix(m.Params[1], prefix)
	})
	return strings.TrimPrefix(m.Params[1], prefix)
}

// waitBotIn waits until the bot is in channel as u sees it: its JOIN, or
// its nick in a NAMES reply u asked for.
func (u *user) waitBotIn(botNick, channel string) {
	u.t.Helper()
	u.expect(botNick+" joining "+channel, func(m ircmsg.Message) bool {
		return m.Command == "JOIN" && strings.EqualFold(m.Nick(), botNick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel)
	})
}

// ask sends text where channel says ("" = privately to the bot) and
// returns every answer the bot gives to it, in channel or in private. A
// "!status" for an unknown ident follows it as a marker: the bot answers
// one user's commands in order, so the marker's answer ends the list.
func (u *user) ask(botNick, channel, text string) []string {
	u.t.Helper()
	u.seq++
	marker := fmt.Sprintf("zzmark%d", u.seq)
	target := channel
	if channel == "" {
		target = botNick
	}
	u.say(target, text)
	u.say(target, "!status "+marker)
	var out []string
	for {
		r := u.anyReply(botNick, channel)
		if strings.Contains(r, marker) {
			return out
		}
		out = append(out, r)
	}
}

// waitBotPresent waits until the bot is in channel: already listed in a
// NAMES reply u received, or joining later.
func (u *user) waitBotPresent(botNick, channel string) {
	u.t.Helper()
	u.mu.Lock()
	for _, m := range u.msgs {
		if m.Command == "353" && len(m.Params) >= 4 && strings.EqualFold(m.Params[2], channel) {
			for _, name := range strings.Fields(m.Params[3]) {
				if strings.EqualFold(strings.TrimLeft(name, "~&@%+"), botNick) {
					u.mu.Unlock()
					return
				}
			}
		}
		if m.Command == "JOIN" && strings.EqualFold(m.Nick(), botNick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel) {
			u.mu.Unlock()
			return
		}
	}
	u.mu.Unlock()
	u.waitBotIn(botNick, channel)
}

// ---------------------------------------------------------------------
// The bot under test.

type harness struct {
	t      testing.TB
	client *Client
	bot    *bot.Bot
	mini   *miniredis.Miniredis
	rdb    *redis.Client
	cancel context.CancelFunc
	done   chan error
	events chan bool // connection state changes
}

func testIRCConfig(server string, channels ...string) config.IRC {
	return config.IRC{
		Server:            server,
		Nick:              "ArchiveBot",
		Channels:          channels,
		MessagesPerSecond: 200,
		Burst:             50,
		CommandsPerMinute: 1000,
	}
}

// fast shortens the client's timers for tests.
func fast(c *Client) {
	c.backoffMin = 20 * time.Millisecond
	c.backoffMax = 500 * time.Millisecond
	c.reclaimEvery = 200 * time.Millisecond
	c.rejoinEvery = 300 * time.Millisecond
	c.kickRejoinDelay = 20 * time.Millisecond
	c.drainTimeout = 2 * time.Second
	c.quitTimeout = 2 * time.Second
	c.timeout = 5 * time.Second
	c.keepAlive = 30 * time.Second
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newTestBot(t testing.TB) (*bot.Bot, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	b := bot.New(coordinator.NewStore(rdb), bot.Options{Logger: testLogger(t)})
	return b, m, rdb
}

func startBot(t testing.TB, cfg config.IRC, tune func(*Client)) *harness {
	t.Helper()
	b, m, rdb := newTestBot(t)
	c := New(cfg, b, testLogger(t))
	fast(c)
	if tune != nil {
		tune(c)
	}
	h := &harness{t: t, client: c, bot: b, mini: m, rdb: rdb, done: make(chan error, 1), events: make(chan bool, 100)}
	c.stateHook = func(up bool) {
		select {
		case h.events <- up:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- c.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// stop ends Run and checks it returns nil promptly.
func (h *harness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run returned %v", err)
		}
	case <-time.After(waitFor):
		h.t.Errorf("Run did not return after its context ended")
	}
}

// waitConnected waits for the next connection state change to up.
func (h *harness) waitState(up bool) {
	h.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		select {
		case s := <-h.events:
			if s == up {
				return
			}
		case <-timer.C:
			h.t.Fatalf("bot did not become connected=%v", up)
		}
	}
}

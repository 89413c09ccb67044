package irc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/ergochat/irc-go/ircevent"
	"github.com/ergochat/irc-go/ircmsg"
)

// connection is the client's part that keeps one connection to the
// server: Run's reconnect loop, one session per connection, the socket
// that tells the outbox when its line was written.
type connection struct {
	connected upSignal
	gen       atomic.Uint64 // numbers connections; lines can be bound to one
	running   atomic.Bool
	// botModeSet is the connection whose bot mode was asked for.
	botModeSet atomic.Uint64
	// historyIgnored counts lines of replayed channel history set aside
	// (onHistory).
	historyIgnored atomic.Int64
	// stateHook, when set, hears every change of Connected (tests).
	stateHook func(connected bool)

	// Tunables; tests shorten them.
	backoffMin, backoffMax time.Duration
	stableAfter            time.Duration // a connection this old resets the backoff
	timeout, keepAlive     time.Duration // ircevent dial/registration and ping
	writeTimeout           time.Duration
	reclaimEvery           time.Duration // try to get the configured nick back
	drainTimeout           time.Duration // at shutdown, for commands and outbox
	quitTimeout            time.Duration // at shutdown, for the server to close
}

// upSignal is whether the client is registered on the server, read as a
// flag (Load) or waited for (wait: a channel closed while connected,
// replaced by an open one at each disconnect).
type upSignal struct {
	up atomic.Bool
	mu sync.Mutex
	ch chan struct{}
}

// Load reports whether the client is connected now.
func (s *upSignal) Load() bool { return s.up.Load() }

func (s *upSignal) set(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up.Swap(up) == up {
		return
	}
	if up {
		if s.ch == nil {
			s.ch = make(chan struct{})
		}
		close(s.ch)
	} else {
		s.ch = make(chan struct{})
	}
}

// wait is closed once the client is connected (at once if it is now).
func (s *upSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Run keeps the bot connected until ctx ends, reconnecting after any
// disconnect with exponential backoff and jitter. When ctx ends it stops
// taking commands, lets running ones and the outbox finish briefly, sends
// QUIT and returns nil once the server closed the connection (or after a
// short timeout). It returns an error only for configuration it cannot use.
func (c *Client) Run(ctx context.Context) error {
	if c.running.Swap(true) {
		return errors.New("irc: Run called twice")
	}
	dial, err := c.dialer()
	if err != nil {
		return err
	}
	outCtx, stopOut := context.WithCancel(context.WithoutCancel(ctx))
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		run.Guard(c.log, "outbox", func() { c.out.run(outCtx) })
	}()
	defer func() {
		c.disp.stop()
		c.cancel()
		stopOut()
		<-outDone
	}()

	// A connection that registered and stayed up stableAfter counts as
	// established: the next wait starts again from backoffMin.
	run.Reconnect(ctx, c.log.With("server", c.cfg.Server), "IRC connection", c.backoff(), func(ctx context.Context) (bool, error) {
		start := time.Now()
		registered, err := c.session(ctx, dial)
		return registered && time.Since(start) >= c.stableAfter, err
	})
	return nil
}

// backoff is the wait between reconnects: the node's one backoff
// (retry.Backoff), doubling from backoffMin up to backoffMax, with "equal
// jitter" (half fixed, half random) so many bots do not reconnect in
// lockstep.
func (c *Client) backoff() retry.Backoff {
	return retry.Backoff{Min: c.backoffMin, Max: c.backoffMax, Jitter: true}
}

// server is where to connect and how.
type server struct {
	addr string
	tls  *tls.Config
}

// dialer reads cfg.Server (irc://host[:6667], ircs://host[:6697]) and
// builds the TLS configuration: verified against the system roots plus
// cfg.TLSCA.
func (c *Client) dialer() (server, error) {
	u, err := url.Parse(c.cfg.Server)
	if err != nil {
		return server{}, fmt.Errorf("irc.server: %w", err)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return server{}, fmt.Errorf("irc.server: no host in %q", c.cfg.Server)
	}
	var s server
	switch u.Scheme {
	case "irc":
		if port == "" {
			port = "6667"
		}
	case "ircs":
		if port == "" {
			port = "6697"
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if c.cfg.TLSCA != "" {
			pem, err := os.ReadFile(c.cfg.TLSCA)
			if err != nil {
				return server{}, fmt.Errorf("irc.tls_ca: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return server{}, fmt.Errorf("irc.tls_ca: no PEM certificate in %s", c.cfg.TLSCA)
			}
		}
		s.tls = &tls.Config{ServerName: host, RootCAs: pool, MinVersion: tls.VersionTLS12}
	default:
		return server{}, fmt.Errorf("irc.server: scheme must be irc:// or ircs://, got %q", c.cfg.Server)
	}
	s.addr = net.JoinHostPort(host, port)
	return s, nil
}

// watchConn is the socket under one ircevent connection. ircevent writes
// each line with one Write call, so comparing what is written with the
// line the outbox is waiting for tells the outbox its line reached the
// socket.
type watchConn struct {
	net.Conn
	gate func() bool
	// standby: the gate holds back only the lines that speak (standby.go).
	standby bool
	mu      sync.Mutex
	expect  []byte
	result  chan error
}

func (w *watchConn) Write(b []byte) (int, error) {
	if w.gate != nil && (!w.standby || speaks(b)) && !w.gate() {
		w.Conn.Close()
		return 0, errGated
	}
	// Claim the outbox's line before writing it, not after: once claimed,
	// the outbox waits for this write's result instead of counting the line
	// as lost because the connection went down meanwhile (a line that did
	// reach the socket would otherwise be sent again after a reconnect).
	w.mu.Lock()
	var res chan error
	if w.expect != nil && bytes.Equal(b, w.expect) {
		res = w.result
		w.expect, w.result = nil, nil
	}
	w.mu.Unlock()
	n, err := w.Conn.Write(b)
	if res != nil {
		if err == nil && n < len(b) {
			err = io.ErrShortWrite
		}
		res <- err
	}
	return n, err
}

// errGated is the error of a write or dial refused by Client.Gate.
var errGated = errors.New("irc: this node may not send (leader lease not held)")

// link is one registered connection, as the outbox writes to it.
type link struct {
	conn    *ircevent.Connection
	sock    *watchConn
	down    chan struct{}
	timeout time.Duration
	conf    *confirmer
}

// confirm waits for the server to answer a PING sent after the lines
// written so far (confirm.go), at most the write timeout or 10 s.
func (l *link) confirm(ctx context.Context) error {
	return l.conf.confirm(ctx, max(l.timeout, 10*time.Second))
}

func (l *link) write(ctx context.Context, line []byte) error {
	res := make(chan error, 1)
	l.sock.mu.Lock()
	l.sock.expect, l.sock.result = line, res
	l.sock.mu.Unlock()
	// forget withdraws the line unless a Write has already claimed it;
	// claimed reports that it had, so its result is coming on res.
	forget := func() (claimed bool) {
		l.sock.mu.Lock()
		defer l.sock.mu.Unlock()
		if l.sock.result == res {
			l.sock.expect, l.sock.result = nil, nil
			return false
		}
		return true
	}
	if err := l.conn.SendRaw(string(line[:len(line)-2])); err != nil {
		if forget() {
			// Written after all, or failed in the write itself.
			if err := <-res; err == nil {
				return nil
			}
		}
		return errConnLost
	}
	t := time.NewTimer(l.timeout)
	defer t.Stop()
	select {
	case err := <-res:
		if err != nil {
			return fmt.Errorf("%w: %v", errConnLost, err)
		}
		return nil
	case <-l.down:
	case <-t.C:
	case <-ctx.Done():
	}
	if forget() {
		// The socket write is under way: its outcome, not the connection
		// state seen meanwhile, says whether the line went out.
		w := time.NewTimer(l.timeout)
		defer w.Stop()
		select {
		case err := <-res:
			if err == nil {
				return nil
			}
		case <-w.C:
		}
	}
	return errConnLost
}

// handled are the commands the tracker and dispatcher look at.
var handled = []string{
	"001", "005", "JOIN", "PART", "KICK", "QUIT", "NICK", "MODE", "353", "366",
	"403", "405", "437", "471", "473", "474", "475", "476", "477", "479", "489",
	"PRIVMSG", "ACCOUNT", "354",
}

// requestCaps are the capabilities the bot asks for. ircevent asks for
// each (CAP REQ) and goes on without the ones the server refuses (NAK):
// multi-prefix for ranks; account-tag, extended-join and account-notify
// tell members' services accounts; message-tags carries the tags and
// server-time dates the lines; batch marks the channel history a server
// replays on join (InspIRCd's chanhistory), which is not commands typed
// now (onHistory).
var requestCaps = []string{"multi-prefix", "account-tag", "extended-join", "account-notify", "message-tags", "server-time", "batch"}

// session runs one connection: connect and register, join, serve until
// the connection drops (returns) or ctx ends (QUIT, then returns).
func (c *Client) session(ctx context.Context, srv server) (registered bool, err error) {
	nick := c.wantNick()
	c.state.reset(nick)

	var sockMu sync.Mutex
	var sock *watchConn
	closeSock := func() {
		sockMu.Lock()
		defer sockMu.Unlock()
		if sock != nil {
			sock.Close()
		}
	}
	conn := &ircevent.Connection{
		Server:      srv.addr,
		Nick:        nick,
		User:        "archivebot",
		RealName:    "ArchiveBot",
		Password:    c.cfg.Password,
		RequestCaps: slices.Clone(requestCaps),
		QuitMessage: "ArchiveBot shutting down",
		Version:     "ArchiveBot (archivebot-go)",
		Timeout:     c.timeout,
		KeepAlive:   c.keepAlive,
		Log:         slog.NewLogLogger(c.log.Handler(), slog.LevelInfo),
		DialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
			if c.Gate != nil && c.Standby == nil && !c.Gate() {
				return nil, errGated
			}
			dctx, cancel := context.WithCancel(dctx)
			defer cancel()
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			raw, err := (&net.Dialer{}).DialContext(dctx, network, addr)
			if err != nil {
				return nil, err
			}
			nc := raw
			if srv.tls != nil {
				tc := tls.Client(raw, srv.tls.Clone())
				if err := tc.HandshakeContext(dctx); err != nil {
					raw.Close()
					return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
				}
				nc = tc
			}
			w := &watchConn{Conn: nc, gate: c.Gate, standby: c.Standby != nil}
			sockMu.Lock()
			sock = w
			sockMu.Unlock()
			return w, nil
		},
	}
	saslUser := ""
	if c.cfg.SASL != "" {
		user, pass, _ := strings.Cut(c.cfg.SASL, ":")
		conn.SASLLogin, conn.SASLPassword, conn.UseSASL = user, pass, true
		saslUser = user
	}
	down := make(chan struct{})
	var downOnce sync.Once
	conf := newConfirmer(conn.SendRaw)
	conn.AddDisconnectCallback(func(ircmsg.Message) {
		conf.end()
		downOnce.Do(func() { close(down) })
	})
	conn.AddCallback("PONG", func(m ircmsg.Message) {
		if len(m.Params) > 0 {
			conf.pong(m.Params[len(m.Params)-1])
		}
	})
	for _, cmd := range handled {
		conn.AddCallback(cmd, c.onMessage)
	}
	conn.AddBatchCallback(c.onHistory)
	conn.AddCallback("432", func(m ircmsg.Message) { c.onErroneousNick(conn, m) })
	conn.AddCallback("ERROR", func(m ircmsg.Message) {
		c.log.Info("server closed the link", "reason", strings.Join(m.Params, " "))
	})

	// Connect does not take a context: closing the socket aborts it.
	stopWatch := context.AfterFunc(ctx, closeSock)
	err = conn.Connect()
	stopWatch()
	if err != nil {
		closeSock()
		return false, fmt.Errorf("connect to %s: %w", srv.addr, saslError(err, saslUser))
	}
	defer closeSock()

	gen := c.gen.Add(1)
	acked := conn.AcknowledgedCaps()
	c.state.mu.Lock()
	_, c.state.multiPrefix = acked["multi-prefix"]
	_, c.state.extendedJoin = acked["extended-join"]
	_, c.state.accountNotify = acked["account-notify"]
	_, c.state.accountTag = acked["account-tag"]
	c.state.mu.Unlock()
	sockMu.Lock()
	l := &link{conn: conn, sock: sock, down: down, timeout: c.writeTimeout, conf: conf}
	sockMu.Unlock()
	c.out.setLink(l, gen)
	c.connected.set(true)
	c.markUp(true)
	c.setBotMode(gen)
	if c.Standby != nil {
		c.reclaimNick(gen) // the node may have led or stopped while registering
	}
	c.log.Info("connected to IRC", "server", srv.addr, "nick", c.state.Me(), "tls", srv.tls != nil)
	if c.stateHook != nil {
		c.stateHook(true)
	}
	defer func() {
		c.markUp(false)
		c.connected.set(false)
		c.out.dropLink(gen)
		conf.end()
		c.failJoinWaiters(errNotConnected)
		if c.stateHook != nil {
			c.stateHook(false)
		}
	}()

	c.joinWanted(gen)
	reclaim := time.NewTicker(c.reclaimEvery)
	defer reclaim.Stop()
	rejoin := time.NewTicker(c.rejoinEvery)
	defer rejoin.Stop()
	for {
		select {
		case <-down:
			return true, errors.New("connection closed")
		case <-reclaim.C:
			c.reclaimNick(gen)
		case <-rejoin.C:
			c.joinWanted(gen)
		case <-ctx.Done():
			c.shutdown(conn, down)
			return true, nil
		}
	}
}

// saslError says what a failed connection's error means for the SASL
// sign-in (irc.sasl): the bot never registers without it.
func saslError(err error, user string) error {
	switch {
	case user == "":
		return err
	case errors.Is(err, ircevent.SASLFailed):
		return fmt.Errorf("cannot sign in as %q: the server does not offer sasl now (on a network with services, while they are not linked); not registering without it", user)
	case strings.Contains(err.Error(), "SASL"):
		return fmt.Errorf("SASL sign-in as %q refused (check irc.sasl): %w", user, err)
	}
	return err
}

// historyBatches are the batch types of lines replayed from a channel's
// history (IRCv3 chathistory; InspIRCd's chanhistory on join).
var historyBatches = map[string]bool{"chathistory": true, "draft/chathistory": true}

// onHistory sets aside a batch of replayed channel history: its lines were
// said before, some perhaps before the bot came, and a "!a" among them is
// not a command typed now. It counts and logs them and reports the batch
// handled; ircevent hands any other batch's lines to the usual callbacks.
func (c *Client) onHistory(b *ircevent.Batch) bool {
	if len(b.Params) < 2 || !historyBatches[strings.ToLower(b.Params[1])] {
		return false
	}
	target := ""
	if len(b.Params) > 2 {
		target = b.Params[2]
	}
	n := countLines(b)
	c.historyIgnored.Add(int64(n))
	if c.Standby != nil {
		c.standbyHistory(flatten(b))
	}
	c.log.Info("set aside channel history the server replayed: not commands typed now", "target", target, "lines", n, "batch", b.Params[1])
	return true
}

// flatten lists the lines of b and its nested batches.
func flatten(b *ircevent.Batch) []ircmsg.Message {
	var out []ircmsg.Message
	for _, it := range b.Items {
		if it.Command == "BATCH" {
			out = append(out, flatten(it)...)
		} else {
			out = append(out, it.Message)
		}
	}
	return out
}

// countLines is the number of lines in b and its nested batches.
func countLines(b *ircevent.Batch) int {
	n := 0
	for _, it := range b.Items {
		if it.Command == "BATCH" {
			n += countLines(it)
		} else {
			n++
		}
	}
	return n
}

// shutdown: stop taking commands, let running commands and queued lines
// finish for a moment, then QUIT and wait for the server to close.
func (c *Client) shutdown(conn *ircevent.Connection, down chan struct{}) {
	c.log.Info("shutting down IRC connection")
	c.disp.stop()
	drain, cancel := context.WithTimeout(context.Background(), c.drainTimeout)
	defer cancel()
	if !c.disp.wait(drain) {
		c.cancel() // commands still running: make them give up
	}
	if !c.waitReplies(drain) {
		c.log.Warn("shutdown: answers still queued were not sent")
	}
	if !c.out.flush(drain) {
		c.log.Warn("shutdown: lines still queued were not sent", "lines", c.out.pending())
	}
	conn.Quit()
	t := time.NewTimer(c.quitTimeout)
	defer t.Stop()
	select {
	case <-down:
	case <-t.C:
		c.log.Warn("server did not close the connection after QUIT")
	}
}

// control queues a protocol line ahead of messages without waiting.
func (c *Client) control(gen uint64, command string, params ...string) {
	line, err := buildLine(command, params...)
	if err != nil {
		c.log.Error("cannot build line", "command", command, "err", err)
		return
	}
	c.out.enqueue(&item{line: line, gen: gen}, true)
}

// reclaimNick asks for the configured nick when we had to take another.
func (c *Client) reclaimNick(gen uint64) {
	want := c.wantNick()
	if c.state.Fold(c.state.Me()) != c.state.Fold(want) {
		c.control(gen, "NICK", want)
	}
}

// onErroneousNick handles 432 during registration (the alternate nick
// ircevent made up is too long for this server): try a short one.
func (c *Client) onErroneousNick(conn *ircevent.Connection, m ircmsg.Message) {
	if conn.CurrentNick() != "" {
		return
	}
	base := c.cfg.Nick
	if len(base) > 6 {
		base = base[:6]
	}
	conn.Send("NICK", fmt.Sprintf("%s_%d", base, rand.N(1000)))
}

// setBotMode marks the bot as a bot (MODE nick +B) on connection gen when
// the server advertises a bot mode (ISUPPORT BOT), once per connection.
func (c *Client) setBotMode(gen uint64) {
	mode := c.state.BotMode()
	if mode == "" || c.botModeSet.Swap(gen) == gen {
		return
	}
	c.control(gen, "MODE", c.state.Me(), "+"+mode)
}

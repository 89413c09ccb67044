// Package irc is ArchiveBot's IRC front end: it keeps one connection to
// the configured server (reconnecting with backoff), joins the channels,
// tracks who holds which channel rank, turns "!" lines into bot.Requests,
// and sends every line through one rate-limited outbox. It also
// implements coordinator.Announcer for the reporting services.
//
// Goroutines: Run owns the connection loop; ircevent runs a reader, a
// writer and a pinger per connection and calls our callbacks from the
// reader, in server order (state updates happen there, never blocking);
// commands run on per-user workers (dispatch.go); one outbox goroutine
// writes every line the bot sends (outbox.go).
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ergochat/irc-go/ircevent"
	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
)

// Client is the IRC front end. Create it with New and start it with Run.
type Client struct {
	cfg    config.IRC
	bot    *bot.Bot
	log    *slog.Logger
	config []chanSpec // configured channels, in order
	// report is the configured channel that takes reports meant for
	// other channels; "" when irc.report_channel is off.
	report string

	state    *tracker
	out      *outbox
	throttle *throttle
	disp     *dispatcher

	connected atomic.Bool
	gen       atomic.Uint64
	running   atomic.Bool

	mu       sync.Mutex
	wanted   map[string]chanSpec     // channels to be in, by folded name
	joinWait map[string][]chan error // Announce waiting for a JOIN, by folded name
	rejoins  map[string]*time.Timer  // scheduled rejoins after KICK
	keys     map[string]string       // channel keys from the config, by folded name
	cmdCtx   context.Context         // commands run under it
	cancel   context.CancelFunc      // cancels cmdCtx
	// stateHook, when set, hears every change of Connected (tests).
	stateHook func(connected bool)

	qmu      sync.Mutex
	replies  map[string]*replyQueue  // answers waiting, by folded nick
	qwake    chan struct{}           // closed and replaced when a reply queue empties
	finishes map[string]*finishQueue // finish reports waiting, by folded channel
	// finishRest holds the lines of a report split over several lines
	// that were not sent when its first lines were, by finishRestKey: a
	// report delivered again (at least once) sends only the rest.
	finishRest map[string][][]byte
	cmdSeq     atomic.Uint64 // numbers commands, for combining answers

	// Gate, when set, is asked before every write to the server socket
	// and before dialing: false means this node may not speak (its leader
	// lease ran out), and the write is refused and the socket closed, so
	// nothing at all is sent, not even QUIT or PONG. Set before Run.
	Gate func() bool

	// Tunables; tests shorten them.
	backoffMin, backoffMax time.Duration
	stableAfter            time.Duration // a connection this old resets the backoff
	timeout, keepAlive     time.Duration // ircevent dial/registration and ping
	writeTimeout           time.Duration
	reclaimEvery           time.Duration // try to get the configured nick back
	rejoinEvery            time.Duration // retry channels we are not in
	kickRejoinDelay        time.Duration
	commandTimeout         time.Duration
	replyMaxAge            time.Duration // a reply not sent by then is dropped
	joinTimeout            time.Duration // Announce waiting for a JOIN
	drainTimeout           time.Duration // at shutdown, for commands and outbox
	combineReplies         int           // see defaultCombineReplies
	combineFinish          int           // see defaultCombineFinish
	quitTimeout            time.Duration // at shutdown, for the server to close
}

type chanSpec struct{ name, key string }

// chanKey folds a channel name for the client's own maps. It does not
// follow the server's CASEMAPPING (which can change on reconnect): the
// rfc1459 folding is the widest, so a name never maps to two keys.
func chanKey(name string) string { return foldCase("rfc1459", name) }

// New returns a client for cfg serving b. Nothing happens until Run.
func New(cfg config.IRC, b *bot.Bot, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("service", "irc")
	c := &Client{
		cfg:        cfg,
		bot:        b,
		log:        logger,
		state:      newTracker(cfg.Nick),
		out:        newOutbox(cfg.MessagesPerSecond, cfg.Burst),
		throttle:   newThrottle(cfg.CommandsPerMinute),
		disp:       newDispatcher(8, 256, logger),
		wanted:     map[string]chanSpec{},
		joinWait:   map[string][]chan error{},
		rejoins:    map[string]*time.Timer{},
		keys:       map[string]string{},
		replies:    map[string]*replyQueue{},
		qwake:      make(chan struct{}),
		finishes:   map[string]*finishQueue{},
		finishRest: map[string][][]byte{},

		backoffMin:      2 * time.Second,
		backoffMax:      5 * time.Minute,
		stableAfter:     time.Minute,
		timeout:         30 * time.Second,
		keepAlive:       2 * time.Minute,
		writeTimeout:    30 * time.Second,
		reclaimEvery:    time.Minute,
		rejoinEvery:     time.Minute,
		kickRejoinDelay: 3 * time.Second,
		commandTimeout:  time.Minute,
		replyMaxAge:     2 * time.Minute,
		joinTimeout:     20 * time.Second,
		drainTimeout:    3 * time.Second,
		quitTimeout:     3 * time.Second,
		combineReplies:  defaultCombineReplies,
		combineFinish:   defaultCombineFinish,
	}
	c.cmdCtx, c.cancel = context.WithCancel(context.Background())
	for _, ch := range cfg.Channels {
		name, key, _ := strings.Cut(strings.TrimSpace(ch), " ")
		spec := chanSpec{name: name, key: strings.TrimSpace(key)}
		c.config = append(c.config, spec)
		c.wanted[chanKey(name)] = spec
		c.keys[chanKey(name)] = spec.key
		if cfg.ReportChannel != "" && chanKey(cfg.ReportChannel) == chanKey(name) {
			c.report = name
		}
	}
	return c
}

// configured returns the configured channel that name is, compared under
// the server's CASEMAPPING.
func (c *Client) configured(name string) (chanSpec, bool) {
	if name == "" {
		return chanSpec{}, false
	}
	f := c.state.Fold(name)
	for _, s := range c.config {
		if c.state.Fold(s.name) == f {
			return s, true
		}
	}
	return chanSpec{}, false
}

// route says where a report meant for channel goes: the channel itself
// when it is one of ours; otherwise the report channel, with via naming
// the channel it was meant for (shortened: pipelines write it). Without a
// report channel it cannot be delivered.
func (c *Client) route(channel string) (dest, via string, err error) {
	if s, ok := c.configured(channel); ok {
		return s.name, "", nil
	}
	if channel != "" {
		via = text.Cut(cleanText(channel), 64)
	}
	if c.report == "" {
		return "", "", fmt.Errorf("%w: %q is not one of the configured channels and irc.report_channel is off", coordinator.ErrCannotDeliver, via)
	}
	return c.report, via, nil
}

// Channels lists the configured channels (without keys).
func (c *Client) Channels() []string {
	out := make([]string, len(c.config))
	for i, s := range c.config {
		out[i] = s.name
	}
	return out
}

// Connected reports whether the client is registered on the server now.
func (c *Client) Connected() bool { return c.connected.Load() }

// Nick returns the nick the bot currently has.
func (c *Client) Nick() string { return c.state.Me() }

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

	attempt := 0
	for ctx.Err() == nil {
		start := time.Now()
		registered, err := c.session(ctx, dial)
		if ctx.Err() != nil {
			break
		}
		if registered && time.Since(start) >= c.stableAfter {
			attempt = 0
		}
		delay := c.backoff(attempt)
		attempt++
		c.log.Warn("disconnected from IRC; reconnecting", "server", c.cfg.Server, "err", err, "retry_in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return nil
}

// backoff is the wait before reconnect attempt n (from 0): doubling from
// backoffMin up to backoffMax, with "equal jitter" (half fixed, half
// random) so many bots do not reconnect in lockstep.
func (c *Client) backoff(n int) time.Duration {
	d := c.backoffMin
	for i := 0; i < n && d < c.backoffMax; i++ {
		d *= 2
	}
	if d > c.backoffMax {
		d = c.backoffMax
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half)
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
	gate   func() bool
	mu     sync.Mutex
	expect []byte
	result chan error
}

func (w *watchConn) Write(b []byte) (int, error) {
	if w.gate != nil && !w.gate() {
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
	"PRIVMSG",
}

// session runs one connection: connect and register, join, serve until
// the connection drops (returns) or ctx ends (QUIT, then returns).
func (c *Client) session(ctx context.Context, srv server) (registered bool, err error) {
	nick := c.cfg.Nick
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
		RequestCaps: []string{"multi-prefix"},
		QuitMessage: "ArchiveBot shutting down",
		Version:     "ArchiveBot (archivebot-go)",
		Timeout:     c.timeout,
		KeepAlive:   c.keepAlive,
		Log:         slog.NewLogLogger(c.log.Handler(), slog.LevelInfo),
		DialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
			if c.Gate != nil && !c.Gate() {
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
			w := &watchConn{Conn: nc, gate: c.Gate}
			sockMu.Lock()
			sock = w
			sockMu.Unlock()
			return w, nil
		},
	}
	if c.cfg.SASL != "" {
		user, pass, _ := strings.Cut(c.cfg.SASL, ":")
		conn.SASLLogin, conn.SASLPassword, conn.UseSASL = user, pass, true
	}
	down := make(chan struct{})
	var downOnce sync.Once
	conn.AddDisconnectCallback(func(ircmsg.Message) { downOnce.Do(func() { close(down) }) })
	for _, cmd := range handled {
		conn.AddCallback(cmd, c.onMessage)
	}
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
		return false, fmt.Errorf("connect to %s: %w", srv.addr, err)
	}
	defer closeSock()

	gen := c.gen.Add(1)
	if _, ok := conn.AcknowledgedCaps()["multi-prefix"]; ok {
		c.state.mu.Lock()
		c.state.multiPrefix = true
		c.state.mu.Unlock()
	}
	sockMu.Lock()
	l := &link{conn: conn, sock: sock, down: down, timeout: c.writeTimeout}
	sockMu.Unlock()
	c.out.setLink(l, gen)
	c.connected.Store(true)
	c.log.Info("connected to IRC", "server", srv.addr, "nick", c.state.Me(), "tls", srv.tls != nil)
	if c.stateHook != nil {
		c.stateHook(true)
	}
	defer func() {
		c.connected.Store(false)
		c.out.dropLink(gen)
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

// joinWanted sends JOIN for every channel we should be in and are not.
func (c *Client) joinWanted(gen uint64) {
	c.mu.Lock()
	specs := make([]chanSpec, 0, len(c.wanted))
	// Configured channels first, in configured order.
	seen := map[string]bool{}
	for _, s := range c.config {
		k := chanKey(s.name)
		if _, ok := c.wanted[k]; ok && !seen[k] {
			specs = append(specs, s)
			seen[k] = true
		}
	}
	for k, s := range c.wanted {
		if !seen[k] {
			specs = append(specs, s)
		}
	}
	c.mu.Unlock()
	for _, s := range specs {
		if !c.state.Joined(s.name) {
			c.sendJoin(s, gen)
		}
	}
}

// sendJoin queues a JOIN (with the channel's key) ahead of messages.
func (c *Client) sendJoin(s chanSpec, gen uint64) {
	params := []string{s.name}
	if s.key != "" {
		params = append(params, s.key)
	}
	c.control(gen, "JOIN", params...)
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
	want := c.cfg.Nick
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

// onMessage is every callback: bookkeeping first, then commands. It runs
// on ircevent's reader goroutine and must never block.
func (c *Client) onMessage(msg ircmsg.Message) {
	gen := c.gen.Load()
	for _, ev := range c.state.handle(msg) {
		c.onEvent(ev, gen)
	}
	if msg.Command == "NICK" && len(msg.Params) > 0 {
		c.throttle.rename(c.state.Fold(msg.Nick()), c.state.Fold(msg.Params[0]))
	}
	if msg.Command == "PRIVMSG" {
		if req, ok := c.request(msg); ok {
			c.accept(req)
		}
	}
}

func (c *Client) onEvent(ev event, gen uint64) {
	switch ev.kind {
	case evSelfJoin:
		if _, ok := c.configured(ev.channel); !ok {
			// Put there by the server or a services bot: its operators
			// are not ours.
			c.log.Warn("in a channel that is not configured; leaving it", "channel", ev.channel)
			c.control(gen, "PART", ev.channel, "not one of my channels")
			return
		}
		c.log.Info("joined channel", "channel", ev.channel)
		c.wakeJoin(ev.channel, nil)
	case evSelfPart:
		c.log.Warn("left channel", "channel", ev.channel)
	case evSelfKicked:
		c.log.Warn("kicked from channel; rejoining", "channel", ev.channel, "by", ev.nick, "reason", ev.reason)
		c.scheduleRejoin(ev.channel, gen)
	case evJoinFailed:
		c.log.Warn("cannot join channel", "channel", ev.channel, "reason", ev.reason)
		c.wakeJoin(ev.channel, fmt.Errorf("%w: %s: %s", coordinator.ErrCannotDeliver, ev.channel, ev.reason))
	case evNickGone:
		if c.state.Fold(ev.nick) == c.state.Fold(c.cfg.Nick) {
			c.reclaimNick(gen)
		}
	case evSelfNick:
		c.log.Info("nick changed", "nick", ev.nick)
	case evNamesStale:
		c.control(gen, "NAMES", ev.channel)
	}
}

// scheduleRejoin rejoins channel after a short delay (a kick is often a
// warning; rejoining in the same instant looks like a bot out of control).
func (c *Client) scheduleRejoin(channel string, gen uint64) {
	key := chanKey(channel)
	c.mu.Lock()
	defer c.mu.Unlock()
	spec, ok := c.wanted[key]
	if !ok {
		return
	}
	if t := c.rejoins[key]; t != nil {
		t.Stop()
	}
	c.rejoins[key] = time.AfterFunc(c.kickRejoinDelay, func() {
		run.Guard(c.log, "rejoin", func() {
			c.mu.Lock()
			delete(c.rejoins, key)
			c.mu.Unlock()
			if c.gen.Load() == gen && c.connected.Load() && !c.state.Joined(spec.name) {
				c.sendJoin(spec, gen)
			}
		})
	})
}

// request turns a PRIVMSG into a bot request, if it is one of our
// commands: in a configured channel, with the sender's rank there; or
// sent to us privately, with Channel "". Lines in any other channel are
// not commands: that channel's operators are not ours.
func (c *Client) request(msg ircmsg.Message) (bot.Request, bool) {
	if len(msg.Params) < 2 {
		return bot.Request{}, false
	}
	nuh, err := msg.NUH()
	if err != nil || nuh.Name == "" || (nuh.User == "" && nuh.Host == "" && strings.Contains(nuh.Name, ".")) {
		return bot.Request{}, false // from a server, not a user
	}
	nick, target, text := nuh.Name, msg.Params[0], msg.Params[1]
	if c.state.Fold(nick) == c.state.Fold(c.state.Me()) {
		return bot.Request{}, false
	}
	if strings.HasPrefix(text, "\x01") || !c.bot.IsCommand(text) {
		return bot.Request{}, false
	}
	req := bot.Request{Nick: nick, NickKey: c.state.Fold(nick), Text: text}
	switch {
	case c.state.IsChannel(target):
		if _, ok := c.configured(target); !ok {
			return bot.Request{}, false
		}
		req.Channel = target
		req.Rank = c.state.Rank(target, nick)
	case c.state.Fold(target) == c.state.Fold(c.state.Me()):
		// private message
	default:
		return bot.Request{}, false // e.g. "@#chan" (to ops only), "$mask"
	}
	return req, true
}

// accept applies the per-user throttle and hands the request to the
// user's worker. Every command is run or answered with the reason it was
// not.
func (c *Client) accept(req bot.Request) {
	key := c.state.Fold(req.Nick)
	r := c.newReplier(req)
	privileged := !req.Private() && req.Rank >= bot.RankVoice
	if !c.throttle.allow(key, privileged, time.Now()) {
		c.log.Info("throttling user", "nick", req.Nick, "text", req.Text)
		msg := fmt.Sprintf("Sorry, slow down: at most %d commands a minute (%d for voiced users and operators); this one was not run: %s",
			c.throttle.limitFor(false), c.throttle.limitFor(true), text.Cut(req.Text, 100))
		// Queued behind the user's earlier commands, so it follows their
		// answers instead of overtaking them.
		if c.disp.submit(key, func() { r.Reply(msg) }) != nil {
			r.Reply(msg)
		}
		return
	}
	switch err := c.disp.submit(key, func() { c.handle(req, r) }); err {
	case nil:
	case errStopped:
		c.log.Warn("refused a command: shutting down", "nick", req.Nick, "text", req.Text)
		r.Reply("Sorry, I'm shutting down; this one was not run: " + text.Cut(req.Text, 100))
	default:
		c.log.Warn("refused a command: too many queued for this user", "nick", req.Nick, "text", req.Text)
		r.Reply("Sorry, too many of your commands are waiting to run; this one was not run: " + text.Cut(req.Text, 100))
	}
}

func (c *Client) handle(req bot.Request, r *replier) {
	ctx, cancel := context.WithTimeout(c.cmdCtx, c.commandTimeout)
	defer cancel()
	c.bot.Handle(ctx, req, r)
}

// replier answers one request. Reply and Private queue the answer for the
// user's reply sender (combine.go) and return at once, so a command takes
// effect when it arrives, whatever the reply backlog; one user's answers
// still go out in order.
type replier struct {
	c   *Client
	req bot.Request
	cmd uint64
}

func (c *Client) newReplier(req bot.Request) *replier {
	return &replier{c: c, req: req, cmd: c.cmdSeq.Add(1)}
}

func (r *replier) replyTarget() string {
	if r.req.Private() {
		return r.req.Nick
	}
	return r.req.Channel
}

func (r *replier) prefix() string {
	if r.req.Private() {
		return ""
	}
	return r.req.Nick + ": "
}

func (r *replier) Reply(text string)   { r.post(r.replyTarget(), r.prefix(), text) }
func (r *replier) Private(text string) { r.post(r.req.Nick, "", text) }

func (r *replier) post(target, prefix, text string) {
	c := r.c
	c.queueReply(c.state.Fold(r.req.Nick), r.req.Nick, replyItem{
		cmd: r.cmd, target: target, prefix: prefix, text: text,
		expires: time.Now().Add(c.replyMaxAge),
	})
}

// nickLen is the longest nick the server may prefix our lines with.
func (c *Client) nickLen() int {
	n := c.state.NickLen()
	if n > 64 {
		n = 64
	}
	for _, s := range []string{c.state.Me(), c.cfg.Nick} {
		if len(s)+4 > n {
			n = len(s) + 4 // room for an alternate like "Nick_12"
		}
	}
	return n
}

// Announce posts text in channel and returns nil once every line of it
// was written to the socket (coordinator.Announcer). Without a connection
// it fails at once so the caller keeps the notice for later. A channel
// that is not configured is never joined: the text goes to the report
// channel as "[for CHANNEL] text", or, without one, the error wraps
// coordinator.ErrCannotDeliver, as it does when the server refuses to let
// the bot into a configured channel.
func (c *Client) Announce(ctx context.Context, channel, text string) error {
	if _, up := c.out.connected(); !up || !c.connected.Load() {
		return errNotConnected
	}
	dest, via, err := c.route(channel)
	if err != nil {
		return err
	}
	if via != "" {
		text = "[for " + via + "] " + text
	}
	lines, err := messageLines("PRIVMSG", dest, "", text, c.nickLen())
	if err != nil {
		return fmt.Errorf("%w: %v", coordinator.ErrCannotDeliver, err)
	}
	if len(lines) == 0 {
		return nil
	}
	return c.postChannel(ctx, dest, lines)
}

// postChannel sends lines to channel, one of ours, joining it first when
// the bot is not in it, and returns once all were written.
func (c *Client) postChannel(ctx context.Context, channel string, lines [][]byte) error {
	_, err := c.postChannelN(ctx, channel, lines)
	return err
}

// postChannelN is postChannel, also reporting how many lines, from the
// first, were written (outbox.sendN).
func (c *Client) postChannelN(ctx context.Context, channel string, lines [][]byte) (int, error) {
	gen, up := c.out.connected()
	if !up || !c.connected.Load() {
		return 0, errNotConnected
	}
	if !c.state.Joined(channel) {
		if err := c.join(ctx, channel, gen); err != nil {
			return 0, err
		}
	}
	return c.out.sendN(ctx, "a:"+c.state.Fold(channel), gen, time.Time{}, false, lines...)
}

// join joins channel, a configured one, for an announcement and waits for
// the outcome.
func (c *Client) join(ctx context.Context, channel string, gen uint64) error {
	key := chanKey(channel)
	res := make(chan error, 1)
	c.mu.Lock()
	c.joinWait[key] = append(c.joinWait[key], res)
	spec := chanSpec{name: channel, key: c.keys[key]}
	c.mu.Unlock()
	c.sendJoin(spec, gen)
	t := time.NewTimer(c.joinTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("irc: no answer to JOIN %s", channel)
	}
	if err != nil {
		c.mu.Lock()
		ws := c.joinWait[key]
		for i, w := range ws {
			if w == res {
				c.joinWait[key] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return err
	}
	return nil
}

func (c *Client) wakeJoin(channel string, err error) {
	key := chanKey(channel)
	c.mu.Lock()
	ws := c.joinWait[key]
	delete(c.joinWait, key)
	c.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (c *Client) failJoinWaiters(err error) {
	c.mu.Lock()
	all := c.joinWait
	c.joinWait = map[string][]chan error{}
	c.mu.Unlock()
	for _, ws := range all {
		for _, w := range ws {
			w <- err
		}
	}
}

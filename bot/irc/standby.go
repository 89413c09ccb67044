package irc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/retry"
)

// A hot standby (doc/reliability.md, A hot standby on IRC): with Standby
// set, the client stays connected whether or not its node leads. While
// the node does not lead (Lead not called, or Follow since, or Gate
// false) it is silent: the gate refuses every line that speaks to a
// channel or a user (PRIVMSG, NOTICE, TAGMSG), while registration, JOIN,
// PONG, NICK and QUIT still go out; and it runs no command: it holds each
// one for Standby.Window. Lead runs the held commands that no leader
// recorded in Redis (Ledger), once, then runs commands on arrival.

// Ledger is what a hot standby asks of the store (*store.Store has it).
type Ledger interface {
	// MarkIRCRan records, fenced, that this leader runs the command of
	// IRC line key line; false when it was recorded before.
	MarkIRCRan(ctx context.Context, line string, ttl time.Duration) (bool, error)
	// IRCRan reports which lines a leader recorded.
	IRCRan(ctx context.Context, lines []string) ([]bool, error)
}

// Standby configures a hot standby; set Client.Standby before Run.
type Standby struct {
	// Nick is the nick while not leading; the leader takes the main
	// nick (irc.nick).
	Nick string
	// Window is how long a command typed while this node did not lead is
	// held for the case that it leads next.
	Window time.Duration
	// Ledger records the commands the leader runs and tells which ran.
	Ledger Ledger
}

// maxHeld bounds the commands held (the oldest are dropped, counted).
const maxHeld = 2000

type heldCmd struct {
	req bot.Request
	at  time.Time
}

// standbyState is the client's part for Standby.
type standbyState struct {
	mu      sync.Mutex
	live    bool // Lead called and no Follow since: commands run on arrival
	held    []heldCmd
	dropped int // held commands dropped for maxHeld, since the last log
	// skipped counts held commands not run because a leader ran them.
	skipped int
	// seen are the line keys of the commands this client read, when:
	// a CHATHISTORY batch's lines among them are not held again.
	seen map[string]time.Time
	// upSince is when the current connection registered (zero: down).
	upSince time.Time
}

// see records that the client read the command of line key; it reports
// false when it had read it before (within the window).
func (c *Client) see(key string) bool {
	now := time.Now()
	c.sb.mu.Lock()
	defer c.sb.mu.Unlock()
	if c.sb.seen == nil {
		c.sb.seen = map[string]time.Time{}
	}
	if at, ok := c.sb.seen[key]; ok && now.Sub(at) <= c.Standby.Window {
		return false
	}
	if len(c.sb.seen) >= 2*maxHeld {
		for k, at := range c.sb.seen {
			if now.Sub(at) > c.Standby.Window {
				delete(c.sb.seen, k)
			}
		}
	}
	c.sb.seen[key] = now
	return true
}

// markUp notes when the connection came up (up) or went down.
func (c *Client) markUp(up bool) {
	if c.Standby == nil {
		return
	}
	c.sb.mu.Lock()
	defer c.sb.mu.Unlock()
	if up {
		c.sb.upSince = time.Now()
	} else {
		c.sb.upSince = time.Time{}
	}
}

// silent reports whether the client must not speak nor run commands:
// a standby that does not lead.
func (c *Client) silent() bool {
	if c.Standby == nil {
		return false
	}
	c.sb.mu.Lock()
	live := c.sb.live
	c.sb.mu.Unlock()
	return !live || (c.Gate != nil && !c.Gate())
}

// wantNick is the nick to connect with and to reclaim.
func (c *Client) wantNick() string {
	if c.Standby != nil && c.Standby.Nick != "" && c.silent() {
		return c.Standby.Nick
	}
	return c.cfg.Nick
}

// hold keeps req for the next leader (Lead), dropping what is older than
// the window. It reports false when the client went live meanwhile: the
// caller runs req now.
func (c *Client) hold(req bot.Request) bool {
	now := time.Now()
	c.sb.mu.Lock()
	defer c.sb.mu.Unlock()
	if c.sb.live && (c.Gate == nil || c.Gate()) {
		return false
	}
	c.appendHeld(req, now)
	return true
}

// appendHeld adds req to the held commands, dropping (and counting) the
// oldest beyond maxHeld. c.sb.mu is held.
func (c *Client) appendHeld(req bot.Request, now time.Time) {
	c.sb.held = c.pruneHeld(c.sb.held, now)
	if len(c.sb.held) >= maxHeld {
		c.sb.held = c.sb.held[1:]
		c.sb.dropped++
		if c.sb.dropped == 1 || c.sb.dropped%100 == 0 {
			c.log.Warn("standby: too many commands held; dropped the oldest", "dropped", c.sb.dropped, "held", maxHeld)
		}
	}
	c.sb.held = append(c.sb.held, heldCmd{req: req, at: now})
}

func (c *Client) pruneHeld(h []heldCmd, now time.Time) []heldCmd {
	i := 0
	for i < len(h) && now.Sub(h[i].at) > c.Standby.Window {
		i++
	}
	return h[i:]
}

// Lead is called when the node took the leader lease (its Gate now
// true): the client takes the main nick, runs the held commands no
// leader recorded (once: each is checked in Redis after the lease was
// taken, when the old leader's writes are fenced), then runs commands on
// arrival. It returns once the held commands are dispatched or ctx ends.
func (c *Client) Lead(ctx context.Context) {
	if c.Standby == nil {
		return
	}
	gen := c.gen.Load()
	if c.Connected() && c.state.Fold(c.state.Me()) != c.state.Fold(c.cfg.Nick) {
		c.control(gen, "NICK", c.cfg.Nick)
	}
	c.requestHistory(gen)
	c.drainHeld(ctx, true)
}

// drainHeld runs the held commands no leader ran; with goLive it then
// makes the client run commands on arrival.
func (c *Client) drainHeld(ctx context.Context, goLive bool) {
	bo := retry.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 0; ctx.Err() == nil; {
		c.sb.mu.Lock()
		batch := c.pruneHeld(c.sb.held, time.Now())
		if len(batch) == 0 {
			c.sb.held = nil
			if goLive {
				c.sb.live = true
			}
			skipped := c.sb.skipped
			c.sb.skipped = 0
			c.sb.mu.Unlock()
			if skipped > 0 {
				c.log.Info("took over: held commands an earlier leader had run were not run again", "commands", skipped)
			}
			return
		}
		c.sb.held = nil
		c.sb.mu.Unlock()
		lines := make([]string, len(batch))
		for i, h := range batch {
			lines[i] = h.req.Line
		}
		ran, err := c.Standby.Ledger.IRCRan(ctx, lines)
		if err != nil {
			// Put them back in front of what arrived meanwhile and retry.
			c.log.Warn("took over: cannot read which held commands ran; retrying", "commands", len(batch), "err", err)
			c.sb.mu.Lock()
			c.sb.held = append(batch, c.sb.held...)
			c.sb.mu.Unlock()
			if !bo.Sleep(ctx, attempt) {
				break
			}
			attempt++
			continue
		}
		run := 0
		for i, h := range batch {
			if ran[i] {
				c.sb.mu.Lock()
				c.sb.skipped++
				c.sb.mu.Unlock()
				continue
			}
			run++
			c.run(h.req, true)
		}
		if run > 0 {
			c.log.Info("took over: running commands typed while no node could answer", "commands", run)
		}
	}
	c.log.Warn("took over: stopped before the held commands were run", "err", ctx.Err())
}

// Follow is called when the node stopped leading: the client holds
// commands again, and gives the main nick back for the next leader.
func (c *Client) Follow() {
	if c.Standby == nil {
		return
	}
	c.sb.mu.Lock()
	c.sb.live = false
	c.sb.mu.Unlock()
	if c.Connected() && c.Standby.Nick != "" && c.state.Fold(c.state.Me()) == c.state.Fold(c.cfg.Nick) {
		c.control(c.gen.Load(), "NICK", c.Standby.Nick)
	}
}

// onNickFreed takes the main nick at once when its holder leaves it
// (QUIT, or a NICK away from it) while this node leads under another.
func (c *Client) onNickFreed(msg ircmsg.Message) {
	if c.Standby == nil || (msg.Command != "QUIT" && msg.Command != "NICK") || c.silent() {
		return
	}
	if c.state.Fold(msg.Nick()) == c.state.Fold(c.cfg.Nick) && c.state.Fold(c.state.Me()) != c.state.Fold(c.cfg.Nick) {
		c.control(c.gen.Load(), "NICK", c.cfg.Nick)
	}
}

// requestHistory asks, where the server offers CHATHISTORY, for what was
// said in each joined channel within the window: lines that arrived while
// this node itself was not connected. The batch comes back through
// onHistory, which holds its commands (standbyHistory).
func (c *Client) requestHistory(gen uint64) {
	c.sb.mu.Lock()
	whole := !c.sb.upSince.IsZero() && time.Since(c.sb.upSince) > c.Standby.Window
	c.sb.mu.Unlock()
	if whole || !c.state.ChatHistory() {
		return // this connection saw the whole window itself
	}
	since := time.Now().Add(-c.Standby.Window).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, ch := range c.state.JoinedChannels() {
		c.control(gen, "CHATHISTORY", "AFTER", ch, "timestamp="+since, "100")
	}
}

// standbyHistory holds the commands of a CHATHISTORY batch (lines within
// the window, by their server-time) and runs the ones no leader ran.
func (c *Client) standbyHistory(items []ircmsg.Message) {
	if c.Standby == nil {
		return
	}
	n := 0
	for _, m := range items {
		if m.Command != "PRIVMSG" {
			continue
		}
		if ok, ts := m.GetTag("time"); ok {
			if t, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(t) > c.Standby.Window {
				continue
			}
		} else {
			continue
		}
		req, ok := c.request(m)
		if !ok || !c.see(req.Line) {
			continue // not a command, or one this client read itself
		}
		c.sb.mu.Lock()
		c.appendHeld(req, time.Now())
		c.sb.mu.Unlock()
		n++
	}
	if n > 0 && !c.silent() {
		go c.drainHeld(c.cmdCtx, false)
	}
}

// lineKey is the key of an IRC line both nodes derive alike: the
// server's msgid tag where it sends one; otherwise a hash of the sender
// (nick!user@host), the target and the text. The hash cannot tell apart
// the same text sent twice by the same user to the same target within a
// record's lifetime: at a takeover the later one is taken as run (not run
// again: at most once). doc/reliability.md, A hot standby on IRC.
func (c *Client) lineKey(msg ircmsg.Message, nuh ircmsg.NUH, target, text string) string {
	if ok, id := msg.GetTag("msgid"); ok && id != "" {
		return "id:" + id
	}
	h := sha256.New()
	for _, s := range []string{nuh.Name, nuh.User, nuh.Host, c.state.Fold(target), text} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "h:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// speaks reports whether line (as written to the socket) speaks to a
// channel or a user: the lines a standby's gate refuses.
func speaks(line []byte) bool {
	s := string(line)
	if strings.HasPrefix(s, "@") {
		if i := strings.IndexByte(s, ' '); i >= 0 {
			s = strings.TrimLeft(s[i:], " ")
		}
	}
	if strings.HasPrefix(s, ":") {
		if i := strings.IndexByte(s, ' '); i >= 0 {
			s = strings.TrimLeft(s[i:], " ")
		}
	}
	cmd, _, _ := strings.Cut(s, " ")
	switch strings.ToUpper(strings.TrimRight(cmd, "\r\n")) {
	case "PRIVMSG", "NOTICE", "TAGMSG":
		return true
	}
	return false
}

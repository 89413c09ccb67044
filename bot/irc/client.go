// Package irc is ArchiveBot's IRC front end: it keeps one connection to
// the configured server (reconnecting with backoff), joins the channels,
// tracks who holds which channel rank, turns "!" lines into bot.Requests,
// and sends every line through one rate-limited outbox. It also
// implements news.Announcer for the reporting services.
//
// Goroutines: Run owns the connection loop; ircevent runs a reader, a
// writer and a pinger per connection and calls our callbacks from the
// reader, in server order (state updates happen there, never blocking);
// commands run on per-user workers (dispatch.go), answers and finish
// reports on per-user and per-channel senders (replies.go, finish.go), all
// three the same keyed worker queue (keyed.go); one outbox goroutine
// writes every line the bot sends (outbox.go).
package irc

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
)

// Client is the IRC front end. Create it with New and start it with Run.
//
// It has three parts, each a structure of its own embedded here and each
// in its own files: the connection (conn.go), channel membership and
// ranks (membership.go, state.go) and delivery (delivery.go: the outbox,
// replies.go, finish.go). Taking commands (commands.go, dispatch.go) ties
// them together.
type Client struct {
	cfg config.IRC
	bot *bot.Bot
	log *slog.Logger

	connection
	membership
	delivery

	throttle *throttle
	disp     *dispatcher
	cmdCtx   context.Context    // commands run under it
	cancel   context.CancelFunc // cancels cmdCtx

	// Gate, when set, is asked before every write to the server socket
	// and before dialing: false means this node may not speak (its leader
	// lease ran out), and the write is refused and the socket closed, so
	// nothing at all is sent, not even QUIT or PONG. Set before Run.
	Gate func() bool

	// Standby, when set, makes the client a hot standby (standby.go):
	// connected and silent while its node does not lead. Set before Run.
	Standby *Standby
	sb      standbyState

	commandTimeout time.Duration // tunable; tests shorten it

	// presenceEnd hears the presences that end (OnPresenceEnd).
	presenceEnd atomic.Pointer[func(string)]
}

// New returns a client for cfg serving b. Nothing happens until Run.
func New(cfg config.IRC, b *bot.Bot, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("service", "irc")
	c := &Client{
		cfg:      cfg,
		bot:      b,
		log:      logger,
		throttle: newThrottle(cfg.CommandsPerMinute),
		disp:     newDispatcher(8, 256, logger),
		connection: connection{
			backoffMin:   2 * time.Second,
			backoffMax:   5 * time.Minute,
			stableAfter:  time.Minute,
			timeout:      30 * time.Second,
			keepAlive:    2 * time.Minute,
			writeTimeout: 30 * time.Second,
			reclaimEvery: time.Minute,
			drainTimeout: 3 * time.Second,
			quitTimeout:  3 * time.Second,
		},
		membership: membership{
			state:           newTracker(cfg.Nick),
			wanted:          map[string]chanSpec{},
			joinWait:        map[string][]chan error{},
			rejoins:         map[string]*time.Timer{},
			keys:            map[string]string{},
			rejoinEvery:     time.Minute,
			kickRejoinDelay: 3 * time.Second,
			joinTimeout:     20 * time.Second,
		},
		delivery: delivery{
			out:            newOutbox(cfg.MessagesPerSecond, cfg.Burst),
			replyMaxAge:    2 * time.Minute,
			combineReplies: defaultCombineReplies,
			combineFinish:  defaultCombineFinish,
		},
		commandTimeout: time.Minute,
	}
	c.replies = newKeyedQueue(logger, "replies", c.sendReplyBatch)
	c.replies.take = c.takeReplies
	c.finishes = newKeyedQueue(logger, "finish reports", c.sendFinishBatch)
	c.finishes.take = c.takeFinishes
	if b != nil {
		b.SetDirectory(c) // !whois asks the membership part
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

// Connected reports whether the client is registered on the server now.
func (c *Client) Connected() bool { return c.connected.Load() }

// WaitConnected waits until the client is registered on the server (it
// returns at once if it is) or ctx ends; it reports whether it is
// connected. The notice queues' drain waits on it after a start instead
// of polling Connected.
func (c *Client) WaitConnected(ctx context.Context) bool {
	select {
	case <-c.connected.wait():
		return true
	case <-ctx.Done():
		return c.Connected()
	}
}

// Nick returns the nick the bot currently has.
func (c *Client) Nick() string { return c.state.Me() }

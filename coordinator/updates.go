package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Updates listens on the `updates` channel (a job ident on every log
// entry, finish and abort) and fans each ident out to the registered
// callbacks. When the connection drops (Redis restarted, client killed) it
// reconnects with backoff and subscribes again; messages published in
// between are lost, which is why the analyzer also sweeps `working`.
type Updates struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu       sync.Mutex
	onUpdate []func(ctx context.Context, ident string)
	onSub    []func(ctx context.Context)

	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts; defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
}

// NewUpdates returns a listener over rdb; Run starts it.
func NewUpdates(rdb redis.UniversalClient, log *slog.Logger) *Updates {
	if log == nil {
		log = slog.Default()
	}
	return &Updates{rdb: rdb, log: log.With("service", "updates"),
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second}
}

// OnUpdate registers fn to be called with the ident of every `updates`
// message. Callbacks run one after the other on the listener's goroutine:
// they must be quick (hand slow work to a goroutine of their own). A
// panicking callback is logged and the others still run.
func (u *Updates) OnUpdate(fn func(ctx context.Context, ident string)) {
	u.mu.Lock()
	u.onUpdate = append(u.onUpdate, fn)
	u.mu.Unlock()
}

// OnSubscribe registers fn to be called each time the subscription is
// (re)established, before any message of it is delivered: a chance to
// catch up on what was published while disconnected.
func (u *Updates) OnSubscribe(fn func(ctx context.Context)) {
	u.mu.Lock()
	u.onSub = append(u.onSub, fn)
	u.mu.Unlock()
}

// Run listens until ctx ends.
func (u *Updates) Run(ctx context.Context) {
	backoff := u.MinBackoff
	for ctx.Err() == nil {
		got, err := u.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = u.MinBackoff
		}
		u.log.Warn("updates subscription lost, reconnecting", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, u.MaxBackoff)
	}
}

// session subscribes once and delivers messages until the connection
// fails. It reports whether the subscription was established.
func (u *Updates) session(ctx context.Context) (bool, error) {
	ps := u.rdb.Subscribe(ctx)
	defer ps.Close()
	// A blocked read does not watch ctx: closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	if err := ps.Subscribe(ctx, ChannelUpdates); err != nil {
		return false, err
	}
	// Wait for the server's confirmation so callers know we are listening.
	if _, err := ps.Receive(ctx); err != nil {
		return false, err
	}
	u.log.Debug("subscribed", "channel", ChannelUpdates)
	u.mu.Lock()
	subs := append([]func(context.Context){}, u.onSub...)
	u.mu.Unlock()
	for _, fn := range subs {
		guarded(u.log, "updates subscribe callback", func() { fn(ctx) })
	}
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return true, err
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue // pong, or a subscription confirmation
		}
		u.mu.Lock()
		fns := u.onUpdate
		u.mu.Unlock()
		for _, fn := range fns {
			guarded(u.log, "updates callback", func() { fn(ctx, m.Payload) })
		}
	}
}

package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/store"
)

// Updates listens on the `updates` channel (a job ident on every log
// entry, finish and abort) and fans each ident out to the registered
// callbacks. When the connection drops (Redis restarted, client killed) it
// reconnects with backoff and subscribes again; messages published in
// between are lost, which is why the analyzer also sweeps `working`.
type Updates struct {
	store Store
	log   *slog.Logger

	mu       sync.Mutex
	onUpdate []func(ctx context.Context, ident string)
	onSub    []func(ctx context.Context)

	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts (run.PubSubBackoff unless a test changes them).
	MinBackoff, MaxBackoff time.Duration
}

// NewUpdates returns a listener over st; Run starts it.
func NewUpdates(st Store, log *slog.Logger) *Updates {
	return &Updates{store: st, log: serviceLog(log, "updates"),
		MinBackoff: run.PubSubBackoff.Min, MaxBackoff: run.PubSubBackoff.Max}
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
	run.Reconnect(ctx, u.log, "updates subscription", retry.Backoff{Min: u.MinBackoff, Max: u.MaxBackoff}, u.session)
}

// session subscribes once and delivers messages until the connection
// fails. It reports whether the subscription was established.
func (u *Updates) session(ctx context.Context) (bool, error) {
	return u.store.ListenUpdates(ctx, func() {
		u.log.Debug("subscribed", "channel", store.ChannelUpdates)
		u.mu.Lock()
		subs := append([]func(context.Context){}, u.onSub...)
		u.mu.Unlock()
		for _, fn := range subs {
			run.Guard(u.log, "updates subscribe callback", func() { fn(ctx) })
		}
	}, func(ident string) {
		u.mu.Lock()
		fns := u.onUpdate
		u.mu.Unlock()
		for _, fn := range fns {
			run.Guard(u.log, "updates callback", func() { fn(ctx, ident) })
		}
	})
}

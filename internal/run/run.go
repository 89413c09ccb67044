// Package run holds the primitives every long-lived goroutine of the
// control node is built from: Guard, the one panic guard, Every, the one
// scheduling primitive (a ticker around a run-once function, as river's
// maintenance services do), and Reconnect, the one reconnect loop (the
// pub/sub listeners, the IRC connection), on package retry's backoff.
package run

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/retry"
)

// Guard runs fn, logging the panic and its stack instead of crashing the
// process when fn panics.
func Guard(log *slog.Logger, what string, fn func()) {
	GuardThen(log, what, fn, nil)
}

// GuardThen is Guard that, once a panic is logged, calls then (when not
// nil) with the panic's value: a connection that says so to its client
// and ends, a loop that returns it as an error. A panic in then is logged
// too.
func GuardThen(log *slog.Logger, what string, fn func(), then func(p any)) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic", "in", what, "panic", p, "stack", string(debug.Stack()))
			if then != nil {
				Guard(log, what+" (after a panic)", func() { then(p) })
			}
		}
	}()
	fn()
}

// Go runs fn on a goroutine of its own under Guard, counted in wg.
func Go(wg *sync.WaitGroup, log *slog.Logger, what string, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		Guard(log, what, fn)
	}()
}

// Schedule says when Every calls its function.
type Schedule struct {
	// Interval between two calls; zero or negative: no periodic calls.
	Interval time.Duration
	// Now calls the function once at the start, before the first tick.
	Now bool
	// Trigger, when it receives, calls the function at once (a sweep
	// asked for out of turn).
	Trigger <-chan struct{}
}

// Every calls fn as s says until ctx ends, on the calling goroutine. Calls
// never overlap: a tick that comes while fn runs is dropped (time.Ticker
// drops ticks a slow receiver misses), so a slow cycle is never run twice
// at once. A panicking call is logged and the schedule goes on.
func Every(ctx context.Context, log *slog.Logger, name string, s Schedule, fn func(context.Context)) {
	var tick <-chan time.Time
	if s.Interval > 0 {
		t := time.NewTicker(s.Interval)
		defer t.Stop()
		tick = t.C
	}
	if s.Now && ctx.Err() == nil {
		Guard(log, name, func() { fn(ctx) })
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-s.Trigger:
		}
		if ctx.Err() != nil {
			return
		}
		Guard(log, name, func() { fn(ctx) })
	}
}

// Reconnect runs session until ctx ends, again after every failure: a
// long-lived connection (a pub/sub subscription) that must come back when
// Redis restarts or drops the client. session returns when its connection
// fails, reporting whether it counts as established (the next wait starts
// again from b.Min: a subscription that was made, an IRC connection that
// registered and stayed up a while) and why it ended. Each loss is logged as "WHAT lost,
// reconnecting" with the error and the wait.
func Reconnect(ctx context.Context, log *slog.Logger, what string, b retry.Backoff, session func(context.Context) (bool, error)) {
	n := 0 // attempts since the last session that was established
	for ctx.Err() == nil {
		up, err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if up {
			n = 0
		}
		wait := b.Wait(n)
		log.Warn(what+" lost, reconnecting", "err", err, "in", wait)
		if !retry.Sleep(ctx, wait) {
			return
		}
		n++
	}
}

// PubSubBackoff bounds the reconnection waits of every pub/sub listener
// (`updates`, job events in the firehose, the pipeline API's job
// settings): Reconnect.
var PubSubBackoff = retry.Backoff{Min: config.DefaultPubSubMinBackoff, Max: config.DefaultPubSubMaxBackoff}

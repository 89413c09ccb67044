// Package run holds the primitives every long-lived goroutine of the
// control node is built from: Guard, the one panic guard, Every, the one
// scheduling primitive (a ticker around a run-once function, as river's
// maintenance services do), and Reconnect, the one reconnect loop of the
// pub/sub listeners.
package run

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
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

// Backoff is the one backoff of the node (every reconnect and retry: the
// pub/sub listeners' Reconnect, the IRC client's reconnects, the
// tweeter's retries, the bridge's calls, the pipeline API's reads), after
// river's ExponentialBackoff and soju's backoffer: the wait before
// attempt n (from 0) is Min doubled n times, at most Max. With Jitter the
// wait is "equal jitter": half of it fixed, the other half random, so
// that many clients do not come back in lockstep. Min equal to Max is a
// fixed wait.
type Backoff struct {
	Min, Max time.Duration
	Jitter   bool
}

// Wait is the wait before attempt n (from 0; a negative n is 0).
func (b Backoff) Wait(n int) time.Duration {
	d := b.Min
	for i := 0; i < n && d > 0 && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	if !b.Jitter {
		return d
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half)
}

// Sleep waits b.Wait(n), or until ctx ends; it reports whether the wait
// passed.
func (b Backoff) Sleep(ctx context.Context, n int) bool {
	return sleep(ctx, b.Wait(n))
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reconnect runs session until ctx ends, again after every failure: a
// long-lived connection (a pub/sub subscription) that must come back when
// Redis restarts or drops the client. session returns when its connection
// fails, reporting whether it was established (the next wait starts again
// from b.Min) and why it ended. Each loss is logged as "WHAT lost,
// reconnecting" with the error and the wait.
func Reconnect(ctx context.Context, log *slog.Logger, what string, b Backoff, session func(context.Context) (bool, error)) {
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
		if !sleep(ctx, wait) {
			return
		}
		n++
	}
}

// PubSubBackoff bounds the reconnection waits of every pub/sub listener
// (`updates`, job events in the firehose, the pipeline API's job
// settings): Reconnect.
var PubSubBackoff = Backoff{Min: config.DefaultPubSubMinBackoff, Max: config.DefaultPubSubMaxBackoff}

// Package retry is the module's one backoff: the wait before each attempt
// of everything that retries or reconnects (the pub/sub listeners, the IRC
// client, the tweeter, the pipeline API's reads, the bridge's calls and
// accept loop, the pipeline client's takes), the one interruptible sleep,
// and the one reader of a server's Retry-After.
//
// It imports only the standard library: the pipeline client, which
// volunteers link into their pipelines, uses it without linking the node
// (its configuration, go-redis). internal/run builds its reconnect loop
// on it.
package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff is the one backoff, after river's ExponentialBackoff and soju's
// backoffer: the wait before attempt n (from 0) is Min doubled n times, at
// most Max. With Jitter the wait is "equal jitter": half of it fixed, the
// other half random, so that many clients do not come back in lockstep.
// Min equal to Max is a fixed wait.
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
	return Sleep(ctx, b.Wait(n))
}

// Sleep waits d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// After reads the Retry-After header of h: delay-seconds (a non-negative
// integer) or an HTTP date (RFC 9110, 10.2.3), as the time it names,
// seconds counted from now. ok is false when the header is absent or is
// neither.
func After(h http.Header, now time.Time) (at time.Time, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return now.Add(time.Duration(s) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

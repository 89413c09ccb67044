package irc

import (
	"sync"
	"time"
)

// throttle limits how many commands each user may run per window (a
// sliding window over the times of accepted commands). The first refused
// command gets a polite "slow down"; further ones are ignored silently
// until the window has room again, so a flooding user cannot make the bot
// flood on their behalf.
type throttle struct {
	limit  int
	window time.Duration

	mu        sync.Mutex
	users     map[string]*userWindow
	lastSweep time.Time
}

type userWindow struct {
	times  []time.Time // accepted commands inside the window, oldest first
	warned bool
}

func newThrottle(perMinute int) *throttle {
	return &throttle{limit: perMinute, window: time.Minute, users: map[string]*userWindow{}}
}

// allow decides on one command by user key at now. ok: run it. warn: it
// is refused and the user should be told once.
func (t *throttle) allow(key string, now time.Time) (ok, warn bool) {
	if t.limit <= 0 {
		return true, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastSweep) > t.window {
		t.sweep(now)
	}
	u := t.users[key]
	if u == nil {
		u = &userWindow{}
		t.users[key] = u
	}
	u.prune(now, t.window)
	if len(u.times) < t.limit {
		u.times = append(u.times, now)
		u.warned = false
		return true, false
	}
	if u.warned {
		return false, false
	}
	u.warned = true
	return false, true
}

// rename carries a user's window over a nick change, so changing nick does
// not reset the limit.
func (t *throttle) rename(from, to string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if u, ok := t.users[from]; ok && from != to {
		delete(t.users, from)
		if old, ok := t.users[to]; ok && len(old.times) > len(u.times) {
			u = old
		}
		t.users[to] = u
	}
}

// sweep forgets users with nothing left in their window; mu held.
func (t *throttle) sweep(now time.Time) {
	t.lastSweep = now
	for k, u := range t.users {
		u.prune(now, t.window)
		if len(u.times) == 0 {
			delete(t.users, k)
		}
	}
}

func (u *userWindow) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(u.times) && now.Sub(u.times[i]) >= window {
		i++
	}
	if i > 0 {
		u.times = append(u.times[:0], u.times[i:]...)
	}
}

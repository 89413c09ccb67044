package irc

import (
	"sync"
	"time"
)

// privilegedFactor is how many more commands voiced users and operators
// may run than users without a rank: a clean-up of a crawl (an !a, then
// forty !ig in twenty seconds) must never hit the limit.
const privilegedFactor = 10

// throttle limits how many commands each user may run per window (a
// sliding window over the times of accepted commands). It only decides;
// the client answers every refused command, so nothing is dropped
// without a word.
type throttle struct {
	limit  int // per window, for users without a rank
	window time.Duration

	mu        sync.Mutex
	users     map[string]*userWindow
	lastSweep time.Time
}

type userWindow struct {
	times []time.Time // accepted commands inside the window, oldest first
}

func newThrottle(perMinute int) *throttle {
	return &throttle{limit: perMinute, window: time.Minute, users: map[string]*userWindow{}}
}

// limitFor is the limit for a user with (privileged) or without a rank.
func (t *throttle) limitFor(privileged bool) int {
	if privileged {
		return t.limit * privilegedFactor
	}
	return t.limit
}

// allow decides on one command by user key at now; privileged is true
// for a voiced user or an operator in the channel the command came from.
func (t *throttle) allow(key string, privileged bool, now time.Time) bool {
	if t.limit <= 0 {
		return true
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
	if len(u.times) < t.limitFor(privileged) {
		u.times = append(u.times, now)
		return true
	}
	return false
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

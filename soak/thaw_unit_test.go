package soak

import (
	"testing"
	"time"
)

// TestTakeUnsureAfterAThaw: a take printed within thawSettle of the
// soak's SIGCONT may have been made as early as its SIGSTOP; one printed
// later, or with no stop, was made at its line.
func TestTakeUnsureAfterAThaw(t *testing.T) {
	p := &pipe{}
	now := time.Now()
	if u := p.takeUnsure(now); u != 0 {
		t.Errorf("never stopped: unsure %v, want 0", u)
	}
	p.frozen(true)
	stop := p.frozeAt
	p.frozen(false)
	thaw := p.thawedAt
	if u := p.takeUnsure(thaw.Add(10 * time.Millisecond)); u < thaw.Sub(stop) {
		t.Errorf("printed 10ms after the thaw: unsure %v, want at least the stop (%v)", u, thaw.Sub(stop))
	}
	if u := p.takeUnsure(thaw.Add(thawSettle + time.Millisecond)); u != 0 {
		t.Errorf("printed %v after the thaw: unsure %v, want 0", thawSettle, u)
	}
	p.frozen(true) // stopped again, not yet thawed
	if u := p.takeUnsure(time.Now()); u != 0 {
		t.Errorf("while stopped: unsure %v, want 0 (nothing prints while stopped)", u)
	}
}

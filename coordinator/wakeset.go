package coordinator

import (
	"context"
	"sync"
)

// wakeSet is the set of jobs a worker is asked to look at soon (the
// analyzer's and the firehose's, filled from `updates` messages): add
// never blocks and wakes the worker, which takes the whole set at once.
type wakeSet struct {
	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
}

func newWakeSet() *wakeSet {
	return &wakeSet{pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// add puts ident in the set and wakes the worker; "" is ignored.
func (w *wakeSet) add(ident string) {
	if ident == "" {
		return
	}
	w.mu.Lock()
	w.pending[ident] = struct{}{}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wait blocks until an add since the last wait, or until ctx ends; it
// reports whether the worker goes on (false: ctx ended).
func (w *wakeSet) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-w.wake:
		return true
	}
}

// take empties the set and returns what it held.
func (w *wakeSet) take() map[string]struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	batch := w.pending
	w.pending = map[string]struct{}{}
	return batch
}

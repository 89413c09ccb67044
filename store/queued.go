package store

import "sync"

// queuedSignal wakes whoever waits for a job to be queued through this
// store (the pipeline API's long-poll takes): a channel closed at the
// next queueing, then replaced.
type queuedSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// JobsQueued returns a channel closed the next time this store queues a
// job (Register, Requeue, Move; whatever their outcome: a spurious wake
// only costs the waiter a look). Jobs queued by other processes are not
// seen: a waiter looks again now and then all the same.
func (s *Store) JobsQueued() <-chan struct{} {
	s.queued.mu.Lock()
	defer s.queued.mu.Unlock()
	if s.queued.ch == nil {
		s.queued.ch = make(chan struct{})
	}
	return s.queued.ch
}

func (s *Store) notifyQueued() {
	s.queued.mu.Lock()
	if s.queued.ch != nil {
		close(s.queued.ch)
		s.queued.ch = nil
	}
	s.queued.mu.Unlock()
}

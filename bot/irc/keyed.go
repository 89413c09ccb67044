package irc

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/archiveteam/archivebot-go/internal/run"
)

// keyedQueue holds items in one FIFO per key and runs one worker per key
// with items waiting: a key's items are worked on in the order they came,
// one key's slow work holds up only that key, and a key without items has
// no goroutine. It serves the client's three per-key queues: commands by
// user (dispatch.go), answers by user (replies.go) and finish reports by
// channel (finish.go).
//
// push never blocks. Each worker hands its key's next batch to work: one
// item, or as many as take says (the delivery queues combine what piled
// up). Every batch runs under the panic guard, so a panicking batch costs
// only itself.
type keyedQueue[T any] struct {
	log *slog.Logger
	// what names the work in the panic guard's log; keyAttr, when set,
	// adds the key to that log under this name.
	what, keyAttr string
	// maxQueue bounds the items waiting per key (0: no bound).
	maxQueue int
	// sem, when set, bounds the batches running at once across keys.
	sem chan struct{}
	// take says how many of the waiting items (never empty) the next
	// batch takes; nil takes one. It runs with the queue's lock held.
	take func(waiting []T) int
	// work handles one batch of key's items; name is what the push that
	// started key's worker called it (a nick or channel as spelled).
	work func(key, name string, batch []T)

	mu      sync.Mutex
	queues  map[string]*keyQueue[T] // present while the key's worker runs
	idle    chan struct{}           // closed and replaced when a worker ends
	stopped bool
}

// keyQueue is one key's waiting items.
type keyQueue[T any] struct {
	name  string
	items []T
}

func newKeyedQueue[T any](log *slog.Logger, what string, work func(key, name string, batch []T)) *keyedQueue[T] {
	return &keyedQueue[T]{log: log, what: what, work: work, queues: map[string]*keyQueue[T]{}, idle: make(chan struct{})}
}

// push queues it behind key's earlier items and starts key's worker when
// none runs. It never blocks; it refuses with errStopped once the queue is
// stopped and errQueueFull when key already has maxQueue items waiting.
func (q *keyedQueue[T]) push(key, name string, it T) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return errStopped
	}
	kq := q.queues[key]
	if kq != nil && q.maxQueue > 0 && len(kq.items) >= q.maxQueue {
		return errQueueFull
	}
	if kq == nil {
		kq = &keyQueue[T]{name: name}
		q.queues[key] = kq
		go run.Guard(q.log, q.what, func() { q.worker(key, kq) })
	}
	kq.items = append(kq.items, it)
	return nil
}

// worker works on key's items until none are left.
func (q *keyedQueue[T]) worker(key string, kq *keyQueue[T]) {
	log := q.log
	if q.keyAttr != "" {
		log = log.With(q.keyAttr, key)
	}
	for {
		q.mu.Lock()
		if len(kq.items) == 0 {
			delete(q.queues, key)
			close(q.idle)
			q.idle = make(chan struct{})
			q.mu.Unlock()
			return
		}
		n := 1
		if q.take != nil {
			n = min(max(q.take(kq.items), 1), len(kq.items))
		}
		var batch []T
		if n == len(kq.items) {
			batch, kq.items = kq.items, nil
		} else {
			batch = slices.Clone(kq.items[:n])
			clear(kq.items[:n])
			kq.items = kq.items[n:]
		}
		q.mu.Unlock()

		if q.sem != nil {
			q.sem <- struct{}{}
		}
		run.Guard(log, q.what, func() { q.work(key, kq.name, batch) })
		if q.sem != nil {
			<-q.sem
		}
	}
}

// stop takes no more items and drops the waiting ones, returning how many
// it dropped; batches already running finish.
func (q *keyedQueue[T]) stop() (dropped int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	for _, kq := range q.queues {
		dropped += len(kq.items)
		kq.items = nil
	}
	return dropped
}

// wait waits until every worker has ended (nothing waiting, nothing
// running), or ctx ends; it reports which.
func (q *keyedQueue[T]) wait(ctx context.Context) bool {
	for {
		q.mu.Lock()
		idle, wake := len(q.queues) == 0, q.idle
		q.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

package irc

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/archiveteam/archivebot-go/internal/run"
)

// dispatcher runs commands off the IRC read loop: one worker per user, so
// one user's commands run in the order they were typed, and at most
// `slots` commands at once, so a slow command (a hung Redis call) holds up
// only its own user and one slot — never the connection.
type dispatcher struct {
	log      *slog.Logger
	sem      chan struct{}
	maxQueue int

	mu      sync.Mutex
	queues  map[string][]func() // present while the key's worker runs
	stopped bool
	wg      sync.WaitGroup
}

func newDispatcher(slots, maxQueue int, log *slog.Logger) *dispatcher {
	return &dispatcher{log: log, sem: make(chan struct{}, slots), maxQueue: maxQueue, queues: map[string][]func(){}}
}

// Why submit refused a job.
var (
	errStopped   = errors.New("shutting down")
	errQueueFull = errors.New("too many commands waiting")
)

// submit queues job behind key's earlier jobs. It never blocks; it refuses
// with errStopped once the dispatcher is stopped and errQueueFull when
// key's queue is full.
func (d *dispatcher) submit(key string, job func()) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errStopped
	}
	q, running := d.queues[key]
	if len(q) >= d.maxQueue {
		return errQueueFull
	}
	d.queues[key] = append(q, job)
	if !running {
		d.wg.Add(1)
		go d.worker(key)
	}
	return nil
}

func (d *dispatcher) worker(key string) {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		q := d.queues[key]
		if len(q) == 0 {
			delete(d.queues, key)
			d.mu.Unlock()
			return
		}
		job := q[0]
		q[0] = nil
		d.queues[key] = q[1:]
		d.mu.Unlock()

		d.sem <- struct{}{}
		d.run(key, job)
		<-d.sem
	}
}

func (d *dispatcher) run(key string, job func()) {
	run.Guard(d.log.With("user", key), "command", job)
}

// stop takes no more jobs and drops the queued ones (counted in the log:
// the connection is closing, so their users can no longer be answered);
// running jobs finish.
func (d *dispatcher) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	dropped := 0
	for k := range d.queues {
		dropped += len(d.queues[k])
		d.queues[k] = nil
	}
	if dropped > 0 {
		d.log.Warn("shutting down: dropped commands that had not started", "commands", dropped)
	}
}

// wait waits for running jobs to finish, or for ctx.
func (d *dispatcher) wait(ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

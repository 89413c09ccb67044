package irc

import (
	"context"
	"errors"
	"log/slog"
)

// dispatcher runs commands off the IRC read loop: one worker per user, so
// one user's commands run in the order they were typed, and at most
// `slots` commands at once, so a slow command (a hung Redis call) holds up
// only its own user and one slot — never the connection. It is a
// keyedQueue of jobs keyed by folded nick.
type dispatcher struct {
	log *slog.Logger
	q   *keyedQueue[func()]
}

func newDispatcher(slots, maxQueue int, log *slog.Logger) *dispatcher {
	q := newKeyedQueue(log, "command", func(_, _ string, batch []func()) { batch[0]() })
	q.keyAttr, q.maxQueue, q.sem = "user", maxQueue, make(chan struct{}, slots)
	return &dispatcher{log: log, q: q}
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
	return d.q.push(key, key, job)
}

// stop takes no more jobs and drops the queued ones (counted in the log:
// the connection is closing, so their users can no longer be answered);
// running jobs finish.
func (d *dispatcher) stop() {
	if dropped := d.q.stop(); dropped > 0 {
		d.log.Warn("shutting down: dropped commands that had not started", "commands", dropped)
	}
}

// wait waits for running jobs to finish, or for ctx.
func (d *dispatcher) wait(ctx context.Context) bool { return d.q.wait(ctx) }

package store

// Counts for !status, /status and the Redis-backed metrics.

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// StatusCounts is what /status reports.
type StatusCounts struct {
	Pending, PendingAO, PendingLarge, Working int64
	Completed, Aborted, Failed                int64
	// Named maps every pending:NAME queue to its length.
	Named map[string]int64
	// Pauses are the paused queues, with who, when and why.
	Pauses []Pause
}

// StatusCounts counts every queue and outcome: Summary, per named queue.
// Round trips: 2 (the queue index, then one pipeline).
func (s *Store) StatusCounts(ctx context.Context) (StatusCounts, error) {
	sum, err := s.Summary(ctx)
	if err != nil {
		return StatusCounts{}, err
	}
	c := StatusCounts{
		Pending: sum.Pending, PendingAO: sum.PendingAO, PendingLarge: sum.Large, Working: sum.Working,
		Completed: sum.Completed, Aborted: sum.Aborted, Failed: sum.Failed,
		Named:  make(map[string]int64, len(sum.NamedQueues)),
		Pauses: sum.Pauses,
	}
	for _, q := range sum.NamedQueues {
		c.Named[q.Name] = q.Len
	}
	return c, nil
}

// Gauges are the Redis-backed values /metrics reports.
type Gauges struct {
	Status StatusCounts
	// Pipelines is the number of members of `pipelines`.
	Pipelines int64
	// FinishNotices is the number of finish notices waiting: in
	// finish_notifications plus in our processing list.
	FinishNotices int64
}

// Gauges reads the metrics gauges.
// Round trips: those of StatusCounts, plus one pipeline (SCARD, LLEN ×2).
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	st, err := s.StatusCounts(ctx)
	if err != nil {
		return Gauges{}, err
	}
	var card, n1, n2 *redis.IntCmd
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		card = p.SCard(ctx, KeyPipelines)
		n1 = p.LLen(ctx, KeyFinishNotifications)
		n2 = p.LLen(ctx, KeyFinishProcessing)
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return Gauges{}, wrap("read gauges", err)
		}
	}
	return Gauges{Status: st, Pipelines: card.Val(), FinishNotices: n1.Val() + n2.Val()}, nil
}

// Summary is what !status without arguments reports.
type Summary struct {
	Completed, Aborted, Failed int64
	Working                    int64
	Pending, PendingAO, Large  int64
	// Named is the number of jobs in pending:NAME queues, NamedQueues the
	// non-empty ones with their lengths.
	Named       int64
	NamedQueues []NamedQueue
	// Pauses are the paused queues (doc/protocol.md, Paused queues); a
	// paused queue's jobs are counted in its queue.
	Pauses []Pause
}

// Summary counts jobs by state and queue, every queue included, in two
// round trips whatever the size of the keyspace.
func (s *Store) Summary(ctx context.Context) (Summary, error) {
	named, err := s.NamedQueueLens(ctx)
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, KeyJobsCompleted)
		p.Get(ctx, KeyJobsAborted)
		p.Get(ctx, KeyJobsFailed)
		p.LLen(ctx, KeyWorking)
		p.LLen(ctx, KeyPending)
		p.LLen(ctx, KeyPendingAO)
		p.LLen(ctx, KeyPendingLarge)
		// A paused queue's jobs wait aside (doc/protocol.md, Paused queues).
		p.LLen(ctx, KeyPausedQueue(KeyPending))
		p.LLen(ctx, KeyPausedQueue(KeyPendingAO))
		p.LLen(ctx, KeyPausedQueue(KeyPendingLarge))
		p.HGetAll(ctx, KeyPaused)
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return sum, wrap("status summary", err)
		}
	}
	counter := func(c redis.Cmder) int64 {
		n, _ := c.(*redis.StringCmd).Int64()
		return n
	}
	sum.Completed = counter(cmds[0])
	sum.Aborted = counter(cmds[1])
	sum.Failed = counter(cmds[2])
	sum.Working = cmds[3].(*redis.IntCmd).Val()
	sum.Pending = cmds[4].(*redis.IntCmd).Val()
	sum.PendingAO = cmds[5].(*redis.IntCmd).Val()
	sum.Large = cmds[6].(*redis.IntCmd).Val()
	sum.Pending += cmds[7].(*redis.IntCmd).Val()
	sum.PendingAO += cmds[8].(*redis.IntCmd).Val()
	sum.Large += cmds[9].(*redis.IntCmd).Val()
	sum.Pauses = decodePauses(cmds[10].(*redis.MapStringStringCmd).Val())
	for _, q := range named {
		sum.Named += q.Len
	}
	sum.NamedQueues = named
	return sum, nil
}

package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/record"
)

// The read models of a job for the web API and the admin CLI (their
// door): the jobs in flight (ActiveJobs), one job with its place in the
// queues (JobDetail), the ignore sets of several jobs (IgnoreSets).

// IgnoreSets returns the ignore patterns of each ident, sorted, and
// whether each ident is known (has a job record, an ignore set or a
// failure record). One pipeline (SMEMBERS + EXISTS ×2 per ident).
func (s *Store) IgnoreSets(ctx context.Context, idents []string) (map[string][]string, map[string]bool, error) {
	members := make([]*redis.StringSliceCmd, len(idents))
	exists := make([]*redis.IntCmd, len(idents))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			members[i] = p.SMembers(ctx, KeyIgnores(id))
			exists[i] = p.Exists(ctx, KeyJob(id), KeyIgnores(id), KeyFailed(id))
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read ignore patterns", err)
	}
	pats := make(map[string][]string, len(idents))
	known := make(map[string]bool, len(idents))
	for i, id := range idents {
		m := members[i].Val()
		slices.Sort(m)
		pats[id] = m
		known[id] = exists[i].Val() > 0
	}
	return pats, known, nil
}

// JobDetail is everything /jobs/IDENT shows about one job.
type JobDetail struct {
	Ident string
	// Job is the record; nil when only a failure record is left.
	Job     *record.Job
	Failure *record.Failure
	Ignores []string
	// History is the job's history, oldest first (doc/protocol.md, Job
	// history); it outlives the record of an aborted or failed job.
	History []HistoryEntry
	// TTL is the time left before the record expires (and the URL can be
	// archived again); negative when it has no expiry.
	TTL time.Duration
	// Queue and Position (1 = next to run) for a queued job; Queue is ""
	// when it is in no pending queue.
	Queue    string
	Position int64
	QueueLen int64
	// Working reports whether the ident is in `working`.
	Working bool
}

// State is the job's state (StateOf its record, failure record and
// place in `working`).
func (d *JobDetail) State() record.State { return record.StateOf(d.Job, d.Failure, d.Working) }

// Record is the job record to show: the record, else the copy the
// failure record keeps.
func (d *JobDetail) Record() *record.Job { return record.Shown(d.Ident, d.Job, d.Failure) }

// JobDetail reads one job. It returns nil, nil when there is neither a job
// record nor a failure record that speaks (Speaking: a ghost hash is no
// record, a failure record beside a newer registration is none).
// Round trips: one pipeline (HGETALL, SMEMBERS, PTTL, HGETALL of the
// failure record, LRANGE of the history, LPOS + LLEN in working and the three fixed queues);
// for a queued job found in none of them, the queue index (one read) and one
// more pipeline over the named queues.
func (s *Store) JobDetail(ctx context.Context, ident string) (*JobDetail, error) {
	queues := append([]string{KeyWorking}, FixedQueues...)
	var (
		job, fail *redis.MapStringStringCmd
		ign, hist *redis.StringSliceCmd
		ttl       *redis.DurationCmd
		pos, lens []*redis.IntCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		job = p.HGetAll(ctx, KeyJob(ident))
		ign = p.SMembers(ctx, KeyIgnores(ident))
		ttl = p.PTTL(ctx, KeyJob(ident))
		fail = p.HGetAll(ctx, KeyFailed(ident))
		hist = p.LRange(ctx, KeyHistory(ident), 0, -1)
		pos, lens = lposAll(ctx, p, queues, ident)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read job "+ident, err)
	}
	d := &JobDetail{Ident: ident, Failure: record.DecodeFailure(ident, fail.Val()), TTL: ttl.Val(), History: parseHistory(hist.Val())}
	if m := job.Val(); len(m) > 0 {
		d.Job = record.DecodeJob(ident, m)
	}
	d.Job, d.Failure = record.Speaking(d.Job, d.Failure)
	if d.Job == nil && d.Failure == nil {
		return nil, nil
	}
	d.Ignores = ign.Val()
	slices.Sort(d.Ignores)
	found := d.place(queues, pos, lens)
	if d.Job != nil && !found && d.Job.State() == record.StateQueued {
		named, err := s.NamedQueues(ctx)
		if err != nil {
			return nil, err
		}
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			pos, lens = lposAll(ctx, p, named, ident)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
			return nil, wrap("find queue of "+ident, err)
		}
		d.place(named, pos, lens)
	}
	return d, nil
}

func lposAll(ctx context.Context, p redis.Pipeliner, queues []string, ident string) (pos, lens []*redis.IntCmd) {
	pos = make([]*redis.IntCmd, len(queues))
	lens = make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		pos[i] = p.LPos(ctx, q, ident, redis.LPosArgs{})
		lens[i] = p.LLen(ctx, q)
	}
	return pos, lens
}

// place records where ident was found; the right end of a queue is its
// head, so an LPOS index i in a list of n is position n-i.
func (d *JobDetail) place(queues []string, pos, lens []*redis.IntCmd) bool {
	for i, q := range queues {
		idx, err := pos[i].Result()
		if err != nil {
			continue
		}
		if q == KeyWorking {
			d.Working = true
			continue
		}
		d.Queue, d.QueueLen = q, lens[i].Val()
		d.Position = d.QueueLen - idx
		return true
	}
	return false
}

// ActiveJob is one queued or running job as /jobs lists it.
type ActiveJob struct {
	Ident string
	// Queue is the pending queue holding it, "working" when running.
	Queue string
	// Position in its queue, 1 = next to run (0 for running jobs).
	Position int64
	// Job holds the fields of activeFields only (those present): its
	// State() tells queued, running and finished apart, not aborted or
	// failed.
	Job *record.Job
}

// State is running for a job in `working`, queued for one in a pending
// queue: where ActiveJobs found it, whatever its record says.
func (a ActiveJob) State() record.State {
	if a.Queue == KeyWorking {
		return record.StateRunning
	}
	return record.StateQueued
}

// activeFields are the job fields ActiveJobs reads.
var activeFields = []string{"url", "started_by", "started_in", "queued_at", "started_at", "pipeline_id", "fetch_depth", "note", "finished_at"}

// ActiveJobs lists every queued job (queues in the order a pipeline checks
// them: named queues, pending-large, pending, pending-ao; next first) and
// every running job (`working`), with a few fields each. Jobs without a
// record, or whose hash is a ghost (Job.Ghost), are left out.
// Round trips: the queue index (one read), one pipeline of LRANGEs, one
// pipeline of HMGET.
func (s *Store) ActiveJobs(ctx context.Context) ([]ActiveJob, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := append(append(named, FixedQueues...), KeyWorking)
	// A paused queue's jobs wait in its list aside (doc/protocol.md,
	// Paused queues): still queued, and listed in their queue, the
	// older ones aside nearer the head (resume appends them at the right
	// end).
	keys := slices.Clone(names)
	for _, q := range names[:len(names)-1] {
		keys = append(keys, KeyPausedQueue(q))
	}
	lists, err := s.readLists(ctx, keys, "list queues")
	if err != nil {
		return nil, err
	}
	var out []ActiveJob
	for i, q := range names {
		ids := lists[i]
		if q != KeyWorking {
			ids = append(slices.Clone(ids), lists[len(names)+i]...)
		}
		if q == KeyWorking {
			for _, id := range dedupe(ids) {
				out = append(out, ActiveJob{Ident: id, Queue: q})
			}
			continue
		}
		for k := len(ids) - 1; k >= 0; k-- {
			out = append(out, ActiveJob{Ident: ids[k], Queue: q, Position: int64(len(ids) - k)})
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(out))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, j := range out {
			cmds[i] = p.HMGet(ctx, KeyJob(j.Ident), activeFields...)
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read active jobs", err)
	}
	kept := out[:0]
	for i, j := range out {
		if j.Job = hmgetJob(j.Ident, activeFields, cmds[i].Val()); j.Job == nil || j.Job.Ghost() {
			continue
		}
		kept = append(kept, j)
	}
	return kept, nil
}

// hmgetJob decodes the reply of HMGET IDENT fields…: the record with
// those of fields it has, nil when it has none of them.
func hmgetJob(ident string, fields []string, vals []any) *record.Job {
	m := make(map[string]string, len(fields))
	for k, f := range fields {
		if k < len(vals) {
			if v, ok := vals[k].(string); ok {
				m[f] = v
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return record.DecodeJob(ident, m)
}

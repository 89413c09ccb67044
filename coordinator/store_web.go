package coordinator

// Read models for the HTTP API (package web) and the Redis-backed metrics.
// Every method documents its Redis round trips; none uses KEYS.

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FailureTTL is how long a failure record (and its index entry) is kept.
const FailureTTL = 7 * 24 * time.Hour

var (
	//go:embed scripts/index_finished.lua
	indexFinishedSrc    string
	indexFinishedScript = fenced(indexFinishedSrc)

	//go:embed scripts/record_failure.lua
	recordFailureSrc    string
	recordFailureScript = fenced(recordFailureSrc)
)

// ErrWrongType is returned when a key of ours holds a value of another type.
var ErrWrongType = errors.New("key holds the wrong kind of value")

// StatusCounts is what /status reports.
type StatusCounts struct {
	Pending, PendingAO, PendingLarge, Working int64
	Completed, Aborted, Failed                int64
	// Named maps every pending:NAME queue to its length.
	Named map[string]int64
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
		Named: make(map[string]int64, len(sum.NamedQueues)),
	}
	for _, q := range sum.NamedQueues {
		c.Named[q.Name] = q.Len
	}
	return c, nil
}

// PendingQueues lists every non-empty pending queue with all its jobs,
// next to run first, queues sorted by name ignoring case (pending,
// pending-ao, pending-large, pending:NAME…), as upstream's /pending.
// Round trips: the queue index (one read), one pipeline of LRANGEs, one
// pipeline of HGET url.
func (s *Store) PendingQueues(ctx context.Context) ([]Queue, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := append(slices.Clone(FixedQueues), named...)
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	ranges := make([]*redis.StringSliceCmd, len(names))
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range names {
			ranges[i] = p.LRange(ctx, q, 0, -1)
		}
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return nil, wrap("list pending queues", err)
		}
	}
	var out []Queue
	var idents []string
	for i, q := range names {
		ids := ranges[i].Val()
		if len(ids) == 0 {
			continue
		}
		jobs := make([]QueuedJob, 0, len(ids))
		for k := len(ids) - 1; k >= 0; k-- {
			jobs = append(jobs, QueuedJob{Ident: ids[k]})
			idents = append(idents, ids[k])
		}
		out = append(out, Queue{Name: q, Len: int64(len(ids)), Jobs: jobs})
	}
	if len(idents) == 0 {
		return out, nil
	}
	urls, err := s.hgetMany(ctx, idents, "url")
	if err != nil {
		return nil, err
	}
	for qi := range out {
		for ji := range out[qi].Jobs {
			out[qi].Jobs[ji].URL = urls[out[qi].Jobs[ji].Ident]
		}
	}
	return out, nil
}

// hgetMany reads one field of many job records in one pipeline.
func (s *Store) hgetMany(ctx context.Context, idents []string, field string) (map[string]string, error) {
	cmds := make([]*redis.StringCmd, len(idents))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			cmds[i] = p.HGet(ctx, KeyJob(id), field)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read job "+field, err)
	}
	out := make(map[string]string, len(idents))
	for i, id := range idents {
		out[id] = cmds[i].Val()
	}
	return out, nil
}

// Pipelines returns every pipeline record listed in `pipelines`, sorted by
// key; members whose record is gone are left out.
// Round trips: SMEMBERS, then one pipeline of HGETALL.
func (s *Store) Pipelines(ctx context.Context) ([]*Pipeline, error) {
	keys, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !s.wrongTypeSkipped(KeyPipelines, err) {
		return nil, wrap("list pipelines", err)
	}
	slices.Sort(keys)
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGetAll(ctx, k)
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read pipelines", err)
	}
	out := make([]*Pipeline, 0, len(keys))
	for i, k := range keys {
		if m := cmds[i].Val(); len(m) > 0 {
			out = append(out, &Pipeline{Key: k, Fields: m})
		}
	}
	return out, nil
}

// JobLog is a job with some of its log entries (raw, as stored).
type JobLog struct {
	Job     *Job
	Entries []string
	// Scores are the entries' scores in the job's log, one per entry: a
	// client that reads these and the live stream shows each entry once.
	Scores []float64
}

// RecentLogs returns, for each job in `working` that still has a record,
// its last count log entries, oldest first.
// Round trips: LRANGE working, then one pipeline of HGETALL + ZRANGE.
func (s *Store) RecentLogs(ctx context.Context, count int) ([]JobLog, error) {
	idents, err := s.rdb.LRange(ctx, KeyWorking, 0, -1).Result()
	if err != nil && !s.wrongTypeSkipped(KeyWorking, err) {
		return nil, wrap("list working", err)
	}
	idents = dedupe(idents)
	jobs := make([]*redis.MapStringStringCmd, len(idents))
	logs := make([]*redis.ZSliceCmd, len(idents))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			jobs[i] = p.HGetAll(ctx, KeyJob(id))
			logs[i] = p.ZRangeWithScores(ctx, KeyLog(id), int64(-count), -1)
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read recent logs", err)
	}
	out := make([]JobLog, 0, len(idents))
	for i, id := range idents {
		m := jobs[i].Val()
		if len(m) == 0 {
			continue
		}
		// The log key the pipeline writes is the one the record names
		// (always IDENT_log for jobs this node registered).
		zs := logs[i].Val()
		jl := JobLog{Job: &Job{Ident: id, Fields: m}, Entries: make([]string, len(zs)), Scores: make([]float64, len(zs))}
		for k, z := range zs {
			jl.Entries[k], _ = z.Member.(string)
			jl.Scores[k] = z.Score
		}
		out = append(out, jl)
	}
	return out, nil
}

func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// IndexFinished adds ident to the index of finished jobs if its record has
// finished_at (the finish notifier calls it for every finish notice), and
// prunes index entries older than FailureTTL. One round trip.
func (s *Store) IndexFinished(ctx context.Context, ident string) error {
	prune := s.Now().Add(-FailureTTL).Unix()
	n, err := indexFinishedScript.Run(ctx, s.rdb, []string{KeyJob(ident), KeyFinishedIndex}, ident, prune).Int()
	if err != nil {
		return wrap("index finished job "+ident, err)
	}
	if n < 0 {
		return fmt.Errorf("index finished job %s: %w", ident, ErrWrongType)
	}
	return nil
}

// Failure is a failure record, archivebot:failed:IDENT (hash, kept
// FailureTTL): what operators need after a job failed, since its job
// record expires 5 seconds after the fail. Fields (all strings):
//
//	url         the job's URL
//	reason      why it failed ("no heartbeat for 2h0m", "failed by NICK")
//	failed_by   who or what failed it: "reaper", or the operator's nick
//	failed_at   UNIX seconds (may have a fraction)
//	queue       where it was: pending, pending-ao, pending-large,
//	            pending:NAME, or working (it was running)
//	job         JSON object: the job record as it was at the fail (every
//	            field a string, as in Redis): fetch_depth, started_by,
//	            started_in, queued_at, settings… — what a requeue needs
//
// Unknown fields are kept in Extra.
type Failure struct {
	Ident    string
	URL      string
	Reason   string
	FailedBy string
	FailedAt float64
	Queue    string
	// Job is the job record at the time of the fail (nil when absent).
	Job   map[string]string
	Extra map[string]string
}

// RecordFailure writes f as archivebot:failed:IDENT with a TTL of
// FailureTTL and adds it to the index of finished jobs, in one step (one
// round trip). FailedAt zero means now.
func (s *Store) RecordFailure(ctx context.Context, f Failure) error {
	if f.FailedAt == 0 {
		now := s.Now()
		f.FailedAt = float64(now.UnixMilli()) / 1000
	}
	at := strconv.FormatFloat(f.FailedAt, 'f', -1, 64)
	args := []any{f.Ident, at, int64(FailureTTL / time.Second),
		"url", f.URL, "reason", f.Reason, "failed_by", f.FailedBy, "failed_at", at, "queue", f.Queue}
	if f.Job != nil {
		b, err := json.Marshal(f.Job)
		if err != nil {
			return err
		}
		args = append(args, "job", string(b))
	}
	for k, v := range f.Extra {
		args = append(args, k, v)
	}
	n, err := recordFailureScript.Run(ctx, s.rdb, []string{KeyFailed(f.Ident), KeyFinishedIndex}, args...).Int()
	if err != nil {
		return wrap("record failure of "+f.Ident, err)
	}
	if n < 0 {
		return fmt.Errorf("record failure of %s: %w", f.Ident, ErrWrongType)
	}
	return nil
}

// parseFailure turns a failure record hash into a Failure (nil for none).
func parseFailure(ident string, m map[string]string) *Failure {
	if len(m) == 0 {
		return nil
	}
	f := &Failure{Ident: ident, URL: m["url"], Reason: m["reason"], FailedBy: m["failed_by"], Queue: m["queue"]}
	f.FailedAt, _ = strconv.ParseFloat(m["failed_at"], 64)
	if raw := m["job"]; raw != "" {
		var job map[string]any
		if json.Unmarshal([]byte(raw), &job) == nil {
			f.Job = make(map[string]string, len(job))
			for k, v := range job {
				switch v := v.(type) {
				case string:
					f.Job[k] = v
				case nil:
				default:
					b, _ := json.Marshal(v)
					f.Job[k] = string(b)
				}
			}
		}
	}
	for k, v := range m {
		switch k {
		case "url", "reason", "failed_by", "failed_at", "queue", "job":
		default:
			if f.Extra == nil {
				f.Extra = map[string]string{}
			}
			f.Extra[k] = v
		}
	}
	return f
}

// GetFailure reads ident's failure record; nil, nil when there is none.
// One round trip.
func (s *Store) GetFailure(ctx context.Context, ident string) (*Failure, error) {
	m, err := s.rdb.HGetAll(ctx, KeyFailed(ident)).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("get failure "+ident, err)
	}
	return parseFailure(ident, m), nil
}

// FinishedJob is one entry of /finished: a job record with finished_at
// (finished or aborted), or a failure record, or both.
type FinishedJob struct {
	Ident   string
	Job     *Job     // nil when the record has expired
	Failure *Failure // nil when the job did not fail
}

// FinishedJobs lists the jobs of the finished index that still have a job
// record with finished_at or a failure record, oldest first. It never
// scans the keyspace: its cost grows with the jobs finished in the last
// FailureTTL, not with the number of keys.
// Round trips: ZRANGE of the index, one pipeline of HGETALL job + HGETALL
// failure record per entry, and, only when some entries have expired, one
// ZREM.
func (s *Store) FinishedJobs(ctx context.Context) ([]FinishedJob, error) {
	idents, err := s.rdb.ZRange(ctx, KeyFinishedIndex, 0, -1).Result()
	if err != nil && !s.wrongTypeSkipped(KeyFinishedIndex, err) {
		return nil, wrap("read finished index", err)
	}
	jobs := make([]*redis.MapStringStringCmd, len(idents))
	fails := make([]*redis.MapStringStringCmd, len(idents))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			jobs[i] = p.HGetAll(ctx, KeyJob(id))
			fails[i] = p.HGetAll(ctx, KeyFailed(id))
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read finished jobs", err)
	}
	var out []FinishedJob
	var stale []any
	for i, id := range idents {
		fj := FinishedJob{Ident: id, Failure: parseFailure(id, fails[i].Val())}
		if m := jobs[i].Val(); m["finished_at"] != "" || (len(m) > 0 && m["failed"] == "true") {
			fj.Job = &Job{Ident: id, Fields: m}
		}
		if fj.Job == nil && fj.Failure == nil {
			stale = append(stale, id)
			continue
		}
		out = append(out, fj)
	}
	if len(stale) > 0 {
		// Best effort: a failure here only delays the cleanup.
		_ = s.rdb.ZRem(ctx, KeyFinishedIndex, stale...).Err()
	}
	return out, nil
}

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

// Tweet is an entry of tweets:done.
type Tweet struct {
	Text string
	// Score is the UNIX time it was posted, as stored.
	Score float64
}

// RecentTweets returns the newest n entries of tweets:done, newest first.
// One round trip (ZRANGE -n -1 WITHSCORES, as upstream's feed).
func (s *Store) RecentTweets(ctx context.Context, n int) ([]Tweet, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, KeyTweetsDone, int64(-n), -1).Result()
	if err != nil && !s.wrongTypeSkipped(KeyTweetsDone, err) {
		return nil, wrap("read tweets", err)
	}
	out := make([]Tweet, 0, len(zs))
	for i := len(zs) - 1; i >= 0; i-- {
		text, _ := zs[i].Member.(string)
		out = append(out, Tweet{Text: text, Score: zs[i].Score})
	}
	return out, nil
}

// JobDetail is everything /jobs/IDENT shows about one job.
type JobDetail struct {
	Ident string
	// Job is the record; nil when only a failure record is left.
	Job     *Job
	Failure *Failure
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

// JobDetail reads one job. It returns nil, nil when there is neither a job
// record nor a failure record.
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
	d := &JobDetail{Ident: ident, Failure: parseFailure(ident, fail.Val()), TTL: ttl.Val(), History: parseHistory(hist.Val())}
	if m := job.Val(); len(m) > 0 {
		d.Job = &Job{Ident: ident, Fields: m}
	}
	if d.Job == nil && d.Failure == nil {
		return nil, nil
	}
	d.Ignores = ign.Val()
	slices.Sort(d.Ignores)
	found := d.place(queues, pos, lens)
	if d.Job != nil && !found && d.Job.State() == StateQueued {
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
	// Fields holds url, started_by, started_in, queued_at, started_at,
	// pipeline_id, fetch_depth, note (those present).
	Fields map[string]string
}

// activeFields are the job fields ActiveJobs reads.
var activeFields = []string{"url", "started_by", "started_in", "queued_at", "started_at", "pipeline_id", "fetch_depth", "note", "finished_at"}

// ActiveJobs lists every queued job (queues in the order a pipeline checks
// them: named queues, pending-large, pending, pending-ao; next first) and
// every running job (`working`), with a few fields each. Jobs without a
// record are left out.
// Round trips: the queue index (one read), one pipeline of LRANGEs, one
// pipeline of HMGET.
func (s *Store) ActiveJobs(ctx context.Context) ([]ActiveJob, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := append(append(named, FixedQueues...), KeyWorking)
	ranges := make([]*redis.StringSliceCmd, len(names))
	reads, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range names {
			ranges[i] = p.LRange(ctx, q, 0, -1)
		}
		return nil
	})
	if err != nil {
		if err = s.readErr(reads); err != nil {
			return nil, wrap("list queues", err)
		}
	}
	var out []ActiveJob
	for i, q := range names {
		ids := ranges[i].Val()
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
		vals := cmds[i].Val()
		j.Fields = make(map[string]string, len(activeFields))
		for k, f := range activeFields {
			if k < len(vals) {
				if v, ok := vals[k].(string); ok {
					j.Fields[f] = v
				}
			}
		}
		if len(j.Fields) == 0 {
			continue
		}
		kept = append(kept, j)
	}
	return kept, nil
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

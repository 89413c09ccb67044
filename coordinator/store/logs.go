package store

// The job logs (IDENT_log): what the analyzer reads and commits, and the
// recent entries the web serves.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

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

// LogEntry is one entry of a job's log: the JSON document and its score.
type LogEntry struct {
	Doc   string
	Score float64
}

// LogBookmark reads the job's last_analyzed_log_entry ("" when none) in
// one round trip, and whether the job record exists; a *NotAJobError when
// the key holds something else.
func (s *Store) LogBookmark(ctx context.Context, ident string) (string, bool, error) {
	var exists *redis.IntCmd
	var bm *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, KeyJob(ident))
		bm = p.HGet(ctx, KeyJob(ident), "last_analyzed_log_entry")
		return nil
	})
	if isWrongType(bm.Err()) {
		return "", false, &NotAJobError{Key: KeyJob(ident)}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", false, wrap("read bookmark of "+ident, err)
	}
	return bm.Val(), exists.Val() == 1, nil
}

// ReadLog returns up to limit entries of the job's log scored after
// bookmark ("" = from the start), in score order.
func (s *Store) ReadLog(ctx context.Context, ident, bookmark string, limit int) ([]LogEntry, error) {
	if bookmark == "" {
		bookmark = "0"
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, KeyLog(ident), &redis.ZRangeBy{
		Min: "(" + bookmark, Max: "+inf", Count: int64(limit)}).Result()
	if err != nil {
		return nil, wrap("read log of "+ident, err)
	}
	out := make([]LogEntry, len(zs))
	for i, z := range zs {
		doc, _ := z.Member.(string)
		out[i] = LogEntry{Doc: doc, Score: z.Score}
	}
	return out, nil
}

// LogCounts are the response counters the analyzer keeps on a job.
type LogCounts struct {
	R1xx, R2xx, R3xx, R4xx, R5xx, Runk int64
	// Errors counts download entries with is_error.
	Errors int64
}

// Add adds o to c.
func (c *LogCounts) Add(o LogCounts) {
	c.R1xx += o.R1xx
	c.R2xx += o.R2xx
	c.R3xx += o.R3xx
	c.R4xx += o.R4xx
	c.R5xx += o.R5xx
	c.Runk += o.Runk
	c.Errors += o.Errors
}

// LogCommit is what CommitLogCounts did.
type LogCommit int

// CommitLogCounts outcomes.
const (
	// LogCommitted: the counts were added and the bookmark moved.
	LogCommitted LogCommit = iota + 1
	// LogBookmarkMoved: someone moved the bookmark since it was read;
	// nothing was written.
	LogBookmarkMoved
	// LogJobGone: the job record does not exist; nothing was written.
	LogJobGone
)

// LogTrim is what CommitLogCounts trimmed.
type LogTrim struct {
	// Trimmed entries were removed, up to score To.
	Trimmed, To int64
	// Skipped entries were trimmed before the stream broadcast them,
	// because it lagged more than the bound.
	Skipped int64
}

// CommitLogCounts adds counts to the job and moves its bookmark from from
// to to, only if the bookmark is still from (analyze_commit.lua), then
// trims consumed entries beyond trimAfter. With respectBroadcast it trims
// only up to what the live stream has broadcast — unless the stream lags
// more than maxLag entries (0: no bound), then it keeps only the newest
// maxLag unbroadcast entries and reports the rest as skipped.
func (s *Store) CommitLogCounts(ctx context.Context, ident, from, to string, c LogCounts, trimAfter int, respectBroadcast bool, maxLag int) (LogCommit, LogTrim, error) {
	respect := "0"
	if respectBroadcast {
		respect = "1"
	}
	argv := []any{from, to, c.R1xx, c.R2xx, c.R3xx, c.R4xx, c.R5xx, c.Runk, c.Errors, trimAfter, respect, max(maxLag, 0)}
	res, err := analyzeCommitScript.Run(ctx, s.rdb, []string{KeyJob(ident), KeyLog(ident)}, argv...).Int64Slice()
	if err != nil {
		return 0, LogTrim{}, wrap("count log of "+ident, err)
	}
	if len(res) != 4 {
		return 0, LogTrim{}, fmt.Errorf("count log of %s: unexpected reply %v", ident, res)
	}
	switch res[0] {
	case -1:
		return LogJobGone, LogTrim{}, nil
	case 0:
		return LogBookmarkMoved, LogTrim{}, nil
	}
	return LogCommitted, LogTrim{Trimmed: res[1], To: res[2], Skipped: res[3]}, nil
}

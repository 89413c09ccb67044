package store

// The job logs (IDENT_log): what the analyzer reads and commits, and the
// recent entries the web serves.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/record"
)

// JobLog is a job with some of its log entries (decoded once, see
// LogEntry; oversized ones are their size alone).
type JobLog struct {
	Job     *record.Job
	Entries []record.LogEntry
}

// RecentLogs returns, for each job in `working` that still has a record
// (not a ghost, Job.Ghost),
// its last count log entries, oldest first (read_log.lua: an entry over
// MaxLogEntryBytes is read as its size alone, and each job's entries
// total at most MaxLogReadBytes).
// Round trips: LRANGE working, then one pipeline of HGETALL + the script
// (and one more when Redis had not loaded the script yet).
func (s *Store) RecentLogs(ctx context.Context, count int) ([]JobLog, error) {
	idents, err := s.rdb.LRange(ctx, KeyWorking, 0, -1).Result()
	if err != nil && !s.wrongTypeSkipped(KeyWorking, err) {
		return nil, wrap("list working", err)
	}
	idents = dedupe(idents)
	jobs := make([]*redis.MapStringStringCmd, len(idents))
	logs := make([]*redis.Cmd, len(idents))
	read := func(p redis.Pipeliner) error {
		for i, id := range idents {
			jobs[i] = p.HGetAll(ctx, KeyJob(id))
			logs[i] = readLogScript.EvalSha(ctx, p, []string{KeyLog(id)}, "tail", "", count,
				record.MaxLogEntryBytes, MaxLogReadBytes)
		}
		return nil
	}
	err = s.pipelinedScript(ctx, readLogScript, read)
	if err != nil && !isWrongType(err) && !errors.Is(err, redis.Nil) {
		return nil, wrap("read recent logs", err)
	}
	out := make([]JobLog, 0, len(idents))
	for i, id := range idents {
		m := jobs[i].Val()
		if len(m) == 0 || record.DecodeJob(id, m).Ghost() {
			continue
		}
		// The log key the pipeline writes is the one the record names
		// (always IDENT_log for jobs this node registered).
		entries, _ := parseLogRead(logs[i].Val())
		out = append(out, JobLog{Job: record.DecodeJob(id, m), Entries: entries})
	}
	return out, nil
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
func (s *Store) ReadLog(ctx context.Context, ident, bookmark string, limit int) ([]record.LogEntry, error) {
	b, err := s.ReadLogBatch(ctx, ident, bookmark, limit)
	if err != nil {
		return nil, err
	}
	return b.Entries(), nil
}

// ReadLogBatch is ReadLog without the decoding: the entries scored above
// bookmark, at most limit of them, as read. Its LastScore, known before
// the entries are decoded, is the bookmark of the next read, so a reader
// can fetch the next batch while this one is decoded (the analyzer does).
func (s *Store) ReadLogBatch(ctx context.Context, ident, bookmark string, limit int) (LogBatch, error) {
	if bookmark == "" {
		bookmark = "0"
	}
	res, err := s.readLog(ctx, ident, "after", bookmark, limit)
	if err != nil {
		return LogBatch{}, err
	}
	return newLogBatch(res)
}

// readLog runs read_log.lua on ident's log: mode "after" (entries scored
// above bookmark) or "tail" (the last limit entries). An entry larger than
// MaxLogEntryBytes comes back as its size alone, and a read returns at
// most MaxLogReadBytes of entries.
func (s *Store) readLog(ctx context.Context, ident, mode, bookmark string, limit int) (any, error) {
	res, err := readLogScript.Run(ctx, s.rdb, []string{KeyLog(ident)}, mode, bookmark, limit,
		record.MaxLogEntryBytes, MaxLogReadBytes).Result()
	return res, wrap("read log of "+ident, err)
}

// wrongType is a WRONGTYPE reply a script told in its own way.
type wrongType string

func (e wrongType) Error() string { return string(e) }
func (wrongType) RedisError()     {}

// LogBatch is one read of a job's log (read_log.lua's reply), decoded by
// Entries.
type LogBatch struct {
	raw []any // member, score, member, score, …
}

// newLogBatch takes read_log.lua's reply: a log key that is not a sorted
// set reads as a WRONGTYPE error.
func newLogBatch(res any) (LogBatch, error) {
	arr, ok := res.([]any)
	if !ok {
		return LogBatch{}, wrongType("WRONGTYPE the log is not a sorted set")
	}
	return LogBatch{raw: arr}, nil
}

// Len is the number of entries read.
func (b LogBatch) Len() int { return len(b.raw) / 2 }

// LastScore is the score of the last entry read (0 when none).
func (b LogBatch) LastScore() float64 {
	if b.Len() == 0 {
		return 0
	}
	return rawScore(b.raw[2*b.Len()-1])
}

func rawScore(v any) float64 {
	switch v := v.(type) {
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	case int64:
		return float64(v)
	}
	return 0
}

// Entries decodes the entries read; one that came back as its size alone
// is EntryOversized (counted in archivebot_log_entries_oversized_total).
func (b LogBatch) Entries() []record.LogEntry {
	out := make([]record.LogEntry, 0, b.Len())
	for i := 0; i+1 < len(b.raw); i += 2 {
		score := rawScore(b.raw[i+1])
		switch m := b.raw[i].(type) {
		case string:
			out = append(out, record.NewLogEntry(m, score))
		case int64:
			metrics.LogEntryOversized()
			out = append(out, record.OversizedLogEntry(int(m), score))
		}
	}
	return out
}

func parseLogRead(res any) ([]record.LogEntry, error) {
	b, err := newLogBatch(res)
	if err != nil {
		return nil, err
	}
	return b.Entries(), nil
}

// MaxLogReadBytes bounds the entries one read of a job's log returns (at
// least one entry is always returned, so the bookmark moves).
const MaxLogReadBytes = 4 << 20

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
func (s *Store) CommitLogCounts(ctx context.Context, ident, from, to string, c record.LogCounts, trimAfter int, respectBroadcast bool, maxLag int) (LogCommit, LogTrim, error) {
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

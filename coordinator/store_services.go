package coordinator

// Store operations of the background services (reaper, finish notifier,
// pipeline notifier, analyzer, updates listener). The services call only
// these; every write is one Lua script (see doc/protocol.md, Scripts).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// WorkingJobs lists the idents in `working` (jobs a pipeline has taken).
func (s *Store) WorkingJobs(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.LRange(ctx, KeyWorking, 0, -1).Result()
	if s.wrongTypeSkipped(KeyWorking, err) {
		return nil, nil
	}
	return ids, wrap("list working", err)
}

// DeadJob is a working job whose death timer reached the threshold.
type DeadJob struct {
	Ident, URL, StartedBy, StartedIn string
	PipelineID, PipelineNick         string
	// Checks is the job's death_timer: checks without heartbeat progress.
	Checks int64
	// Reported is true once its death was announced.
	Reported bool
}

// AdvanceDeathTimers is one death-timer check of every job in `working`,
// in one round trip (reap.lua). It returns the jobs whose timer reached
// threshold and whose death was not announced yet; with includeReported
// also those already announced.
func (s *Store) AdvanceDeathTimers(ctx context.Context, threshold int, includeReported bool) ([]DeadJob, error) {
	include := "0"
	if includeReported {
		include = "1"
	}
	res, err := reapScript.Run(ctx, s.rdb, []string{KeyWorking, KeyReaperReported}, threshold, include).Slice()
	if err != nil {
		return nil, wrap("reaper cycle", err)
	}
	dead := make([]DeadJob, 0, len(res))
	for _, row := range res {
		f, ok := row.([]any)
		if !ok || len(f) < 8 {
			return nil, fmt.Errorf("reaper cycle: unexpected reply %v", row)
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		checks, _ := f[6].(int64)
		reported, _ := f[7].(int64)
		dead = append(dead, DeadJob{
			Ident: str(0), URL: str(1), StartedBy: str(2), StartedIn: str(3),
			PipelineID: str(4), PipelineNick: str(5),
			Checks: checks, Reported: reported == 1,
		})
	}
	return dead, nil
}

// MarkDeathReported remembers that the death of ident was announced.
func (s *Store) MarkDeathReported(ctx context.Context, ident string) error {
	err := reapReportedScript.Run(ctx, s.rdb, []string{KeyReaperReported}, ident).Err()
	return wrap("remember dead job "+ident, err)
}

// FinishNoticesInDelivery returns up to limit notices taken earlier whose
// delivery was not acknowledged (the bot stopped or IRC was down), oldest
// first.
func (s *Store) FinishNoticesInDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := s.rdb.LRange(ctx, KeyFinishProcessing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+KeyFinishProcessing, err)
}

// TakeFinishNotice moves the oldest notice of finish_notifications into
// delivery and returns it; ok is false when there is none.
func (s *Store) TakeFinishNotice(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = finishTakeScript.Run(ctx, s.rdb, []string{KeyFinishNotifications, KeyFinishProcessing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take finish notification", err)
	}
	return doc, true, nil
}

// AckFinishNotice ends the delivery of doc (its line was sent, or it can
// never be).
func (s *Store) AckFinishNotice(ctx context.Context, doc string) error {
	err := finishAckScript.Run(ctx, s.rdb, []string{KeyFinishProcessing}, doc).Err()
	return wrap("acknowledge finish notification", err)
}

// PipelineInfo is what the pipeline notifier compares of a pipeline record.
type PipelineInfo struct {
	Key, ID, Nickname, Version string
	// TS is the pipeline's last report (its `ts`); zero when unknown.
	TS time.Time
	// BadTS holds the `ts` field as written when it is not a time (not a
	// number, NaN, infinite, negative, or beyond year 9999); TS is zero
	// then.
	BadTS string
}

// PipelineSnapshot reads every pipeline listed in `pipelines` in two round
// trips (SMEMBERS, then one pipelined HMGET per record). Members whose
// record is gone are left out; members whose key is not a hash are left
// out and returned in bad, for the caller to log.
func (s *Store) PipelineSnapshot(ctx context.Context) (pipelines map[string]PipelineInfo, bad []string, err error) {
	keys, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !s.wrongTypeSkipped(KeyPipelines, err) {
		return nil, nil, wrap("list pipelines", err)
	}
	out := make(map[string]PipelineInfo, len(keys))
	if len(keys) == 0 {
		return out, nil, nil
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, "id", "nickname", "version", "ts")
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read pipelines", err)
	}
	for i, k := range keys {
		if isWrongType(cmds[i].Err()) {
			bad = append(bad, k)
			continue
		}
		v := cmds[i].Val()
		str := func(j int) string {
			if j < len(v) {
				s, _ := v[j].(string)
				return s
			}
			return ""
		}
		if str(0) == "" && str(1) == "" && str(2) == "" && str(3) == "" {
			continue // listed, but the record is gone
		}
		info := PipelineInfo{Key: k, ID: str(0), Nickname: str(1), Version: str(2)}
		if info.ID == "" {
			info.ID = k
		}
		info.TS, info.BadTS = parseTS(str(3))
		out[k] = info
	}
	return out, bad, nil
}

// parseTS reads a pipeline's ts (UNIX seconds, maybe with a fraction).
// Empty or zero is "unknown"; anything that is not a time is returned as
// bad.
func parseTS(raw string) (time.Time, string) {
	if raw == "" {
		return time.Time{}, ""
	}
	ts, err := strconv.ParseFloat(raw, 64)
	switch {
	case err != nil, ts != ts, ts < 0, ts > maxTS:
		return time.Time{}, raw
	case ts == 0:
		return time.Time{}, ""
	}
	sec := int64(ts)
	return time.Unix(sec, int64((ts-float64(sec))*1e9)), ""
}

// maxTS is 9999-12-31 as UNIX seconds: later values are not times, and
// would overflow a time.Duration.
const maxTS = 253402300799

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

// ListenUpdates subscribes to `updates` and calls onMessage with the ident
// of every message until the connection fails or ctx ends; onSubscribed is
// called once the server confirmed the subscription. It reports whether
// the subscription was established.
func (s *Store) ListenUpdates(ctx context.Context, onSubscribed func(), onMessage func(ident string)) (bool, error) {
	return s.listen(ctx, ChannelUpdates, onSubscribed, onMessage)
}

// listen subscribes to channel and delivers its messages (ListenUpdates).
func (s *Store) listen(ctx context.Context, channel string, onSubscribed func(), onMessage func(string)) (bool, error) {
	ps := s.rdb.Subscribe(ctx)
	defer ps.Close()
	// A blocked read does not watch ctx: closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	if err := ps.Subscribe(ctx, channel); err != nil {
		return false, err
	}
	// Wait for the server's confirmation so callers know we are listening.
	if _, err := ps.Receive(ctx); err != nil {
		return false, err
	}
	onSubscribed()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return true, err
		}
		if m, ok := msg.(*redis.Message); ok {
			onMessage(m.Payload)
		}
		// Anything else is a pong or a subscription confirmation.
	}
}

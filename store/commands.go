package store

// Job commands that change a job: settings, abort, expire, and the
// operator's requeue (doc/protocol.md, Job settings and Operator commands).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Errors of job-control operations.
var (
	ErrNoJob       = errors.New("no such job")
	ErrJobFinished = errors.New("job has already finished")
	ErrNoExpiry    = errors.New("job has no expiry timer")
	// ErrJobStarted refuses a change that only a queued job can take.
	ErrJobStarted = errors.New("job has already started")
)

// Change is one atomic settings change of a job (doc/protocol.md, Job settings).
type Change struct {
	// Bump is how much settings_age rises; 0 changes nothing a crawler
	// re-reads (a note) and publishes nothing.
	Bump int
	// AllowFinished permits the change on a finished job (notes).
	AllowFinished bool
	Set           map[string]string
	Del           []string
	AddPatterns   []string
	DelPatterns   []string
	// QueuedOnly refuses the change (ErrJobStarted) once a pipeline has
	// taken the job: settings it reads only when it takes the job.
	QueuedOnly bool
	// By is who makes the change (a nick), for the job's history.
	By string
	// Event is the history event; "" derives it from the change
	// (ignore_added, ignore_removed or settings).
	Event string
}

// historyEvent is the history event and detail of the change.
func (c Change) historyEvent() (string, map[string]any) {
	detail := map[string]any{}
	if len(c.Set) > 0 {
		detail["set"] = c.Set
	}
	if len(c.Del) > 0 {
		detail["del"] = c.Del
	}
	if len(c.AddPatterns) > 0 {
		detail["patterns"] = c.AddPatterns
	}
	if len(c.DelPatterns) > 0 {
		detail["patterns"] = c.DelPatterns
	}
	switch {
	case c.Event != "":
		return c.Event, detail
	case len(c.AddPatterns) > 0:
		return EventIgnoreAdded, detail
	case len(c.DelPatterns) > 0:
		return EventIgnoreRemoved, detail
	}
	return EventSettings, detail
}

// ChangeSettings applies c to the job in one atomic step: the writes, the
// settings_age increment and the PUBLISH of the new age on
// archivebot:job:IDENT. It returns the new age, ErrNoJob or ErrJobFinished.
func (s *Store) ChangeSettings(ctx context.Context, ident string, c Change) (int64, error) {
	finished := "1"
	switch {
	case c.QueuedOnly:
		finished = "2"
	case c.AllowFinished:
		finished = "0"
	}
	event, detail := c.historyEvent()
	argv := []any{c.Bump, finished, s.entry(ident, event, c.By, detail), 2 * len(c.Set)}
	for _, k := range slices.Sorted(maps.Keys(c.Set)) {
		argv = append(argv, k, c.Set[k])
	}
	argv = append(argv, len(c.Del))
	for _, f := range c.Del {
		argv = append(argv, f)
	}
	argv = append(argv, len(c.AddPatterns))
	for _, p := range c.AddPatterns {
		argv = append(argv, p)
	}
	argv = append(argv, len(c.DelPatterns))
	for _, p := range c.DelPatterns {
		argv = append(argv, p)
	}
	keys := []string{KeyJob(ident), KeyIgnores(ident), ChannelJob(ident), KeyHistory(ident)}
	res, err := s.runWrite(ctx, "change settings of "+ident, settingsScript, keys, argv...).Int64Slice()
	if err != nil {
		return 0, err
	}
	switch res[0] {
	case 0:
		return 0, ErrNoJob
	case -1:
		return 0, ErrJobFinished
	case -2:
		return 0, &NotAJobError{Key: KeyJob(ident)}
	case -3:
		return 0, ErrJobStarted
	}
	return res[1], nil
}

// AbortResult says what an abort did.
type AbortResult int

// Abort outcomes.
const (
	// AbortRequested: the job is running; its pipeline will stop it.
	AbortRequested AbortResult = iota + 1
	// AbortedQueued: the job was still queued and is now finished as
	// aborted, with its finish notification written.
	AbortedQueued
)

// abortExpiry is how long an aborted job's keys live (as a pipeline does).
const abortExpiry = 5

// Abort aborts a job (abort.lua) and returns what it did and the job's URL.
// The named pending:* queues are read from the queue index just before
// the atomic step: a job is queued exactly once, so a queue created in
// between cannot hold it.
func (s *Store) Abort(ctx context.Context, ident string) (AbortResult, string, error) {
	return s.AbortBy(ctx, ident, "node")
}

// AbortBy is Abort recording by (a nick) in the job's history.
func (s *Store) AbortBy(ctx context.Context, ident, by string) (AbortResult, string, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return 0, "", err
	}
	keys := []string{
		KeyJob(ident), KeyLog(ident), KeyIgnores(ident), ChannelJob(ident),
		KeyJobsAborted, KeyFinishNotifications, ChannelUpdates, KeyHistory(ident), KeyOrigin(ident),
	}
	keys = append(keys, withPausedLists(FixedQueues, named)...)
	now := float64(s.Now().UnixMicro()) / 1e6
	res, err := s.runWrite(ctx, "abort "+ident, abortScript, keys, strconv.FormatFloat(now, 'f', 6, 64), abortExpiry,
		s.entry(ident, EventAborted, by, map[string]any{"queued": true}),
		s.entry(ident, EventAborted, by, map[string]any{"requested": true}),
		secs(HistoryEndedTTL)).Slice()
	if err != nil {
		return 0, "", err
	}
	code, _ := res[0].(int64)
	url, _ := res[1].(string)
	switch code {
	case 0:
		return 0, "", ErrNoJob
	case -1:
		return 0, url, ErrJobFinished
	case 1:
		return AbortRequested, url, nil
	case 2:
		return AbortedQueued, url, nil
	case -3:
		return 0, "", &NotAJobError{Key: KeyJob(ident)}
	}
	return 0, url, fmt.Errorf("abort %s: unexpected script result %d", ident, code)
}

// Expire removes a finished job's keys now, so its URL can be archived
// again before the 48 hours are up. Only records that already have an
// expiry timer (finished jobs) qualify: ErrNoExpiry otherwise.
func (s *Store) Expire(ctx context.Context, ident string) error {
	return s.ExpireBy(ctx, ident, "node")
}

// ExpireBy is Expire recording by (a nick) in the job's history, which is
// kept: it has its own TTL since the job ended.
func (s *Store) ExpireBy(ctx context.Context, ident, by string) error {
	keys := []string{KeyJob(ident), KeyLog(ident), KeyIgnores(ident), KeyHistory(ident), KeyOrigin(ident)}
	n, err := s.runWrite(ctx, "expire "+ident, expireScript, keys,
		s.entry(ident, EventExpired, by, nil), secs(HistoryFinishedTTL)).Int()
	if err != nil {
		return err
	}
	switch n {
	case 0:
		return ErrNoJob
	case -1:
		return ErrNoExpiry
	case -2:
		return &NotAJobError{Key: KeyJob(ident)}
	}
	return nil
}

// RequeueResetFields are the fields a requeue removes from the job record:
// everything a pipeline, the reaper, the analyzer or a fail wrote about the
// run that ended, so that the next run starts as a new job would.
// queued_at is set to now; every other field (URL, depth, who queued it
// where, delays, concurrency, user agent, settings_age, note…) is kept.
var RequeueResetFields = []string{
	"started_at", "pipeline_id", "heartbeat", "last_acknowledged_heartbeat", "death_timer",
	"bytes_downloaded", "items_downloaded", "items_queued", "log_score",
	"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count",
	"last_analyzed_log_entry", "last_broadcasted_log_entry", "last_trimmed_log_entry",
	"aborted", "abort_requested", "finished_at", "failed", "failed_reason", "ts",
}

// Requeue outcomes (nothing is written).
var (
	// ErrFailureWithoutJob: the failure record does not hold the job's
	// settings, so there is nothing to queue again.
	ErrFailureWithoutJob = errors.New("the failure record does not hold the job's settings")
	// ErrJobNotRequeueable: the job record exists and is queued, or is
	// neither running nor failed.
	ErrJobNotRequeueable = errors.New("the job is queued or not running; only failed or dead jobs can be requeued")
)

// PipelineAliveError refuses to requeue a job whose pipeline still
// reports: the job may still be running there.
type PipelineAliveError struct {
	Pipeline string
	TS       time.Time
}

func (e *PipelineAliveError) Error() string {
	return fmt.Sprintf("its pipeline %s still reports (last at %s); the job may still be running there",
		e.Pipeline, e.TS.UTC().Format(time.RFC3339))
}

// RequeueResult says what a requeue did.
type RequeueResult struct {
	Ident string `json:"ident"`
	Queue string `json:"queue"`
	// Ignores is the number of ignore patterns the job has again.
	Ignores int64 `json:"ignores"`
	// Source is "failed" (rebuilt from the failure record) or "dead" (a
	// running job taken back from working).
	Source string `json:"source"`
	// Job is the record as queued again.
	Job map[string]string `json:"job"`
}

// Requeue puts a failed job (from its failure record) or a dead running
// job back in the queue it came from, with its settings, resetting
// RequeueResetFields (requeue.lua, one atomic step). The queue is the
// origin record's, else the failure record's, else the one its depth
// implies. A job whose pipeline (its pipeline_id, running or failed)
// reported within silentAfter is refused with *PipelineAliveError unless
// force is set: that pipeline may still be crawling it, and its mark-done
// would finish the new run. Other refusals:
// ErrNoJob, ErrJobFinished, ErrJobNotRequeueable, ErrFailureWithoutJob,
// *NotAJobError.
func (s *Store) Requeue(ctx context.Context, ident string, force bool, silentAfter time.Duration) (*RequeueResult, error) {
	queue, pipeline := KeyPending, ""
	forceArg := "0"
	if force {
		forceArg = "1"
	}
	// The script says where the records send the job; the keys it writes
	// must be passed in, so a first guess may take a second call.
	for range 3 {
		keys := []string{KeyJob(ident), KeyIgnores(ident), KeyLog(ident), KeyFailed(ident), KeyOrigin(ident),
			queue, KeyWorking, KeyFinishedIndex, KeyReaperReported, pipeline, KeyQueues,
			KeyPaused, KeyPausedQueue(queue)}
		argv := []any{s.Now().Unix(), forceArg, int64(silentAfter / time.Second)}
		for _, f := range RequeueResetFields {
			argv = append(argv, f)
		}
		res, err := requeueScript.Run(ctx, s.rdb, keys, argv...).Slice()
		s.notifyQueued()
		if err != nil {
			return nil, wrap("requeue "+ident, err)
		}
		code, _ := res[0].(int64)
		switch code {
		case 1:
			r := &RequeueResult{Ident: ident}
			r.Queue, _ = res[1].(string)
			r.Ignores, _ = res[2].(int64)
			r.Source, _ = res[3].(string)
			if job, err := s.GetJob(ctx, ident); err == nil && job != nil {
				r.Job = job.Fields
			}
			return r, nil
		case 0:
			return nil, ErrNoJob
		case -3:
			return nil, &NotAJobError{Key: KeyJob(ident)}
		case -4:
			return nil, ErrJobFinished
		case -5:
			p, _ := res[1].(string)
			ts, _ := res[2].(string)
			sec, _ := strconv.ParseFloat(ts, 64)
			return nil, &PipelineAliveError{Pipeline: p, TS: time.Unix(int64(sec), 0)}
		case -6:
			return nil, ErrJobNotRequeueable
		case -7:
			return nil, ErrFailureWithoutJob
		case -9:
			queue, _ = res[1].(string)
			pipeline, _ = res[2].(string)
			continue
		}
		return nil, fmt.Errorf("requeue %s: unexpected script result %v", ident, res)
	}
	return nil, fmt.Errorf("requeue %s: the job's records kept changing; try again", ident)
}

package store

// Store methods of the operator's commands (`archivebot requeue`,
// `reap-pipeline`, the admin notice list). See doc/protocol.md, Operator
// commands.

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/requeue.lua
	requeueSrc    string
	requeueScript = fenced(requeueSrc)

	//go:embed scripts/pipeline_remove.lua
	pipelineRemoveSrc    string
	pipelineRemoveScript = fenced(pipelineRemoveSrc)
)

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
			queue, KeyWorking, KeyFinishedIndex, KeyReaperReported, pipeline, KeyQueues}
		argv := []any{s.Now().Unix(), forceArg, int64(silentAfter / time.Second)}
		for _, f := range RequeueResetFields {
			argv = append(argv, f)
		}
		res, err := requeueScript.Run(ctx, s.rdb, keys, argv...).Slice()
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

// Origin returns the queue ident was registered in, from its origin record
// ("" when there is none).
func (s *Store) Origin(ctx context.Context, ident string) (string, error) {
	q, err := s.rdb.HGet(ctx, KeyOrigin(ident), "queue").Result()
	if errors.Is(err, redis.Nil) || isWrongType(err) {
		return "", nil
	}
	return q, wrap("read origin of "+ident, err)
}

// AdminNotice is a line an operator's command wants said in a channel.
type AdminNotice struct {
	// Channel to say it in; "" means every channel.
	Channel string `json:"channel"`
	Text    string `json:"text"`
}

// PushAdminNotice queues n for the running node to deliver.
func (s *Store) PushAdminNotice(ctx context.Context, n AdminNotice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return wrap("queue admin notice", s.rdb.RPush(ctx, KeyAdminNotices, b).Err())
}

// AdminNoticesInDelivery returns up to limit admin notices taken earlier
// whose delivery was not acknowledged, oldest first.
func (s *Store) AdminNoticesInDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := s.rdb.LRange(ctx, KeyAdminNoticesProcessing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+KeyAdminNoticesProcessing, err)
}

// TakeAdminNotice moves the oldest admin notice into delivery (the finish
// notices' script over the admin lists); ok is false when there is none.
func (s *Store) TakeAdminNotice(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = finishTakeScript.Run(ctx, s.rdb, []string{KeyAdminNotices, KeyAdminNoticesProcessing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take admin notice", err)
	}
	return doc, true, nil
}

// AckAdminNotice ends the delivery of doc.
func (s *Store) AckAdminNotice(ctx context.Context, doc string) error {
	err := finishAckScript.Run(ctx, s.rdb, []string{KeyAdminNoticesProcessing}, doc).Err()
	return wrap("acknowledge admin notice", err)
}

// RemovePipeline deletes a pipeline record that stopped reporting and its
// member of `pipelines`, unless it reported within silentAfter
// (pipeline_remove.lua), or whatever its last report with force. It
// reports whether it removed anything; a pipeline that reports again is
// refused with *PipelineAliveError.
func (s *Store) RemovePipeline(ctx context.Context, key string, silentAfter time.Duration, force bool) (bool, error) {
	after := int64(silentAfter / time.Second)
	if force {
		after = -1
	}
	res, err := pipelineRemoveScript.Run(ctx, s.rdb, []string{key, KeyPipelines}, s.Now().Unix(), after).Slice()
	if err != nil {
		return false, wrap("remove pipeline "+key, err)
	}
	code, _ := res[0].(int64)
	switch code {
	case -5:
		ts, _ := res[1].(string)
		sec, _ := strconv.ParseFloat(ts, 64)
		return false, &PipelineAliveError{Pipeline: key, TS: time.Unix(int64(sec), 0)}
	case -3:
		return false, fmt.Errorf("remove pipeline %s: %w", key, ErrWrongType)
	}
	return code == 1, nil
}

// FailReasons returns the failed_reason of each ident whose record has one
// (one pipeline of HGETs): the jobs among idents that were failed.
func (s *Store) FailReasons(ctx context.Context, idents []string) (map[string]string, error) {
	all, err := s.hgetMany(ctx, idents, "failed_reason")
	if err != nil {
		return nil, err
	}
	for id, r := range all {
		if r == "" {
			delete(all, id)
		}
	}
	return all, nil
}

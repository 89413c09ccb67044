package store

// Queue tools: !move, !jobs PIPELINE (doc/protocol.md, Queues).

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/move.lua
	moveBody   string
	moveSrc    = fencedSrc(cmdRecordSrc + historySrc + moveBody)
	moveScript = redis.NewScript(moveSrc)
)

// Move outcomes besides ErrNoJob, ErrJobFinished and ErrJobStarted.
var (
	ErrWrongQueueKind = errors.New("the target queue holds jobs of another kind")
	ErrSameQueue      = errors.New("the job is already in that queue")
	ErrNotQueued      = errors.New("the job is in no queue")
)

// Move places.
const (
	MoveFront = "front" // next to run
	MoveBack  = "back"  // last to run
)

// IsQueueKey reports whether q names a pending queue: pending,
// pending-ao, pending-large or pending:NAME.
func IsQueueKey(q string) bool {
	switch q {
	case KeyPending, KeyPendingAO, KeyPendingLarge:
		return true
	}
	return strings.HasPrefix(q, PendingNamedPrefix) && len(q) > len(PendingNamedPrefix)
}

// Move moves a queued job to the front (next to run) or back of its
// queue, or, when where is a queue key, to the back of that queue, which
// must be of the job's kind (recursive jobs stay out of pending-ao, !ao jobs
// stay in it or in pending:NAME). One atomic step (move.lua) that also
// updates the origin record and appends "moved" by by to the history. It
// returns the queue the job was in.
func (s *Store) Move(ctx context.Context, ident, where, by string) (string, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return "", err
	}
	mode, target := where, KeyPending
	if where != MoveFront && where != MoveBack {
		if !IsQueueKey(where) {
			return "", fmt.Errorf("move %s: %q is not a queue", ident, where)
		}
		mode, target = "queue", where
	}
	keys := []string{KeyJob(ident), KeyHistory(ident), KeyOrigin(ident), KeyQueues, target}
	keys = append(keys, FixedQueues...)
	keys = append(keys, named...)
	detail, _ := json.Marshal(map[string]string{"to": where})
	// The script closes the entry with the queue it found the job in.
	e := s.entry(ident, EventMoved, by, nil)
	prefix := strings.TrimSuffix(e, "{}}") + strings.TrimSuffix(string(detail), "}") + `,"from":`
	res, err := s.runWrite(ctx, "move "+ident, moveScript, moveSrc, keys, mode, prefix).Slice()
	if err != nil {
		return "", err
	}
	code, _ := res[0].(int64)
	from, _ := res[1].(string)
	switch code {
	case 1:
		return from, nil
	case 0:
		return "", ErrNoJob
	case -1:
		return "", ErrJobFinished
	case -2:
		return "", ErrJobStarted
	case -3:
		return "", &NotAJobError{Key: KeyJob(ident)}
	case -4:
		return from, ErrWrongQueueKind
	case -5:
		return from, ErrSameQueue
	case -6:
		return "", ErrNotQueued
	}
	return "", fmt.Errorf("move %s: unexpected script result %d", ident, code)
}

// RunningJob is a job in `working` with the pipeline running it.
type RunningJob struct {
	Ident, URL, PipelineID string
	StartedAt              string
}

// RunningJobs lists the jobs in `working` with their pipeline, in two round
// trips (LRANGE, then one pipelined HMGET per job). Idents whose key is not
// a job are left out.
func (s *Store) RunningJobs(ctx context.Context) ([]RunningJob, error) {
	ids, err := s.WorkingJobs(ctx)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, KeyJob(id), "url", "pipeline_id", "started_at")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read working jobs", err)
	}
	out := make([]RunningJob, 0, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		if cmds[i].Err() != nil || len(v) < 3 {
			continue
		}
		str := func(j int) string { s, _ := v[j].(string); return s }
		out = append(out, RunningJob{Ident: id, URL: str(0), PipelineID: str(1), StartedAt: str(2)})
	}
	return out, nil
}

package store

import (
	"context"
	"fmt"
	"strconv"
)

// failExpiry is how long a failed job's keys live, as for aborted jobs.
const failExpiry = 5 // seconds

// FailJob gives up on a job (reaper auto-fail, or an operator's !fail) in
// one atomic step: it sets `failed` and `failed_reason`, INCRs
// jobs_failed, removes the ident from every queue (pending, pending-ao,
// pending-large, every pending:NAME) and from working, and expires the
// hash, log and ignore set in 5 seconds. It returns the record after the
// change, for the caller to report.
//
// Named queues are read from the queue index just before the atomic step:
// a job is queued exactly once, so a queue created in between cannot hold
// it.
//
// The same step writes the failure record archivebot:failed:IDENT (kept 7
// days, see doc/web.md, Failure records), indexes it among finished jobs,
// appends "failed" to the job's history and gives the history and origin
// records the failure record's TTL. by is who failed it: an operator's
// nick, or "reaper".
// ErrNoJob and ErrJobFinished leave Redis unchanged; with
// ErrJobFinished the job as it is is returned too.
func (s *Store) FailJob(ctx context.Context, ident, reason string) (*Job, error) {
	return s.FailJobBy(ctx, ident, reason, "node")
}

// FailJobBy is FailJob recording by (an operator's nick, or "reaper") as
// who failed the job.
func (s *Store) FailJobBy(ctx context.Context, ident, reason, by string) (*Job, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("fail job %s: %w", ident, err)
	}
	keys := []string{KeyJob(ident), KeyLog(ident), KeyIgnores(ident), KeyJobsFailed,
		KeyHistory(ident), KeyFailed(ident), KeyOrigin(ident), KeyFinishedIndex, KeyWorking}
	keys = append(keys, FixedQueues...)
	keys = append(keys, named...)
	at := s.nowFloat()
	entry := s.entry(ident, EventFailed, by, map[string]any{"reason": reason})
	res, err := s.runWrite(ctx, "fail job "+ident, failScript.Script, failScript.src, keys, reason, failExpiry,
		entry, by, strconv.FormatFloat(at, 'f', -1, 64), secs(FailureTTL)).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("fail job %s: empty reply", ident)
	}
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return nil, ErrNoJob
	case -3:
		return nil, &NotAJobError{Key: KeyJob(ident)}
	}
	job := &Job{Ident: ident, Fields: scriptFields(res[1:])}
	if code == 2 {
		return job, ErrJobFinished
	}
	return job, nil
}

// scriptFields turns a flat field/value reply (HGETALL inside a script) into a map.
func scriptFields(flat []any) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return m
}

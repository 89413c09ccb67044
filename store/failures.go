package store

// Failing a job (!fail, the reaper's auto-fail) and the failure records
// kept after it (doc/protocol.md, Failed jobs).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/record"
)

// failExpiry is how long a failed job's keys live, as for aborted jobs.
const failExpiry = 5

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
func (s *Store) FailJob(ctx context.Context, ident, reason string) (*record.Job, error) {
	return s.FailJobBy(ctx, ident, reason, "node")
}

// FailJobBy is FailJob recording by (an operator's nick, or "reaper") as
// who failed the job.
func (s *Store) FailJobBy(ctx context.Context, ident, reason, by string) (*record.Job, error) {
	return s.FailJobNotice(ctx, ident, reason, by, nil)
}

// FailJobNotice is FailJobBy that also queues notice (when not nil) for
// the admin notifier in the same atomic step, only if the job is failed:
// the reaper's "marked as failed" line is said only for a fail that
// happened, and at least once.
func (s *Store) FailJobNotice(ctx context.Context, ident, reason, by string, notice *AdminNotice) (*record.Job, error) {
	doc := ""
	if notice != nil {
		b, err := json.Marshal(notice)
		if err != nil {
			return nil, err
		}
		doc = string(b)
	}
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("fail job %s: %w", ident, err)
	}
	keys := []string{KeyJob(ident), KeyLog(ident), KeyIgnores(ident), KeyJobsFailed,
		KeyHistory(ident), KeyFailed(ident), KeyOrigin(ident), KeyFinishedIndex, KeyAdminNotices, KeyWorking}
	keys = append(keys, withPausedLists(FixedQueues, named)...)
	at := s.nowFloat()
	entry := s.entry(ident, EventFailed, by, map[string]any{"reason": reason})
	res, err := s.runWrite(ctx, "fail job "+ident, failScript, keys, reason, failExpiry,
		entry, by, strconv.FormatFloat(at, 'f', -1, 64), secs(FailureTTL), doc).Slice()
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
	job := record.DecodeJob(ident, scriptFields(res[1:]))
	if code == 2 {
		return job, ErrJobFinished
	}
	return job, nil
}

// FailJobReported is FailJobBy for a command whose report of the fail
// would otherwise be its reply only (!fail, `archivebot fail`): line
// builds the channel line from the job as it is before the fail, and
// that line is queued for the admin notifier in the fail's own atomic
// step (FailJobNotice), so the channel hears of the fail at least once
// even when the node that ran the command dies before replying
// (doc/reliability.md). line is not called, and nothing is queued, when
// there is no live job to fail.
//
// The job is read first, in its own round trip, for the line's channel,
// nick and URL: started_in, started_by and url are written once, when
// the job is queued, and the ident is the URL's, so only a job that
// ended, expired and was queued again by someone else in between the
// read and the fail could be reported to the previous job's channel.
func (s *Store) FailJobReported(ctx context.Context, ident, reason, by string, line func(*record.Job) AdminNotice) (*record.Job, error) {
	job, err := s.GetJob(ctx, ident)
	if err != nil {
		return nil, err
	}
	var notice *AdminNotice
	if job != nil && !job.Failed && !job.FinishedAt.Set {
		n := line(job)
		notice = &n
	}
	return s.FailJobNotice(ctx, ident, reason, by, notice)
}

// FailureTTL is how long a failure record (and its index entry) is kept.
const FailureTTL = 7 * 24 * time.Hour

// RecordFailure writes f as archivebot:failed:IDENT with a TTL of
// FailureTTL and adds it to the index of finished jobs, in one step (one
// round trip). FailedAt zero means now.
func (s *Store) RecordFailure(ctx context.Context, f record.Failure) error {
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

// GetFailure reads ident's failure record; nil, nil when there is none.
// One round trip.
func (s *Store) GetFailure(ctx context.Context, ident string) (*record.Failure, error) {
	m, err := s.rdb.HGetAll(ctx, KeyFailed(ident)).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("get failure "+ident, err)
	}
	return record.DecodeFailure(ident, m), nil
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

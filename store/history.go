package store

// Job history and audit (doc/protocol.md, Job history): every change to a
// job is appended, as one JSON entry, to archivebot:history:IDENT by the
// same script that makes the change, and published on
// archivebot:job_events. The job-end step and the index of finished jobs
// live here too.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/record"
)

// HistoryMax is the most entries a job's history keeps (the oldest go).
const HistoryMax = 100

// History TTLs, set when the job ends. A finished job's history lives as
// long as its record (48 h); an aborted or failed job's record lives 5 s,
// but its history is kept as long as its failure record, so !history still
// answers afterwards.
const (
	HistoryFinishedTTL = 48 * time.Hour
	HistoryEndedTTL    = 7 * 24 * time.Hour
)

// History events.
const (
	EventQueued        = "queued"
	EventSettings      = "settings"
	EventIgnoreAdded   = "ignore_added"
	EventIgnoreRemoved = "ignore_removed"
	EventStarted       = "started"
	EventAborted       = "aborted"
	EventFailed        = "failed"
	EventFinished      = "finished"
	EventMoved         = "moved"
	EventUserAgent     = "useragent"
	EventExpired       = "expired"
)

// HistoryEntry is one entry of a job's history.
type HistoryEntry struct {
	TS    float64 `json:"ts"`
	Ident string  `json:"ident"`
	Event string  `json:"event"`
	// By is who or what made the change: a nick, a pipeline id, "reaper"
	// or "node".
	By     string         `json:"by"`
	Detail map[string]any `json:"detail"`
}

// Time is the entry's time.
func (e HistoryEntry) Time() time.Time {
	sec := int64(e.TS)
	return time.Unix(sec, int64((e.TS-float64(sec))*1e9))
}

// entry builds the JSON of a history entry stamped now.
func (s *Store) entry(ident, event, by string, detail map[string]any) string {
	if detail == nil {
		detail = map[string]any{}
	}
	b, _ := json.Marshal(HistoryEntry{TS: s.nowFloat(), Ident: ident, Event: event, By: by, Detail: detail})
	return string(b)
}

// nowFloat is the store's clock as UNIX seconds with millisecond fraction.
func (s *Store) nowFloat() float64 {
	return float64(s.Now().UnixMilli()) / 1000
}

// History returns the last n entries of the job's history, oldest first
// (one round trip). Entries that are not valid JSON are skipped.
func (s *Store) History(ctx context.Context, ident string, n int) ([]HistoryEntry, error) {
	raw, err := s.rdb.LRange(ctx, KeyHistory(ident), int64(-n), -1).Result()
	if isWrongType(err) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("read history of "+ident, err)
	}
	return parseHistory(raw), nil
}

func parseHistory(raw []string) []HistoryEntry {
	out := make([]HistoryEntry, 0, len(raw))
	for _, r := range raw {
		var e HistoryEntry
		if json.Unmarshal([]byte(r), &e) == nil && e.Event != "" {
			out = append(out, e)
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

// FinishedJob is one entry of /finished: a job record with finished_at
// (finished or aborted), or a failure record, or both.
type FinishedJob struct {
	Ident   string
	Job     *record.Job     // nil when the record has expired
	Failure *record.Failure // nil when the job did not fail
}

// State is the job's state (StateOf its record and failure record).
func (fj FinishedJob) State() record.State { return record.StateOf(fj.Job, fj.Failure, false) }

// Record is the job record to show: the record, else the copy the
// failure record keeps.
func (fj FinishedJob) Record() *record.Job { return record.Shown(fj.Ident, fj.Job, fj.Failure) }

// FinishedJobs lists the jobs of the finished index that still have a job
// record with finished_at or a failure record, oldest first, each as
// Speaking shows it (a ghost is no record; a failure record beside a newer
// registration is none). It never
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
		var job *record.Job
		if m := jobs[i].Val(); len(m) > 0 {
			job = record.DecodeJob(id, m)
		}
		fj := FinishedJob{Ident: id}
		fj.Job, fj.Failure = record.Speaking(job, record.DecodeFailure(id, fails[i].Val()))
		if fj.Job != nil && !fj.Job.Finished() {
			fj.Job = nil // queued or running again: not finished
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

// RecordJobEnd appends what the finish notifier observed (the job
// finished, or was aborted) to the job's history and gives its history and
// origin records their TTL: 48 hours for a finished job, 7 days for an
// aborted one (its record lives 5 s, the history is kept for !history).
// by is the pipeline id of the notice, or "node" when it has none. One
// round trip; a notice delivered twice appends once.
func (s *Store) RecordJobEnd(ctx context.Context, ident string, aborted bool, by string) error {
	event, ttl := EventFinished, HistoryFinishedTTL
	if aborted {
		event, ttl = EventAborted, HistoryEndedTTL
	}
	if by == "" {
		by = "node"
	}
	entry := s.entry(ident, event, by, nil)
	n, err := jobEndScript.Run(ctx, s.rdb, []string{KeyHistory(ident), KeyOrigin(ident)},
		entry, event, by, int64(ttl/time.Second)).Int()
	if err != nil {
		return wrap("record end of "+ident, err)
	}
	if n < 0 {
		return &NotAJobError{Key: KeyHistory(ident)}
	}
	return nil
}

package store

// The pending queues: the named-queue index, what !pending and /pending
// read, and the queue tools (!move; doc/protocol.md, Queues).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
	lists, err := s.readLists(ctx, names, "list pending queues")
	if err != nil {
		return nil, err
	}
	var out []Queue
	var idents []string
	for i, q := range names {
		ids := lists[i]
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
	keys := []string{KeyJob(ident), KeyHistory(ident), KeyOrigin(ident), KeyQueues, target,
		KeyPaused, KeyPausedQueue(target)}
	// Every queue the job may wait in, and where each waits while paused.
	for _, q := range append(append([]string{}, FixedQueues...), named...) {
		keys = append(keys, q, KeyPausedQueue(q))
	}
	detail, _ := json.Marshal(map[string]string{"to": where})
	// The script closes the entry with the queue it found the job in.
	e := s.entry(ident, EventMoved, by, nil)
	prefix := strings.TrimSuffix(e, "{}}") + strings.TrimSuffix(string(detail), "}") + `,"from":`
	res, err := s.runWrite(ctx, "move "+ident, moveScript, keys, mode, prefix).Slice()
	s.notifyQueued()
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

// NamedQueue is a non-empty pending:NAME queue and its length.
type NamedQueue struct {
	Name string
	Len  int64
}

// NamedQueues lists the non-empty pending:NAME queues, sorted, from the
// queue index (see NamedQueueLens).
func (s *Store) NamedQueues(ctx context.Context) ([]string, error) {
	qs, err := s.NamedQueueLens(ctx)
	return namedQueueKeys(qs), err
}

// NamedQueueLens lists the non-empty pending:NAME queues with their
// lengths, sorted, from the queue index (one round trip, pruning it of
// emptied queues and keys that are not lists; see doc/protocol.md,
// Queues). The first call of a store rebuilds the index with SCAN, so that
// queues created by other programs are found.
func (s *Store) NamedQueueLens(ctx context.Context) ([]NamedQueue, error) {
	s.indexMu.Lock()
	built := s.indexBuilt
	s.indexMu.Unlock()
	if !built {
		return s.RebuildQueueIndex(ctx)
	}
	return s.readQueueIndex(ctx, nil)
}

// RebuildQueueIndex adds every pending:NAME list found by SCAN to the
// queue index and returns the non-empty named queues. Services call it now
// and then to find queues that did not come through our scripts.
func (s *Store) RebuildQueueIndex(ctx context.Context) ([]NamedQueue, error) {
	var found []any
	iter := s.rdb.Scan(ctx, 0, PendingNamedPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		found = append(found, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, wrap("scan named queues", err)
	}
	out, err := s.readQueueIndex(ctx, found)
	if err == nil {
		s.indexMu.Lock()
		s.indexBuilt = true
		s.indexMu.Unlock()
	}
	return out, err
}

func (s *Store) readQueueIndex(ctx context.Context, add []any) ([]NamedQueue, error) {
	res, err := queueIndexScript.Run(ctx, s.rdb, []string{KeyQueues}, add...).Slice()
	if s.wrongTypeSkipped(KeyQueues, err) {
		return nil, nil // no named queues can be known
	}
	if err != nil {
		return nil, wrap("read queue index", err)
	}
	out := make([]NamedQueue, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		name, _ := res[i].(string)
		n, _ := res[i+1].(int64)
		out = append(out, NamedQueue{Name: name, Len: n})
	}
	return out, nil
}

// namedQueueKeys is the keys of qs.
func namedQueueKeys(qs []NamedQueue) []string {
	keys := make([]string, len(qs))
	for i, q := range qs {
		keys[i] = q.Name
	}
	return keys
}

// Queue is one pending queue as !pending shows it.
type Queue struct {
	Name string
	Len  int64
	// Jobs holds up to the requested number of jobs, next to run first.
	Jobs []QueuedJob
	// Paused is the pause that holds the queue (its own or "all"), or nil;
	// a paused queue's jobs wait in its list aside and are counted here.
	Paused *Pause
}

// QueuedJob is a queued ident and its URL.
type QueuedJob struct{ Ident, URL string }

// Queues lists every non-empty pending queue in the order a pipeline checks
// them (named queues, pending-large, pending, pending-ao), each with at most
// limit jobs, next to run first. Three round trips.
func (s *Store) Queues(ctx context.Context, limit int) ([]Queue, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := append(named, FixedQueues...)
	lens := make([]*redis.IntCmd, len(names))
	heads := make([]*redis.StringSliceCmd, len(names))
	// A paused queue's jobs wait aside (doc/protocol.md, Paused queues).
	asideLens := make([]*redis.IntCmd, len(names))
	asideHeads := make([]*redis.StringSliceCmd, len(names))
	var paused *redis.MapStringStringCmd
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range names {
			lens[i] = p.LLen(ctx, q)
			// The right end is the head: the last `limit` entries.
			heads[i] = p.LRange(ctx, q, int64(-limit), -1)
			asideLens[i] = p.LLen(ctx, KeyPausedQueue(q))
			asideHeads[i] = p.LRange(ctx, KeyPausedQueue(q), int64(-limit), -1)
		}
		paused = p.HGetAll(ctx, KeyPaused)
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return nil, wrap("list queues", err)
		}
	}
	pauses := decodePauses(paused.Val())
	var out []Queue
	var idents []string
	for i, q := range names {
		n := lens[i].Val() + asideLens[i].Val()
		if n == 0 {
			continue
		}
		ids := heads[i].Val()
		if asideLens[i].Val() > 0 {
			// The list aside holds the older jobs: it is the head.
			ids = asideHeads[i].Val()
		}
		jobs := make([]QueuedJob, 0, len(ids))
		for k := len(ids) - 1; k >= 0; k-- {
			jobs = append(jobs, QueuedJob{Ident: ids[k]})
			idents = append(idents, ids[k])
		}
		out = append(out, Queue{Name: q, Len: n, Jobs: jobs, Paused: PauseOf(pauses, q)})
	}
	if len(idents) == 0 {
		return out, nil
	}
	urls := make(map[string]*redis.StringCmd, len(idents))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range idents {
			urls[id] = p.HGet(ctx, KeyJob(id), "url")
		}
		return nil
	})
	// A queued ident whose key is not a job shows without a URL.
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("queued job urls", err)
	}
	for qi := range out {
		for ji := range out[qi].Jobs {
			out[qi].Jobs[ji].URL = urls[out[qi].Jobs[ji].Ident].Val()
		}
	}
	return out, nil
}

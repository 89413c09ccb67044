package store

// The take rule (doc/pipeline-api.md, The take rule) and what it reads:
// pauses, per-key avoid rules and the targeted-only flag. The take itself
// is APITake (pipelineapi.go), one script (scripts/take.lua).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// TakeRules are the node's settings of the take rule.
type TakeRules struct {
	// PerUserRunning: a take skips the jobs of a nick that has this many
	// jobs running (in `working`); 0 is off.
	PerUserRunning int
	// OpsExempt: jobs queued by a channel operator are not limited.
	OpsExempt bool
	// CaseMapping folds the nick of a job whose origin record has none
	// (queued before the origin kept it): rfc1459 (the default),
	// strict-rfc1459 or ascii.
	CaseMapping string
	// ScanLimit is the most queued jobs one take examines (default
	// DefaultTakeScanLimit).
	ScanLimit int
}

// DefaultTakeScanLimit bounds one take's scan when TakeRules leave it 0.
const DefaultTakeScanLimit = 1000

// SetTakeRules sets the rules every APITake uses from now on.
func (s *Store) SetTakeRules(r TakeRules) { s.takeRules.Store(&r) }

func (s *Store) rules() TakeRules {
	if r := s.takeRules.Load(); r != nil {
		return *r
	}
	return TakeRules{}
}

// TakeStats is what one take's scan saw.
type TakeStats struct {
	// BoundHit: the scan stopped at the scan limit.
	BoundHit bool
	// Skipped: jobs a rule passed over.
	Skipped int
}

// Pause is a paused queue (or "all").
type Pause struct {
	Queue  string    `json:"-"`
	By     string    `json:"by"`
	At     time.Time `json:"-"`
	AtUnix int64     `json:"at"`
	Reason string    `json:"reason"`
}

// PauseAll is the queue name that pauses every queue.
const PauseAll = "all"

// ErrUnknownQueue: the name is not a queue (pending, pending-ao,
// pending-large, pending:NAME, or all).
var ErrUnknownQueue = errors.New("unknown queue")

// ErrAlreadyPaused and ErrNotPaused: nothing was changed.
var (
	ErrAlreadyPaused = errors.New("already paused")
	ErrNotPaused     = errors.New("not paused")
	// ErrAllPaused: a single queue cannot be resumed while all are paused.
	ErrAllPaused = errors.New("every queue is paused")
)

// ValidQueueName reports whether q names a queue that can be paused.
func ValidQueueName(q string) bool {
	switch q {
	case KeyPending, KeyPendingAO, KeyPendingLarge, PauseAll:
		return true
	}
	n, ok := strings.CutPrefix(q, PendingNamedPrefix)
	return ok && n != "" && !strings.ContainsAny(n, " \t\r\n*?[]")
}

// Pauses lists the paused queues, "all" first, then by name.
func (s *Store) Pauses(ctx context.Context) ([]Pause, error) {
	m, err := s.rdb.HGetAll(ctx, KeyPaused).Result()
	if err != nil {
		if isWrongType(err) {
			return nil, nil
		}
		return nil, wrap("read pauses", err)
	}
	return decodePauses(m), nil
}

// decodePauses reads the pause records of archivebot:paused.
func decodePauses(m map[string]string) []Pause {
	out := make([]Pause, 0, len(m))
	for q, v := range m {
		p := Pause{Queue: q}
		_ = json.Unmarshal([]byte(v), &p)
		p.At = time.Unix(p.AtUnix, 0)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Queue == PauseAll) != (out[j].Queue == PauseAll) {
			return out[i].Queue == PauseAll
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

// PauseOf returns the pause that holds queue (its own, or "all"), or nil.
func PauseOf(pauses []Pause, queue string) *Pause {
	for i := range pauses {
		if pauses[i].Queue == PauseAll || pauses[i].Queue == queue {
			return &pauses[i]
		}
	}
	return nil
}

// pauseTargets lists the queues a pause or resume of name moves: name
// itself, or for "all" the fixed queues and every indexed named queue.
func (s *Store) pauseTargets(ctx context.Context, name string) ([]string, error) {
	if name != PauseAll {
		return []string{name}, nil
	}
	named, err := s.rdb.SMembers(ctx, KeyQueues).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("read queue index", err)
	}
	sort.Strings(named)
	return append(append([]string{}, FixedQueues...), named...), nil
}

// PauseQueue pauses name (a queue, or "all"), in one script: the pause
// is recorded in archivebot:paused and the queue's list is renamed aside
// to archivebot:paused:QUEUE, where jobs queued meanwhile go too, so
// direct-Redis pipelines find nothing (doc/protocol.md, Paused queues).
func (s *Store) PauseQueue(ctx context.Context, name, by, reason string) error {
	if !ValidQueueName(name) {
		return fmt.Errorf("%w: %q", ErrUnknownQueue, name)
	}
	targets, err := s.pauseTargets(ctx, name)
	if err != nil {
		return err
	}
	rec, _ := json.Marshal(Pause{By: by, AtUnix: s.Now().Unix(), Reason: reason})
	keys := []string{KeyPaused}
	for _, q := range targets {
		keys = append(keys, q, KeyPausedQueue(q))
	}
	code, err := pauseScript.Run(s.apiCtx(ctx), s.rdb, keys, name, string(rec)).Int()
	if err != nil {
		return wrap("pause "+name, err)
	}
	switch code {
	case -1:
		return ErrAlreadyPaused
	case -2:
		return ErrAllPaused
	}
	return nil
}

// ResumeQueue resumes name: the list set aside moves back under the
// queue's name (behind anything queued there meanwhile, in order), and
// the pause is removed, in one script.
func (s *Store) ResumeQueue(ctx context.Context, name string) error {
	if !ValidQueueName(name) {
		return fmt.Errorf("%w: %q", ErrUnknownQueue, name)
	}
	targets, err := s.pauseTargets(ctx, name)
	if err != nil {
		return err
	}
	keys := []string{KeyPaused}
	for _, q := range targets {
		keys = append(keys, q, KeyPausedQueue(q))
	}
	code, err := resumeScript.Run(s.apiCtx(ctx), s.rdb, keys, name).Int()
	if err != nil {
		return wrap("resume "+name, err)
	}
	switch code {
	case -1:
		return ErrNotPaused
	case -2:
		return ErrAllPaused
	}
	return nil
}

// MaxAvoidRules caps a key's avoid list (each of the operators' and the
// pipeline's own).
const MaxAvoidRules = 100

// KeyRules is what the take rule knows of one pipeline key.
type KeyRules struct {
	Avoid        []string // set by operators
	AvoidSelf    []string // from the pipeline's report
	TargetedOnly bool
}

// PipelineKeyRules reads name's rules.
func (s *Store) PipelineKeyRules(ctx context.Context, name string) (KeyRules, error) {
	var a, b *redis.StringSliceCmd
	var t *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		a = p.SMembers(ctx, KeyPipelineKeyAvoid(name))
		b = p.SMembers(ctx, KeyPipelineKeyAvoidSelf(name))
		t = p.HGet(ctx, KeyPipelineKeyRules(name), "targeted_only")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return KeyRules{}, wrap("read rules of "+name, err)
	}
	r := KeyRules{Avoid: a.Val(), AvoidSelf: b.Val(), TargetedOnly: t.Val() == "1"}
	sort.Strings(r.Avoid)
	sort.Strings(r.AvoidSelf)
	return r, nil
}

// SetPipelineKeyAvoid replaces the operators' avoid list of name (domains
// already checked by ParseAvoid), in one MULTI.
func (s *Store) SetPipelineKeyAvoid(ctx context.Context, name string, domains []string) error {
	return s.replaceSet(ctx, KeyPipelineKeyAvoid(name), domains)
}

// SetPipelineKeyAvoidSelf replaces the avoid list name's own report gave.
func (s *Store) SetPipelineKeyAvoidSelf(ctx context.Context, name string, domains []string) error {
	return s.replaceSet(ctx, KeyPipelineKeyAvoidSelf(name), domains)
}

func (s *Store) replaceSet(ctx context.Context, key string, members []string) error {
	if len(members) > MaxAvoidRules {
		return fmt.Errorf("at most %d avoid rules", MaxAvoidRules)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		if len(members) > 0 {
			args := make([]any, len(members))
			for i, m := range members {
				args[i] = m
			}
			p.SAdd(ctx, key, args...)
		}
		return nil
	})
	return wrap("write "+key, err)
}

// SetPipelineKeyTargetedOnly sets or clears name's targeted-only flag.
func (s *Store) SetPipelineKeyTargetedOnly(ctx context.Context, name string, on bool) error {
	var err error
	if on {
		err = s.rdb.HSet(ctx, KeyPipelineKeyRules(name), "targeted_only", "1").Err()
	} else {
		err = s.rdb.HDel(ctx, KeyPipelineKeyRules(name), "targeted_only").Err()
	}
	return wrap("write rules of "+name, err)
}

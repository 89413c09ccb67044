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

// withPausedLists lists every queue of the lists given and, after each,
// the list it waits in while paused (archivebot:paused:QUEUE): a script
// that takes a queued job out of its queue (abort, fail) must find it in
// either, or a job failed while its queue was paused comes back at the
// resume and is taken (the long soak: a !fail during a pause, the job
// taken ten minutes later by a direct pipeline).
func withPausedLists(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, q := range l {
			out = append(out, q, KeyPausedQueue(q))
		}
	}
	return out
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
	rec, _ := json.Marshal(Pause{By: by, AtUnix: s.Now().Unix(), Reason: reason})
	code, err := s.runOnQueues(ctx, pauseScript, name, string(rec))
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

// runOnQueues runs the pause or resume script on name's queues. For
// "all" the script checks them against the queue index it reads itself,
// and answers -3 when a queue was created since they were listed: they
// are listed again (a queue created in between would otherwise stay
// open to direct pipelines).
func (s *Store) runOnQueues(ctx context.Context, script *fencedScript, name string, args ...any) (int, error) {
	for attempt := 0; ; attempt++ {
		targets, err := s.pauseTargets(ctx, name)
		if err != nil {
			return 0, err
		}
		if s.beforePauseScript != nil {
			s.beforePauseScript()
		}
		keys := []string{KeyPaused}
		for _, q := range targets {
			keys = append(keys, q, KeyPausedQueue(q))
		}
		if name == PauseAll {
			keys = append(keys, KeyQueues)
		}
		code, err := script.Run(s.apiCtx(ctx), s.rdb, keys, append([]any{name}, args...)...).Int()
		if err != nil || code != -3 {
			return code, err
		}
		if attempt == 10 {
			return 0, errors.New("queues keep being created; try again")
		}
	}
}

// ResumeQueue resumes name: the list set aside moves back under the
// queue's name (behind anything queued there meanwhile, in order), and
// the pause is removed, in one script.
func (s *Store) ResumeQueue(ctx context.Context, name string) error {
	if !ValidQueueName(name) {
		return fmt.Errorf("%w: %q", ErrUnknownQueue, name)
	}
	code, err := s.runOnQueues(ctx, resumeScript, name)
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

// Waiting says where a queued job stands and what holds it (!status
// IDENT, /jobs/IDENT; doc/pipeline-api.md, The take rule).
type Waiting struct {
	// Queue is the queue the job waits in; Position its place, 1 = next
	// (0 when it is in no queue).
	Queue    string
	Position int64
	// Paused is the pause holding the queue, or nil.
	Paused *Pause
	// Nick, Running and Limit: the queuing nick has Running jobs running;
	// Limit is the per-user running limit (0: off).
	Nick    string
	Running int
	Limit   int
	// Host is the job's host; AvoidedBy the connected API pipelines whose
	// avoid rules cover it, APIPipelines how many API pipelines are
	// connected.
	Host         string
	AvoidRule    string // the widest rule that covers Host
	AvoidedBy    []string
	APIPipelines int
	// Legacy is how many connected pipelines take straight from Redis,
	// where the per-user limit, avoid rules and targeted-only do not bind.
	Legacy int
}

// AtLimit reports whether the per-user running limit holds the job.
func (w *Waiting) AtLimit() bool { return w.Limit > 0 && w.Running >= w.Limit }

// AllAvoid reports whether every connected pipeline avoids the job's
// site (and at least one is connected).
func (w *Waiting) AllAvoid() bool {
	return w.APIPipelines > 0 && w.Legacy == 0 && len(w.AvoidedBy) == w.APIPipelines
}

// WaitingOf explains a queued job (read only; a few round trips).
func (s *Store) WaitingOf(ctx context.Context, ident, url string) (*Waiting, error) {
	w := &Waiting{Limit: s.rules().PerUserRunning}
	origin, err := s.rdb.HGetAll(ctx, KeyOrigin(ident)).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("read origin of "+ident, err)
	}
	w.Queue, w.Nick = origin["queue"], origin["nick"]
	if w.Queue == "" {
		w.Queue = KeyPending
	}
	pauses, err := s.Pauses(ctx)
	if err != nil {
		return nil, err
	}
	w.Paused = PauseOf(pauses, w.Queue)
	for _, list := range []string{w.Queue, KeyPausedQueue(w.Queue)} {
		idx, err := s.rdb.LPos(ctx, list, ident, redis.LPosArgs{}).Result()
		if err != nil {
			continue
		}
		n, err := s.rdb.LLen(ctx, list).Result()
		if err == nil {
			w.Position = n - idx
		}
		break
	}
	if w.Limit > 0 && w.Nick != "" {
		working, err := s.rdb.LRange(ctx, KeyWorking, 0, -1).Result()
		if err != nil && !isWrongType(err) {
			return nil, wrap("read working", err)
		}
		nicks := make([]*redis.StringCmd, len(working))
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range working {
				nicks[i] = p.HGet(ctx, KeyOrigin(id), "nick")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
			return nil, wrap("read running nicks", err)
		}
		for _, c := range nicks {
			if c.Val() == w.Nick {
				w.Running++
			}
		}
	}
	w.Host = hostOf(url)
	members, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !isWrongType(err) {
		return nil, wrap("read pipelines", err)
	}
	apiKeys := make([]*redis.StringCmd, len(members))
	exists := make([]*redis.IntCmd, len(members))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			apiKeys[i] = p.HGet(ctx, m, "api_key")
			exists[i] = p.Exists(ctx, m)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read pipelines", err)
	}
	for i := range members {
		if exists[i].Val() == 0 {
			continue
		}
		name := apiKeys[i].Val()
		if name == "" {
			w.Legacy++
			continue
		}
		w.APIPipelines++
		r, err := s.PipelineKeyRules(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, d := range append(r.Avoid, r.AvoidSelf...) {
			if w.Host != "" && (w.Host == d || strings.HasSuffix(w.Host, "."+d)) {
				w.AvoidedBy = append(w.AvoidedBy, name)
				if w.AvoidRule == "" || len(d) < len(w.AvoidRule) {
					w.AvoidRule = d
				}
				break
			}
		}
	}
	sort.Strings(w.AvoidedBy)
	return w, nil
}

// hostOf is the lower-cased host of a job URL, as the take script reads it.
func hostOf(url string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if !strings.HasPrefix(rest, "[") {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			rest = rest[:i]
		}
	}
	return strings.TrimSuffix(strings.ToLower(rest), ".")
}

// LegacyPipelines counts the connected pipelines that take straight from
// Redis (records without api_key).
func (s *Store) LegacyPipelines(ctx context.Context) (int, error) {
	members, err := s.rdb.SMembers(ctx, KeyPipelines).Result()
	if err != nil && !isWrongType(err) {
		return 0, wrap("read pipelines", err)
	}
	cmds := make([]*redis.SliceCmd, len(members))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			cmds[i] = p.HMGet(ctx, m, "api_key", "id")
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return 0, wrap("read pipelines", err)
	}
	n := 0
	for _, c := range cmds {
		v := c.Val()
		if len(v) == 2 && v[0] == nil && v[1] != nil {
			n++
		}
	}
	return n, nil
}

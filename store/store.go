// Package store is the only code that reads or writes Redis keys. It
// holds the job store used by the bot's commands, the web, the tweeter and
// the background services (package coordinator), the key names (keys.go)
// and the Lua scripts that make every multi-key change atomic (scripts.go,
// scripts/). Files are grouped by subject: jobs, commands, queues,
// notices, failures, history, lease, logs, stream, pipelines, tweets,
// status.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/redis/go-redis/v9"
)

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

// secs formats a TTL for a script argument.
func secs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// ErrWrongType is returned when a key of ours holds a value of another type.
var ErrWrongType = errors.New("key holds the wrong kind of value")

// hgetMany reads one field of many job records in one pipeline.
func (s *Store) hgetMany(ctx context.Context, idents []string, field string) (map[string]string, error) {
	cmds := make([]*redis.StringCmd, len(idents))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			cmds[i] = p.HGet(ctx, KeyJob(id), field)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read job "+field, err)
	}
	out := make(map[string]string, len(idents))
	for i, id := range idents {
		out[id] = cmds[i].Val()
	}
	return out, nil
}

func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// stringsOf reads a Lua array of strings from a script reply.
func stringsOf(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Now is the time by the store's clock (WithClock): what it writes as the
// time of a change. A consumer that keeps time as the store does (the
// tweeter, the pipeline notifier) takes it as its clock.
func (s *Store) Now() time.Time { return s.now() }

// ErrUnavailable is wrapped by errors caused by Redis being unreachable, so
// that front ends can answer "backend unavailable" instead of failing.
var ErrUnavailable = errors.New("backend unavailable")

// Store is the job store: typed operations over the shared Redis layout.
type Store struct {
	rdb redis.UniversalClient
	log *slog.Logger
	now func() time.Time // WithClock
	// wantReplicas, when positive, makes every user-command write wait
	// (Redis WAIT, at most waitTimeout) until that many replicas have it;
	// see runWrite (WithWait).
	wantReplicas int
	waitTimeout  time.Duration
	// commandFence, when set (ha.enabled), gives the fencing token of the
	// user-command writes whose context carries none (WithCommandFence).
	commandFence func() string

	indexMu    sync.Mutex
	indexBuilt bool // the queue index was rebuilt by this store

	wrongMu   sync.Mutex
	wrongKeys map[string]struct{} // shared keys of the wrong type, logged once

	queued queuedSignal // JobsQueued

	takeRules atomic.Pointer[TakeRules] // SetTakeRules

	takeIDCap int // TakeIDCap when 0; tests lower it
	// beforePauseScript, set by tests, runs between listing the queues of
	// a pause or resume and its script (a queue created in between).
	beforePauseScript func()

	positions *Positions // WithPositions
}

// Option sets something of a store at construction (New): nothing of a
// store is set after it.
type Option func(*Store)

// WithClock makes now the store's clock (time.Now by default): what it
// writes as the time of a change, and the death timer's, the feed's and
// the nonces' sense of now. The node passes internal/clock's; tests pass
// a clock they move.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithLogger is where the store logs what it skips (a shared key of the
// wrong type); slog.Default() by default.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithWait makes every user-command write wait (Redis WAIT, at most
// timeout) until replicas replicas have it (redis.wait_replicas,
// redis.wait_timeout); see runWrite. Zero replicas: no wait.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(s *Store) { s.wantReplicas, s.waitTimeout = replicas, timeout }
}

// WithCommandFence gives the fencing token of the user-command writes
// whose context carries none (ha.enabled: Lease.CommandFence), so that a
// node that lost the lease refuses the commands it still had buffered.
func WithCommandFence(fence func() string) Option { return func(s *Store) { s.commandFence = fence } }

// New returns a store over rdb, set up by opts.
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	s := &Store{rdb: rdb, now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// wrap classifies err: Redis server replies stay as they are, anything else
// (refused connections, timeouts, closed pools) wraps ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isConnReply(rerr.Error()) {
		metrics.RedisError(false)
		return fmt.Errorf("%s: %w", op, err)
	}
	metrics.RedisError(true)
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// isConnReply reports server replies that mean "not usable right now".
func isConnReply(msg string) bool {
	for _, p := range []string{"LOADING", "MASTERDOWN", "NOAUTH", "WRONGPASS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// NotAJobError says that the key where a job record was expected holds
// something else (a queue, a counter, another program's key): the key is
// skipped and left as it is, and a command answers "not a job".
type NotAJobError struct{ Key string }

func (e *NotAJobError) Error() string { return e.Key + " is not a job" }

// isWrongType reports Redis's WRONGTYPE reply: a key of another type than
// the command expects.
// wrongTypeSkipped reports whether err is a WRONGTYPE reply to a read of
// key, a key we share with upstream's programs (pipelines, working, a
// queue, the counters, tweets:done) or one of ours that another program
// wrote with another type. Such a key reads as empty, so the reply, the
// page or /metrics goes on; the skip is counted
// (archivebot_wrong_type_keys_skipped_total) and logged once per key, as
// the services skip keys that are not jobs.
func (s *Store) wrongTypeSkipped(key string, err error) bool {
	if !isWrongType(err) {
		return false
	}
	label := key
	if strings.HasPrefix(key, PendingNamedPrefix) {
		label = PendingNamedPrefix + "NAME" // any name: keep the series few
	}
	metrics.WrongTypeKeySkipped(label)
	s.wrongMu.Lock()
	_, said := s.wrongKeys[key]
	if !said && len(s.wrongKeys) < maxWrongKeys {
		if s.wrongKeys == nil {
			s.wrongKeys = map[string]struct{}{}
		}
		s.wrongKeys[key] = struct{}{}
	}
	s.wrongMu.Unlock()
	if !said {
		s.log.Warn("skipping a shared key of the wrong type: it reads as empty", "service", "store", "key", key, "err", err)
	}
	return true
}

// maxWrongKeys bounds the wrong-typed keys a store remembers having logged
// (pending:NAME queues are the only ones without a fixed name); past it,
// each further one is logged on every read and still counted.
const maxWrongKeys = 1000

// readErr is the first error among the replies of a pipeline of reads of
// one key each that is neither "no such key" nor a wrong-typed key
// (skipped, see wrongTypeSkipped).
func (s *Store) readErr(cmds []redis.Cmder) error {
	for _, c := range cmds {
		err := c.Err()
		if err == nil || errors.Is(err, redis.Nil) {
			continue
		}
		if args := c.Args(); len(args) > 1 {
			if key, ok := args[1].(string); ok && s.wrongTypeSkipped(key, err) {
				continue
			}
		}
		return err
	}
	return nil
}

// readLists reads the lists keys whole (LRANGE 0 -1) in one pipeline; a
// key that is not a list reads as empty, as with readErr. what names the
// read in errors.
func (s *Store) readLists(ctx context.Context, keys []string, what string) ([][]string, error) {
	ranges := make([]*redis.StringSliceCmd, len(keys))
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ranges[i] = p.LRange(ctx, k, 0, -1)
		}
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return nil, wrap(what, err)
		}
	}
	out := make([][]string, len(keys))
	for i, r := range ranges {
		out[i] = r.Val()
	}
	return out, nil
}

func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

// IsUnavailable reports whether err means Redis could not be reached.
func IsUnavailable(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap("ping", s.rdb.Ping(ctx).Err())
}

// Package coordinator is the only code that reads or writes Redis keys. It
// holds the job store used by the bot's commands, the Lua scripts that make
// every multi-key change atomic, and the background services (reaper,
// notifiers, analyzer) that run inside the control node.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is wrapped by errors caused by Redis being unreachable, so
// that front ends can answer "backend unavailable" instead of failing.
var ErrUnavailable = errors.New("backend unavailable")

// Store is the job store: typed operations over the shared Redis layout.
type Store struct {
	rdb redis.UniversalClient
	// Now is the clock; tests replace it.
	Now func() time.Time
	// WaitReplicas, when positive, makes every user-command write wait
	// (Redis WAIT, at most WaitTimeout) until that many replicas have it;
	// see runWrite. Set it before use.
	WaitReplicas int
	WaitTimeout  time.Duration
	// CommandFence, when set (ha.enabled), gives the fencing token of the
	// user-command writes whose context carries none (see WithFence): a
	// node that lost the lease refuses the commands it still had buffered.
	// Lease.CommandFence is the one to use.
	CommandFence func() string

	indexMu    sync.Mutex
	indexBuilt bool // the queue index was rebuilt by this store

	wrongType onceLog // shared keys of the wrong type, logged once
}

// NewStore returns a store over rdb.
func NewStore(rdb redis.UniversalClient) *Store {
	return &Store{rdb: rdb, Now: time.Now}
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
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

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
	if s.wrongType.first(key) {
		slog.Warn("skipping a shared key of the wrong type: it reads as empty", "service", "store", "key", key, "err", err)
	}
	return true
}

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

// NewJob is everything the bot decided about a job before creating it.
type NewJob struct {
	Ident      string
	URL        string
	URLFile    bool   // a "<" job: URL is a list of URLs
	FetchDepth string // "inf" or "shallow"
	Slug       string
	StartedBy  string
	StartedIn  string
	UserAgent  string
	Note       string
	DelayMin   int
	DelayMax   int
	// Concurrency is the number of workers.
	Concurrency    int
	SettingsAge    int
	NoOffsiteLinks bool
	Patterns       []string
	Queue          string
	// PendingLimit, when positive, refuses the job if KeyPending already
	// holds that many entries (checked in the same atomic step).
	PendingLimit int
	// PerUserLimit, when positive, refuses the job if the nick already
	// has that many jobs queued (checked in the same atomic step).
	PerUserLimit int
	// NickKey is StartedBy folded with the IRC server's CASEMAPPING, the
	// key of the nick's queued jobs; "" means strings.ToLower(StartedBy).
	NickKey string
	// NotifyStart asks for a start notice when a pipeline takes the job.
	NotifyStart bool
}

// UserLimitError refuses a job whose nick already has Queued jobs queued,
// at or above the per-user pending limit.
type UserLimitError struct{ Queued int64 }

func (e *UserLimitError) Error() string {
	return fmt.Sprintf("per-user pending limit: %d jobs already queued", e.Queued)
}

// queuedByTTL bounds how long a nick's set of queued jobs lives after its
// last job was queued.
const queuedByTTL = 30 * 24 * time.Hour

// Register outcomes.
var (
	ErrJobExists   = errors.New("job already exists")
	ErrPendingFull = errors.New("pending queue is full")
)

// Register creates the job record, its ignore set and its queue entry in one
// atomic step (one EVALSHA round trip). It returns ErrJobExists or
// ErrPendingFull without writing anything.
func (s *Store) Register(ctx context.Context, j NewJob) error {
	fields := []string{
		"url", j.URL,
		"fetch_depth", j.FetchDepth,
		"log_key", KeyLog(j.Ident),
		"ignore_patterns_set_key", KeyIgnores(j.Ident),
		"user_agent", j.UserAgent,
		"slug", j.Slug,
		"started_by", j.StartedBy,
		"started_in", j.StartedIn,
		"delay_min", strconv.Itoa(j.DelayMin),
		"delay_max", strconv.Itoa(j.DelayMax),
		"concurrency", strconv.Itoa(j.Concurrency),
		"settings_age", strconv.Itoa(j.SettingsAge),
		"suppress_ignore_reports", "true",
		"queued_at", strconv.FormatInt(s.Now().Unix(), 10),
	}
	if j.URLFile {
		fields = append(fields, "url_file", j.URL)
	}
	if j.Note != "" {
		fields = append(fields, "note", j.Note)
	}
	if j.NoOffsiteLinks {
		fields = append(fields, "no_offsite_links", "true")
	}
	nickKey := j.NickKey
	if nickKey == "" {
		nickKey = strings.ToLower(j.StartedBy)
	}
	notify := "0"
	if j.NotifyStart {
		notify = "1"
	}
	detail := map[string]any{"url": j.URL, "queue": j.Queue, "channel": j.StartedIn}
	argv := make([]any, 0, 6+len(fields)+len(j.Patterns))
	argv = append(argv, j.PendingLimit, j.PerUserLimit, s.entry(j.Ident, EventQueued, j.StartedBy, detail),
		notify, secs(queuedByTTL), len(fields)/2)
	for _, f := range fields {
		argv = append(argv, f)
	}
	for _, p := range j.Patterns {
		argv = append(argv, p)
	}
	keys := []string{KeyJob(j.Ident), KeyIgnores(j.Ident), j.Queue, KeyPending, KeyQueues,
		KeyHistory(j.Ident), KeyOrigin(j.Ident), KeyQueuedBy(nickKey)}
	res, err := s.runWrite(ctx, "register job "+j.Ident, registerScript, registerSrc, keys, argv...).Int64Slice()
	if err != nil {
		return err
	}
	if len(res) != 2 {
		return fmt.Errorf("register job %s: unexpected reply %v", j.Ident, res)
	}
	switch res[0] {
	case -1:
		return ErrJobExists
	case -2:
		return ErrPendingFull
	case -4:
		return &UserLimitError{Queued: res[1]}
	}
	return nil
}

// Exists reports whether the job record exists (EXISTS, not KEYS).
func (s *Store) Exists(ctx context.Context, ident string) (bool, error) {
	n, err := s.rdb.Exists(ctx, KeyJob(ident)).Result()
	return n == 1, wrap("exists "+ident, err)
}

// Job is a job record as stored in Redis.
type Job struct {
	Ident  string
	Fields map[string]string
}

// Get returns a field of the record ("" when absent).
func (j *Job) Get(field string) string { return j.Fields[field] }

// Int returns a numeric field, 0 when absent or not a number.
func (j *Job) Int(field string) int64 {
	v, _ := strconv.ParseFloat(j.Fields[field], 64)
	return int64(v)
}

// Flag reports whether a boolean field is "true".
func (j *Job) Flag(field string) bool { return j.Fields[field] == "true" }

// URL is the job's URL.
func (j *Job) URL() string { return j.Fields["url"] }

// JobState is where a job is in its life.
type JobState int

// Job states, in the order a job passes through them.
const (
	StateQueued JobState = iota
	StateRunning
	StateFinished
	StateAborted
	StateFailed
)

// State derives the job's state from its fields.
func (j *Job) State() JobState {
	switch {
	case j.Flag("failed"):
		return StateFailed
	case j.Get("finished_at") != "" && j.Flag("aborted"):
		return StateAborted
	case j.Get("finished_at") != "":
		return StateFinished
	case j.Get("started_at") != "" || j.Get("pipeline_id") != "":
		return StateRunning
	}
	return StateQueued
}

// Finished reports whether the job will not run any more.
func (j *Job) Finished() bool { return j.State() >= StateFinished }

// GetJob reads a job record; it returns nil, nil when there is none, and
// a *NotAJobError when the key holds something else.
func (s *Store) GetJob(ctx context.Context, ident string) (*Job, error) {
	m, err := s.rdb.HGetAll(ctx, KeyJob(ident)).Result()
	if isWrongType(err) {
		return nil, &NotAJobError{Key: KeyJob(ident)}
	}
	if err != nil {
		return nil, wrap("get job "+ident, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return &Job{Ident: ident, Fields: m}, nil
}

// Pipeline is a pipeline record (doc/protocol.md, Pipelines).
type Pipeline struct {
	Key    string
	Fields map[string]string
}

// Nickname is the pipeline's nickname.
func (p *Pipeline) Nickname() string { return p.Fields["nickname"] }

// GetPipeline reads the pipeline record at key; nil, nil when there is none.
func (s *Store) GetPipeline(ctx context.Context, key string) (*Pipeline, error) {
	if !strings.HasPrefix(key, PipelinePrefix) {
		return nil, nil
	}
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, wrap("get pipeline "+key, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return &Pipeline{Key: key, Fields: m}, nil
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

// Summary is what !status without arguments reports.
type Summary struct {
	Completed, Aborted, Failed int64
	Working                    int64
	Pending, PendingAO, Large  int64
	// Named is the number of jobs in pending:NAME queues, NamedQueues the
	// non-empty ones with their lengths.
	Named       int64
	NamedQueues []NamedQueue
}

// Summary counts jobs by state and queue, every queue included, in two
// round trips whatever the size of the keyspace.
func (s *Store) Summary(ctx context.Context) (Summary, error) {
	named, err := s.NamedQueueLens(ctx)
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, KeyJobsCompleted)
		p.Get(ctx, KeyJobsAborted)
		p.Get(ctx, KeyJobsFailed)
		p.LLen(ctx, KeyWorking)
		p.LLen(ctx, KeyPending)
		p.LLen(ctx, KeyPendingAO)
		p.LLen(ctx, KeyPendingLarge)
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return sum, wrap("status summary", err)
		}
	}
	counter := func(c redis.Cmder) int64 {
		n, _ := c.(*redis.StringCmd).Int64()
		return n
	}
	sum.Completed = counter(cmds[0])
	sum.Aborted = counter(cmds[1])
	sum.Failed = counter(cmds[2])
	sum.Working = cmds[3].(*redis.IntCmd).Val()
	sum.Pending = cmds[4].(*redis.IntCmd).Val()
	sum.PendingAO = cmds[5].(*redis.IntCmd).Val()
	sum.Large = cmds[6].(*redis.IntCmd).Val()
	for _, q := range named {
		sum.Named += q.Len
	}
	sum.NamedQueues = named
	return sum, nil
}

// Queue is one pending queue as !pending shows it.
type Queue struct {
	Name string
	Len  int64
	// Jobs holds up to the requested number of jobs, next to run first.
	Jobs []QueuedJob
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
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range names {
			lens[i] = p.LLen(ctx, q)
			// The right end is the head: the last `limit` entries.
			heads[i] = p.LRange(ctx, q, int64(-limit), -1)
		}
		return nil
	})
	if err != nil {
		if err = s.readErr(cmds); err != nil {
			return nil, wrap("list queues", err)
		}
	}
	var out []Queue
	var idents []string
	for i, q := range names {
		if lens[i].Val() == 0 {
			continue
		}
		ids := heads[i].Val()
		jobs := make([]QueuedJob, 0, len(ids))
		for k := len(ids) - 1; k >= 0; k-- {
			jobs = append(jobs, QueuedJob{Ident: ids[k]})
			idents = append(idents, ids[k])
		}
		out = append(out, Queue{Name: q, Len: lens[i].Val(), Jobs: jobs})
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

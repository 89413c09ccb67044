package store

// The job record: registering a job (!a), reading it (one job, the jobs
// running, the read models of the HTTP API) and the reaper's death timers.
// Every method documents its Redis round trips; none uses KEYS.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// IgnoreSets returns the ignore patterns of each ident, sorted, and
// whether each ident is known (has a job record, an ignore set or a
// failure record). One pipeline (SMEMBERS + EXISTS ×2 per ident).
func (s *Store) IgnoreSets(ctx context.Context, idents []string) (map[string][]string, map[string]bool, error) {
	members := make([]*redis.StringSliceCmd, len(idents))
	exists := make([]*redis.IntCmd, len(idents))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range idents {
			members[i] = p.SMembers(ctx, KeyIgnores(id))
			exists[i] = p.Exists(ctx, KeyJob(id), KeyIgnores(id), KeyFailed(id))
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, nil, wrap("read ignore patterns", err)
	}
	pats := make(map[string][]string, len(idents))
	known := make(map[string]bool, len(idents))
	for i, id := range idents {
		m := members[i].Val()
		slices.Sort(m)
		pats[id] = m
		known[id] = exists[i].Val() > 0
	}
	return pats, known, nil
}

// JobDetail is everything /jobs/IDENT shows about one job.
type JobDetail struct {
	Ident string
	// Job is the record; nil when only a failure record is left.
	Job     *Job
	Failure *Failure
	Ignores []string
	// History is the job's history, oldest first (doc/protocol.md, Job
	// history); it outlives the record of an aborted or failed job.
	History []HistoryEntry
	// TTL is the time left before the record expires (and the URL can be
	// archived again); negative when it has no expiry.
	TTL time.Duration
	// Queue and Position (1 = next to run) for a queued job; Queue is ""
	// when it is in no pending queue.
	Queue    string
	Position int64
	QueueLen int64
	// Working reports whether the ident is in `working`.
	Working bool
}

// State is the job's state (StateOf its record, failure record and
// place in `working`).
func (d *JobDetail) State() JobState { return StateOf(d.Job, d.Failure, d.Working) }

// Record is the job record to show: the record, else the copy the
// failure record keeps.
func (d *JobDetail) Record() *Job { return recordOf(d.Ident, d.Job, d.Failure) }

// JobDetail reads one job. It returns nil, nil when there is neither a job
// record nor a failure record that speaks (Speaking: a ghost hash is no
// record, a failure record beside a newer registration is none).
// Round trips: one pipeline (HGETALL, SMEMBERS, PTTL, HGETALL of the
// failure record, LRANGE of the history, LPOS + LLEN in working and the three fixed queues);
// for a queued job found in none of them, the queue index (one read) and one
// more pipeline over the named queues.
func (s *Store) JobDetail(ctx context.Context, ident string) (*JobDetail, error) {
	queues := append([]string{KeyWorking}, FixedQueues...)
	var (
		job, fail *redis.MapStringStringCmd
		ign, hist *redis.StringSliceCmd
		ttl       *redis.DurationCmd
		pos, lens []*redis.IntCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		job = p.HGetAll(ctx, KeyJob(ident))
		ign = p.SMembers(ctx, KeyIgnores(ident))
		ttl = p.PTTL(ctx, KeyJob(ident))
		fail = p.HGetAll(ctx, KeyFailed(ident))
		hist = p.LRange(ctx, KeyHistory(ident), 0, -1)
		pos, lens = lposAll(ctx, p, queues, ident)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read job "+ident, err)
	}
	d := &JobDetail{Ident: ident, Failure: parseFailure(ident, fail.Val()), TTL: ttl.Val(), History: parseHistory(hist.Val())}
	if m := job.Val(); len(m) > 0 {
		d.Job = DecodeJob(ident, m)
	}
	d.Job, d.Failure = Speaking(d.Job, d.Failure)
	if d.Job == nil && d.Failure == nil {
		return nil, nil
	}
	d.Ignores = ign.Val()
	slices.Sort(d.Ignores)
	found := d.place(queues, pos, lens)
	if d.Job != nil && !found && d.Job.State() == StateQueued {
		named, err := s.NamedQueues(ctx)
		if err != nil {
			return nil, err
		}
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			pos, lens = lposAll(ctx, p, named, ident)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
			return nil, wrap("find queue of "+ident, err)
		}
		d.place(named, pos, lens)
	}
	return d, nil
}

func lposAll(ctx context.Context, p redis.Pipeliner, queues []string, ident string) (pos, lens []*redis.IntCmd) {
	pos = make([]*redis.IntCmd, len(queues))
	lens = make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		pos[i] = p.LPos(ctx, q, ident, redis.LPosArgs{})
		lens[i] = p.LLen(ctx, q)
	}
	return pos, lens
}

// place records where ident was found; the right end of a queue is its
// head, so an LPOS index i in a list of n is position n-i.
func (d *JobDetail) place(queues []string, pos, lens []*redis.IntCmd) bool {
	for i, q := range queues {
		idx, err := pos[i].Result()
		if err != nil {
			continue
		}
		if q == KeyWorking {
			d.Working = true
			continue
		}
		d.Queue, d.QueueLen = q, lens[i].Val()
		d.Position = d.QueueLen - idx
		return true
	}
	return false
}

// ActiveJob is one queued or running job as /jobs lists it.
type ActiveJob struct {
	Ident string
	// Queue is the pending queue holding it, "working" when running.
	Queue string
	// Position in its queue, 1 = next to run (0 for running jobs).
	Position int64
	// Job holds the fields of activeFields only (those present): its
	// State() tells queued, running and finished apart, not aborted or
	// failed.
	Job *Job
}

// State is running for a job in `working`, queued for one in a pending
// queue: where ActiveJobs found it, whatever its record says.
func (a ActiveJob) State() JobState {
	if a.Queue == KeyWorking {
		return StateRunning
	}
	return StateQueued
}

// activeFields are the job fields ActiveJobs reads.
var activeFields = []string{"url", "started_by", "started_in", "queued_at", "started_at", "pipeline_id", "fetch_depth", "note", "finished_at"}

// ActiveJobs lists every queued job (queues in the order a pipeline checks
// them: named queues, pending-large, pending, pending-ao; next first) and
// every running job (`working`), with a few fields each. Jobs without a
// record, or whose hash is a ghost (Job.Ghost), are left out.
// Round trips: the queue index (one read), one pipeline of LRANGEs, one
// pipeline of HMGET.
func (s *Store) ActiveJobs(ctx context.Context) ([]ActiveJob, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	names := append(append(named, FixedQueues...), KeyWorking)
	lists, err := s.readLists(ctx, names, "list queues")
	if err != nil {
		return nil, err
	}
	var out []ActiveJob
	for i, q := range names {
		ids := lists[i]
		if q == KeyWorking {
			for _, id := range dedupe(ids) {
				out = append(out, ActiveJob{Ident: id, Queue: q})
			}
			continue
		}
		for k := len(ids) - 1; k >= 0; k-- {
			out = append(out, ActiveJob{Ident: ids[k], Queue: q, Position: int64(len(ids) - k)})
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(out))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, j := range out {
			cmds[i] = p.HMGet(ctx, KeyJob(j.Ident), activeFields...)
		}
		return nil
	})
	if err != nil && !isWrongType(err) {
		return nil, wrap("read active jobs", err)
	}
	kept := out[:0]
	for i, j := range out {
		if j.Job = hmgetJob(j.Ident, activeFields, cmds[i].Val()); j.Job == nil || j.Job.Ghost() {
			continue
		}
		kept = append(kept, j)
	}
	return kept, nil
}

// hmgetJob decodes the reply of HMGET IDENT fields…: the record with
// those of fields it has, nil when it has none of them.
func hmgetJob(ident string, fields []string, vals []any) *Job {
	m := make(map[string]string, len(fields))
	for k, f := range fields {
		if k < len(vals) {
			if v, ok := vals[k].(string); ok {
				m[f] = v
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return DecodeJob(ident, m)
}

// WorkingJobs lists the idents in `working` (jobs a pipeline has taken).
func (s *Store) WorkingJobs(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.LRange(ctx, KeyWorking, 0, -1).Result()
	if s.wrongTypeSkipped(KeyWorking, err) {
		return nil, nil
	}
	return ids, wrap("list working", err)
}

// DeadJob is a working job whose death timer reached the threshold.
type DeadJob struct {
	Ident, URL, StartedBy, StartedIn string
	PipelineID, PipelineNick         string
	// Checks is the job's death_timer: checks without heartbeat progress.
	Checks int64
	// Reported is true once its death was announced.
	Reported bool
}

// AdvanceDeathTimers is one death-timer check of every job in `working`,
// in one round trip (reap.lua). It returns the jobs whose timer reached
// threshold and whose death was not announced yet; with includeReported
// also those already announced.
func (s *Store) AdvanceDeathTimers(ctx context.Context, threshold int, includeReported bool) ([]DeadJob, error) {
	include := "0"
	if includeReported {
		include = "1"
	}
	res, err := reapScript.Run(ctx, s.rdb, []string{KeyWorking, KeyReaperReported}, threshold, include).Slice()
	if err != nil {
		return nil, wrap("reaper cycle", err)
	}
	dead := make([]DeadJob, 0, len(res))
	for _, row := range res {
		f, ok := row.([]any)
		if !ok || len(f) < 8 {
			return nil, fmt.Errorf("reaper cycle: unexpected reply %v", row)
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		checks, _ := f[6].(int64)
		reported, _ := f[7].(int64)
		dead = append(dead, DeadJob{
			Ident: str(0), URL: str(1), StartedBy: str(2), StartedIn: str(3),
			PipelineID: str(4), PipelineNick: str(5),
			Checks: checks, Reported: reported == 1,
		})
	}
	return dead, nil
}

// GhostScan is how many of the newest idents of the finished index
// RemoveGhosts looks at.
const GhostScan = 10000

// RemoveGhosts deletes the ghost job hashes (Job.Ghost), with their logs,
// among the newest GhostScan idents of the finished index and the members
// of `working`, in one round trip (reap_ghosts.lua). It returns the idents
// whose ghost it removed, and the members of `working` that are not jobs
// (keys of another type, which the death timer skips).
func (s *Store) RemoveGhosts(ctx context.Context) (removed, bad []string, err error) {
	res, err := reapGhostsScript.Run(ctx, s.rdb, []string{KeyFinishedIndex, KeyWorking}, GhostScan,
		KeyLog("")).Slice()
	if err != nil {
		return nil, nil, wrap("remove ghost jobs", err)
	}
	strs := func(v any) []string {
		l, _ := v.([]any)
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	if len(res) != 3 {
		return nil, nil, fmt.Errorf("remove ghost jobs: unexpected reply %v", res)
	}
	removed, bad = strs(res[0]), strs(res[2])
	n, _ := res[1].(int64)
	for i := int64(len(bad)); i < n; i++ {
		bad = append(bad, "") // counted, not named
	}
	return removed, bad, nil
}

// MarkDeathReported remembers that the death of ident was announced.
func (s *Store) MarkDeathReported(ctx context.Context, ident string) error {
	err := reapReportedScript.Run(ctx, s.rdb, []string{KeyReaperReported}, ident).Err()
	return wrap("remember dead job "+ident, err)
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
			cmds[i] = p.HMGet(ctx, KeyJob(id), runningFields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, wrap("read working jobs", err)
	}
	out := make([]RunningJob, 0, len(ids))
	for i, id := range ids {
		if cmds[i].Err() != nil || len(cmds[i].Val()) < len(runningFields) {
			continue
		}
		j := hmgetJob(id, runningFields, cmds[i].Val())
		if j == nil {
			j = DecodeJob(id, nil)
		}
		out = append(out, RunningJob{Ident: id, URL: j.URL.Value, PipelineID: j.PipelineID.Value, StartedAt: j.StartedAt.Value})
	}
	return out, nil
}

// runningFields are the job fields RunningJobs reads.
var runningFields = []string{"url", "pipeline_id", "started_at"}

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
	// ByOp: a channel operator queued it (the take rule's per-user
	// running limit may exempt it; doc/pipeline-api.md, The take rule).
	ByOp bool
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
// ErrPendingFull without writing anything. A ghost hash (Job.Ghost) does
// not exist for it: the same step deletes the ghost (with its log and
// ignore set) and registers over it. The same step deletes the ident's
// failure record, which speaks only until a newer registration.
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
	op := "0"
	if j.ByOp {
		op = "1"
	}
	argv := make([]any, 0, 8+len(fields)+len(j.Patterns))
	argv = append(argv, j.PendingLimit, j.PerUserLimit, s.entry(j.Ident, EventQueued, j.StartedBy, detail),
		notify, secs(queuedByTTL), nickKey, op, len(fields)/2)
	for _, f := range fields {
		argv = append(argv, f)
	}
	for _, p := range j.Patterns {
		argv = append(argv, p)
	}
	keys := []string{KeyJob(j.Ident), KeyIgnores(j.Ident), j.Queue, KeyPending, KeyQueues,
		KeyHistory(j.Ident), KeyOrigin(j.Ident), KeyQueuedBy(nickKey), KeyLog(j.Ident), KeyFailed(j.Ident),
		KeyPaused, KeyPausedQueue(j.Queue), KeyPausedQueue(KeyPending)}
	res, err := s.runWrite(ctx, "register job "+j.Ident, registerScript, keys, argv...).Int64Slice()
	s.notifyQueued()
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

// Exists reports whether the job record exists (EXISTS and HEXISTS url in
// one round trip, not KEYS): a ghost hash (Job.Ghost) is no record; a key
// of another type is there (register refuses it).
func (s *Store) Exists(ctx context.Context, ident string) (bool, error) {
	var ex *redis.IntCmd
	var reg *redis.BoolCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ex = p.Exists(ctx, KeyJob(ident))
		reg = p.HExists(ctx, KeyJob(ident), "url")
		return nil
	})
	if isWrongType(reg.Err()) {
		return ex.Val() == 1, nil
	}
	if err != nil {
		return false, wrap("exists "+ident, err)
	}
	return reg.Val(), nil
}

// GetJob reads a job record; it returns nil, nil when there is none or
// the hash is a ghost (Job.Ghost), and a *NotAJobError when the key holds
// something else.
func (s *Store) GetJob(ctx context.Context, ident string) (*Job, error) {
	m, err := s.rdb.HGetAll(ctx, KeyJob(ident)).Result()
	if isWrongType(err) {
		return nil, &NotAJobError{Key: KeyJob(ident)}
	}
	if err != nil {
		return nil, wrap("get job "+ident, err)
	}
	if j := DecodeJob(ident, m); !j.Ghost() && len(m) > 0 {
		return j, nil
	}
	return nil, nil
}

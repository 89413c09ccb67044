package store

// The job record: registering a job (!a), reading it (one job, the jobs
// running) and the reaper's death timers; the read models of the web API
// and the admin CLI are in jobviews.go.
// Every method documents its Redis round trips; none uses KEYS.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/record"
)

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
			j = record.DecodeJob(id, nil)
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
func (s *Store) GetJob(ctx context.Context, ident string) (*record.Job, error) {
	m, err := s.rdb.HGetAll(ctx, KeyJob(ident)).Result()
	if isWrongType(err) {
		return nil, &NotAJobError{Key: KeyJob(ident)}
	}
	if err != nil {
		return nil, wrap("get job "+ident, err)
	}
	if j := record.DecodeJob(ident, m); !j.Ghost() && len(m) > 0 {
		return j, nil
	}
	return nil, nil
}

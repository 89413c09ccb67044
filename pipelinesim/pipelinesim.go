// Package pipelinesim simulates an ArchiveBot pipeline: the Python + wpull
// crawler that takes jobs from Redis, reports progress into it and marks
// jobs done (doc/protocol.md, What a pipeline does). Tests in any package drive it step by step
// (Report, Take, Heartbeat, Log, Abort, Done, Exit, or simply stop calling
// it to "crash"); Pipeline.Run runs it on its own, and the package-level
// Run is the `archivebot simulate-pipeline` subcommand.
//
// Every step is one Lua script with the semantics of upstream's pipeline
// (its log, abort and mark-done scripts), so that the control node is
// tested against what real pipelines do. The simulator spells the Redis
// keys itself instead of importing package coordinator: it stands for a
// program we do not control, and a key the control node misspells must
// make the tests fail rather than agree with itself.
package pipelinesim

import (
	"context"
	"crypto/md5"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The wire format (doc/protocol.md), as a pipeline spells it.
const (
	keyWorking             = "working"
	keyPending             = "pending"
	keyPendingAO           = "pending-ao"
	keyPendingLarge        = "pending-large"
	keyPipelines           = "pipelines"
	keyJobsCompleted       = "jobs_completed"
	keyJobsAborted         = "jobs_aborted"
	keyFinishNotifications = "finish_notifications"
	channelUpdates         = "updates"
	channelPipelineUpdates = "archivebot:pipeline_updates"
	pendingNamedPrefix     = "pending:"
	pipelinePrefix         = "pipeline:"

	// CompletedExpiry is how long a completed job's keys live (48 h).
	CompletedExpiry = 172800 * time.Second
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func keyLog(ident string) string     { return ident + "_log" }
func keyIgnores(ident string) string { return ident + "_ignores" }
func channelJob(ident string) string { return "archivebot:job:" + ident }
func keyPipeline(id string) string   { return pipelinePrefix + id }
func jobLogKey(j map[string]string, ident string) string {
	if k := j["log_key"]; k != "" {
		return k
	}
	return keyLog(ident)
}

// scripts holds the Lua scripts that mirror upstream's pipeline.
//
//go:embed scripts/*.lua
var scripts embed.FS

// script loads scripts/name.lua.
func script(name string) *redis.Script {
	src, err := scripts.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return redis.NewScript(string(src))
}

var (
	reportScript = script("report")
	takeScript   = script("take")
	logScript    = script("log")
	abortScript  = script("abort")
	doneScript   = script("done")
	exitScript   = script("exit")
)

// Config describes one simulated pipeline.
type Config struct {
	// Nickname is the pipeline's name; pending:NAME queues whose NAME is a
	// substring of it are its own. Default "simpipe".
	Nickname string
	// ID is the md5 hex part of the pipeline key; default md5(Nickname).
	ID string
	// Version is reported as `version`; default "20250101.01".
	Version string
	// Hostname is reported as `hostname` and `fqdn`; default "sim.invalid".
	Hostname string
	// AOOnly pipelines take only !ao jobs (pending-ao, and pending-large
	// when Large).
	AOOnly bool
	// Large pipelines also take pending-large.
	Large bool
	// Now is the clock for ts, started_at and finished_at; default time.Now.
	Now func() time.Time
	// Upstream sends exactly the commands upstream's pipeline sends:
	// plain commands for the report, the take and the record (SCAN
	// pending:*, RPOPLPUSH, HMSET, HGETALL, DEL, SADD, SREM, PUBLISH), and
	// its three Lua scripts by their SHA1 (EVALSHA of UpstreamSHA…, whose
	// text the simulator does not have). It is for `archivebot bridge`,
	// which knows those SHA1s; a Redis where upstream's pipeline never
	// loaded them answers NOSCRIPT.
	Upstream bool
}

// The SHA1s of upstream's pipeline scripts (pipeline/archivebot/control.py:
// MARK_DONE_SCRIPT, MARK_ABORTED_SCRIPT, LOGGER_SCRIPT), as redis-py's
// register_script sends them with EVALSHA. Spelled here, not imported: the
// simulator stands for upstream's pipeline.
const (
	UpstreamSHAMarkDone    = "988576b47e799af8a2e75e51a00270229eff4b4f" // KEYS ident; ARGV expire_time, log_channel, finished_at, info, log_key
	UpstreamSHAMarkAborted = "1aec4a5b4bd49991a398ee21bd367773b009b300" // KEYS ident; ARGV log_channel
	UpstreamSHALog         = "f6fda5256637da887e5745b23660c71a16a25ed0" // KEYS ident; ARGV message, log_channel, log_key
)

// defaults fills in the fields both kinds of pipeline default alike.
func (cfg *Config) defaults() {
	if cfg.Version == "" {
		cfg.Version = "20250101.01"
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "sim.invalid"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
}

// Pipeline is one simulated pipeline.
type Pipeline struct {
	rdb redis.UniversalClient
	cfg Config
	key string

	crashMu sync.Mutex
	crashed bool
	crash   context.CancelFunc // cancels a running Run
}

// New returns a pipeline over rdb. It does nothing until asked.
func New(rdb redis.UniversalClient, cfg Config) *Pipeline {
	if cfg.Nickname == "" {
		cfg.Nickname = "simpipe"
	}
	if cfg.ID == "" {
		cfg.ID = md5hex(cfg.Nickname)
	}
	cfg.defaults()
	return &Pipeline{rdb: rdb, cfg: cfg, key: keyPipeline(cfg.ID)}
}

// Key is the pipeline's record key, pipeline:<md5hex>; jobs it takes get
// it as pipeline_id.
func (p *Pipeline) Key() string { return p.key }

// Nickname is the pipeline's nickname.
func (p *Pipeline) Nickname() string { return p.cfg.Nickname }

func (p *Pipeline) unixFloat() string {
	return strconv.FormatFloat(unixSeconds(p.cfg.Now()), 'f', 3, 64)
}

// unixSeconds is t as UNIX seconds with a fraction, as Python's time.time().
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// Report writes the pipeline record, adds it to `pipelines` and publishes
// its key (step 1). Status is "Running" or "Stopping".
func (p *Pipeline) Report(ctx context.Context, status string) error {
	if status == "" {
		status = "Running"
	}
	fields := []any{
		"id", p.key,
		"nickname", p.cfg.Nickname,
		"version", p.cfg.Version,
		"hostname", p.cfg.Hostname,
		"fqdn", p.cfg.Hostname,
		"pid", strconv.Itoa(os.Getpid()),
		"python", "3.9.2 (simulated, " + runtime.Version() + ")",
		"ts", strconv.FormatInt(p.cfg.Now().Unix(), 10),
		"status", status,
		"mem_usage", "0.25",
		"mem_available", "4000000000",
		"disk_usage", "0.5",
		"disk_available", "100000000000",
		"load_average_1m", "0.5",
		"load_average_5m", "0.4",
		"load_average_15m", "0.3",
	}
	if p.cfg.Upstream {
		// pipeline_report: HMSET, SADD, PUBLISH, as separate commands.
		if err := p.rdb.HMSet(ctx, p.key, fields...).Err(); err != nil {
			return err
		}
		if err := p.rdb.SAdd(ctx, keyPipelines, p.key).Err(); err != nil {
			return err
		}
		return p.rdb.Publish(ctx, channelPipelineUpdates, p.key).Err()
	}
	args := append([]any{channelPipelineUpdates}, fields...)
	return reportScript.Run(ctx, p.rdb, []string{p.key, keyPipelines}, args...).Err()
}

// Exit deletes the pipeline record and publishes its key (step 7).
func (p *Pipeline) Exit(ctx context.Context) error {
	if p.cfg.Upstream {
		// unregister_pipeline: DEL, SREM, PUBLISH.
		for _, err := range []error{p.rdb.Del(ctx, p.key).Err(), p.rdb.SRem(ctx, keyPipelines, p.key).Err(),
			p.rdb.Publish(ctx, channelPipelineUpdates, p.key).Err()} {
			if err != nil {
				return err
			}
		}
		return nil
	}
	return exitScript.Run(ctx, p.rdb, []string{p.key, keyPipelines}, channelPipelineUpdates).Err()
}

// Queues lists, in order, the queues the pipeline checks: its pending:NAME
// queues (NAME a substring of its nickname, sorted), pending-large if it is
// large, pending, pending-ao; AO-only pipelines check pending-large (if
// large) and pending-ao only.
func (p *Pipeline) Queues(ctx context.Context) ([]string, error) {
	var out []string
	if !p.cfg.AOOnly {
		var named []string
		iter := p.rdb.Scan(ctx, 0, pendingNamedPrefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			q := iter.Val()
			if strings.Contains(p.cfg.Nickname, strings.TrimPrefix(q, pendingNamedPrefix)) {
				named = append(named, q)
			}
		}
		if err := iter.Err(); err != nil {
			return nil, err
		}
		sort.Strings(named)
		out = append(out, named...)
	}
	if p.cfg.Large {
		out = append(out, keyPendingLarge)
	}
	if !p.cfg.AOOnly {
		out = append(out, keyPending)
	}
	return append(out, keyPendingAO), nil
}

// Job is a job the pipeline took.
type Job struct {
	Ident string
	// Queue it came from.
	Queue string
	// Fields is the record as read when the job was taken.
	Fields map[string]string

	p       *Pipeline
	logKey  string
	aborted bool
	age     int64
	// sent counts the log entries sent in Upstream mode.
	sent int64
	// noIgnoreReports is the job's suppress_ignore_reports as last read
	// (set, in any form, means off, as upstream's pipeline reads it).
	noIgnoreReports bool
	// resumed: taken before this Pipeline value existed (Resume).
	resumed bool
}

// IgnoreReports reports whether the pipeline writes ignore entries for
// this job: not while suppress_ignore_reports is set (the default for
// every new job; !igon clears it).
func (j *Job) IgnoreReports() bool { return !j.noIgnoreReports }

// Take reserves the next job with RPOPLPUSH into working, in queue order,
// sets started_at and pipeline_id and reads the record (step 2). It
// returns nil, nil when every queue is empty.
func (p *Pipeline) Take(ctx context.Context) (*Job, error) {
	queues, err := p.Queues(ctx)
	if err != nil {
		return nil, err
	}
	if p.cfg.Upstream {
		return p.takeUpstream(ctx, queues)
	}
	keys := append([]string{keyWorking}, queues...)
	res, err := takeScript.Run(ctx, p.rdb, keys, p.unixFloat(), p.key).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(res) < 2 {
		return nil, fmt.Errorf("take: unexpected reply %v", res)
	}
	j := &Job{p: p, Fields: map[string]string{}}
	j.Queue, _ = res[0].(string)
	j.Ident, _ = res[1].(string)
	for i := 2; i+1 < len(res); i += 2 {
		k, _ := res[i].(string)
		v, _ := res[i+1].(string)
		j.Fields[k] = v
	}
	j.logKey = jobLogKey(j.Fields, j.Ident)
	j.age, _ = strconv.ParseInt(j.Fields["settings_age"], 10, 64)
	j.noIgnoreReports = j.Fields["suppress_ignore_reports"] != ""
	return j, nil
}

// takeUpstream is upstream's reserve_job and complete_reservation:
// RPOPLPUSH of each queue in order until one gives a job, then HMSET of
// started_at and pipeline_id and HGETALL, as separate commands.
func (p *Pipeline) takeUpstream(ctx context.Context, queues []string) (*Job, error) {
	for _, q := range queues {
		ident, err := p.rdb.RPopLPush(ctx, q, keyWorking).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := p.rdb.HMSet(ctx, ident, "started_at", p.unixFloat(), "pipeline_id", p.key).Err(); err != nil {
			return nil, err
		}
		fields, err := p.rdb.HGetAll(ctx, ident).Result()
		if err != nil {
			return nil, err
		}
		j := &Job{p: p, Ident: ident, Queue: q, Fields: fields}
		j.logKey = jobLogKey(j.Fields, j.Ident)
		j.age, _ = strconv.ParseInt(j.Fields["settings_age"], 10, 64)
		j.noIgnoreReports = j.Fields["suppress_ignore_reports"] != ""
		return j, nil
	}
	return nil, nil
}

// Resume returns a job this pipeline took earlier and still crawls (its
// ident is in working with this pipeline's key as pipeline_id): the
// record as read now, with no settings age known, so that the next
// SettingsChanged reads the settings.
func (p *Pipeline) Resume(ctx context.Context, ident string) (*Job, error) {
	fields, err := p.rdb.HGetAll(ctx, ident).Result()
	if err != nil {
		return nil, err
	}
	if fields["pipeline_id"] != p.key {
		return nil, fmt.Errorf("resume %s: its pipeline_id is %q, not %s", ident, fields["pipeline_id"], p.key)
	}
	if fields["finished_at"] != "" {
		return nil, fmt.Errorf("resume %s: it is finished", ident)
	}
	j := &Job{p: p, Ident: ident, Queue: keyWorking, Fields: fields, resumed: true}
	j.logKey = jobLogKey(fields, ident)
	j.noIgnoreReports = fields["suppress_ignore_reports"] != ""
	return j, nil
}

// Heartbeat increments the job's heartbeat (step 3).
func (j *Job) Heartbeat(ctx context.Context) error {
	return j.p.rdb.HIncrBy(ctx, j.Ident, "heartbeat", 1).Err()
}

// Log ships one raw log entry (step 4) and returns its score. The entry is
// stored as given: tests use it for entries that are not JSON.
//
// Upstream: EVALSHA of upstream's log script, which answers nothing; the
// number returned is then the count of entries this job sent.
func (j *Job) Log(ctx context.Context, entry string) (int64, error) {
	if j.p.cfg.Upstream {
		err := j.p.rdb.EvalSha(ctx, UpstreamSHALog, []string{j.Ident}, entry, channelUpdates, j.logKey).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		j.sent++
		return j.sent, nil
	}
	return logScript.Run(ctx, j.p.rdb, []string{j.Ident, j.logKey}, entry, channelUpdates).Int64()
}

// DownloadEntry is a wpull download log entry.
type DownloadEntry struct {
	Type         string  `json:"type"`
	URL          string  `json:"url"`
	ResponseCode int     `json:"response_code"`
	WgetCode     string  `json:"wget_code"`
	IsError      bool    `json:"is_error"`
	IsWarning    bool    `json:"is_warning"`
	TS           float64 `json:"ts"`
}

// IgnoreEntry is the log entry for a URL skipped by an ignore pattern.
type IgnoreEntry struct {
	Type    string  `json:"type"`
	URL     string  `json:"url"`
	Pattern string  `json:"pattern"`
	Source  string  `json:"source"`
	TS      float64 `json:"ts"`
}

// StdoutEntry is a line (or lines) the crawler printed.
type StdoutEntry struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	TS      int64  `json:"ts"`
}

// Lines upstream pipelines print that its dashboard reacts to: a job
// starting, finishing (greyed) and stopping on request (purpled).
const (
	StdoutReceived = "Received item '%s' from tracker\n"
	StdoutFinished = "Finished RsyncUpload for Item %s\n"
	StdoutAborted  = "ERROR Script requested immediate stop\n"
)

// LogStdout ships a stdout entry.
func (j *Job) LogStdout(ctx context.Context, message string) (int64, error) {
	b, _ := json.Marshal(StdoutEntry{Type: "stdout", Message: message, TS: j.p.cfg.Now().Unix()})
	return j.Log(ctx, string(b))
}

// LogDownload ships a download entry for url with the response code
// (0 = network error); is_error is set for 0 and 5xx, is_warning for 4xx.
func (j *Job) LogDownload(ctx context.Context, url string, code int) (int64, error) {
	e := DownloadEntry{Type: "download", URL: url, ResponseCode: code, WgetCode: "OK",
		IsError: code == 0 || code >= 500, IsWarning: code >= 400 && code < 500,
		TS: unixSeconds(j.p.cfg.Now())}
	if code == 0 {
		e.WgetCode = "NETWORK_ERROR"
	}
	b, _ := json.Marshal(e)
	return j.Log(ctx, string(b))
}

// LogIgnore ships an ignore entry.
func (j *Job) LogIgnore(ctx context.Context, url, pattern, source string) (int64, error) {
	b, _ := json.Marshal(IgnoreEntry{Type: "ignore", URL: url, Pattern: pattern, Source: source,
		TS: unixSeconds(j.p.cfg.Now())})
	return j.Log(ctx, string(b))
}

// AddCounters adds to the job's byte and item counters.
func (j *Job) AddCounters(ctx context.Context, bytes, itemsDownloaded, itemsQueued int64) error {
	_, err := j.p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		pl.HIncrBy(ctx, j.Ident, "bytes_downloaded", bytes)
		pl.HIncrBy(ctx, j.Ident, "items_downloaded", itemsDownloaded)
		pl.HIncrBy(ctx, j.Ident, "items_queued", itemsQueued)
		return nil
	})
	return err
}

// Settings are what a crawler re-reads when the settings age grows.
type Settings struct {
	DelayMin, DelayMax, Concurrency string
	Age                             int64
	AbortRequested                  bool
	SuppressIgnoreReports           bool
	IgnorePatterns                  []string
}

// Settings reads the job's settings as upstream's pipeline does.
func (j *Job) Settings(ctx context.Context) (Settings, error) {
	v, err := j.p.rdb.HMGet(ctx, j.Ident, "delay_min", "delay_max", "concurrency", "settings_age",
		"abort_requested", "suppress_ignore_reports", "ignore_patterns_set_key").Result()
	if err != nil {
		return Settings{}, err
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	s := Settings{DelayMin: str(0), DelayMax: str(1), Concurrency: str(2),
		AbortRequested: str(4) != "", SuppressIgnoreReports: str(5) != ""}
	s.Age, _ = strconv.ParseInt(str(3), 10, 64)
	if k := str(6); k != "" {
		if s.IgnorePatterns, err = j.p.rdb.SMembers(ctx, k).Result(); err != nil {
			return s, err
		}
		sort.Strings(s.IgnorePatterns)
	}
	return s, nil
}

// SettingsChanged handles a settings age published on archivebot:job:IDENT:
// when it is newer than the one the job knows, the settings are re-read,
// and an abort_requested job is aborted and marked done. It reports whether
// the job ended.
func (j *Job) SettingsChanged(ctx context.Context, age int64) (ended bool, err error) {
	if age <= j.age {
		return false, nil
	}
	s, err := j.Settings(ctx)
	if err != nil {
		return false, err
	}
	j.age = max(age, s.Age)
	j.noIgnoreReports = s.SuppressIgnoreReports
	if !s.AbortRequested {
		return false, nil
	}
	if _, err := j.LogStdout(ctx, StdoutAborted); err != nil {
		return false, err
	}
	if err := j.Abort(ctx); err != nil {
		return false, err
	}
	return true, j.Done(ctx)
}

// Abort records that the crawl stopped on request (step 5).
func (j *Job) Abort(ctx context.Context) error {
	var err error
	if j.p.cfg.Upstream {
		err = j.p.rdb.EvalSha(ctx, UpstreamSHAMarkAborted, []string{j.Ident}, channelUpdates).Err()
	} else {
		err = abortScript.Run(ctx, j.p.rdb, []string{j.Ident}, channelUpdates).Err()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	j.aborted = true
	return nil
}

// FinishNotice is the document a pipeline RPUSHes on finish_notifications.
type FinishNotice struct {
	Aborted    bool    `json:"aborted"`
	FetchDepth string  `json:"fetch_depth"`
	PipelineID string  `json:"pipeline_id"`
	QueuedAt   any     `json:"queued_at"`
	StartedBy  string  `json:"started_by"`
	StartedIn  string  `json:"started_in"`
	URL        string  `json:"url"`
	URLFile    *string `json:"url_file"`
}

// Notice is the finish notification Done will push.
func (j *Job) Notice() FinishNotice {
	n := FinishNotice{Aborted: j.aborted, FetchDepth: j.Fields["fetch_depth"], PipelineID: j.p.key,
		StartedBy: j.Fields["started_by"], StartedIn: j.Fields["started_in"], URL: j.Fields["url"]}
	n.QueuedAt = j.Fields["queued_at"]
	if q, err := strconv.ParseInt(j.Fields["queued_at"], 10, 64); err == nil {
		n.QueuedAt = q
	}
	if f, ok := j.Fields["url_file"]; ok {
		n.URLFile = &f
	}
	return n
}

// Done marks the job done (step 6): finished_at, out of working, counter,
// expiry (5 s when aborted, 48 h otherwise), finish notification, publish.
func (j *Job) Done(ctx context.Context) error {
	b, err := json.Marshal(j.Notice())
	if err != nil {
		return err
	}
	if j.p.cfg.Upstream {
		err := j.p.rdb.EvalSha(ctx, UpstreamSHAMarkDone, []string{j.Ident}, int64(CompletedExpiry/time.Second),
			channelUpdates, j.p.unixFloat(), string(b), j.logKey).Err()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	}
	keys := []string{j.Ident, j.logKey, keyIgnores(j.Ident), keyWorking, keyJobsAborted,
		keyJobsCompleted, keyFinishNotifications}
	return doneScript.Run(ctx, j.p.rdb, keys, int64(CompletedExpiry/time.Second), channelUpdates,
		j.p.unixFloat(), string(b)).Err()
}

// Aborted reports whether Abort was called.
func (j *Job) Aborted() bool { return j.aborted }

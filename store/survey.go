package store

// The survey of a Redis before a switch-over (`archivebot migrate check`,
// doc/migrating.md): every key read once, nothing written. It gathers
// facts; the command judges them against the configuration.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/record"
)

// Survey is what a read of the whole database found.
type Survey struct {
	Redis RedisFacts `json:"redis"`
	// Keys counts the keys by kind: "job", "ghost", "log", "ignores",
	// "queue", "working", "pipeline", "counter", "notices", "tweets",
	// "ours" (archivebot:…) and "other" (none of these).
	Keys map[string]int `json:"keys"`
	// Other names up to 20 keys of kind "other".
	Other []string `json:"other,omitempty"`
	// Ours counts the node's own keys by their second segment
	// (archivebot:history:… → "history").
	Ours map[string]int `json:"ours,omitempty"`

	// Jobs are the job records (hashes with url), by ident.
	Jobs []SurveyJob `json:"jobs"`
	// Ghosts are hashes with job fields and no url.
	Ghosts []string `json:"ghosts,omitempty"`
	// Queues are the queues (pending, pending-ao, pending-large,
	// pending:NAME) with their members, head (next to run) first.
	Queues []SurveyQueue `json:"queues"`
	// Working lists `working`, as stored (left to right).
	Working []string `json:"working"`
	// Pipelines are the pipeline records (SCAN pipeline:*) and the members
	// of `pipelines`.
	Pipelines []SurveyPipeline `json:"pipelines"`
	// Counters are jobs_completed, jobs_aborted, jobs_failed as stored.
	Counters map[string]string `json:"counters"`
	// Notices are the documents waiting in finish_notifications.
	Notices []string `json:"notices"`
	// Processing counts what waits in the node's delivery lists
	// (archivebot:…:processing, start and admin notices).
	Processing map[string]int `json:"processing,omitempty"`
	// Tweets counts tweets:queue and tweets:done.
	Tweets map[string]int64 `json:"tweets"`
	// FeedNew lists the running jobs whose feed text (the feedText given
	// to Survey) is neither queued, posted, being posted nor given up:
	// the node's tweeter queues one for each once it runs, as upstream's
	// did for a job it saw running.
	FeedNew []string `json:"feed_new,omitempty"`
	// Paused is the node's pauses (queue → record), and PausedJobs the jobs
	// waiting in their lists aside.
	Paused     map[string]string `json:"paused,omitempty"`
	PausedJobs map[string]int    `json:"paused_jobs,omitempty"`
	// WrongTypes are keys whose type is not the one their name says.
	WrongTypes []WrongTypeKey `json:"wrong_types,omitempty"`
	// Subscribers is PUBSUB NUMSUB of the channels pipelines and
	// dashboards use.
	Subscribers map[string]int64 `json:"subscribers"`
	// Clients is CLIENT LIST, or nil with ClientsError when it is refused.
	Clients      []RedisClient `json:"clients,omitempty"`
	ClientsError string        `json:"clients_error,omitempty"`
	// Started and Baseline: the node's start scan state
	// (archivebot:started, archivebot:start_baseline).
	Baseline string `json:"start_baseline,omitempty"`
	// Leader is the lease's value, when a node of ours holds it.
	Leader string `json:"leader,omitempty"`
	// Took is how long the read took.
	Took time.Duration `json:"took_ns"`
}

// RedisFacts are what INFO says.
type RedisFacts struct {
	Version         string `json:"version,omitempty"`
	Mode            string `json:"mode,omitempty"`
	Role            string `json:"role,omitempty"`
	ClusterEnabled  bool   `json:"cluster_enabled,omitempty"`
	MaxmemoryPolicy string `json:"maxmemory_policy,omitempty"`
	// InfoError is set when INFO was refused or said nothing.
	InfoError string `json:"info_error,omitempty"`
}

// SurveyJob is one job record.
type SurveyJob struct {
	Ident  string            `json:"ident"`
	State  string            `json:"state"`
	TTL    time.Duration     `json:"ttl_ns"` // -1: none
	Fields map[string]string `json:"fields"`
	// LogEntries is the length of its log; -1 when the log is not a
	// sorted set.
	LogEntries int64 `json:"log_entries"`
}

// SurveyQueue is one queue.
type SurveyQueue struct {
	Name string   `json:"name"`
	Jobs []string `json:"jobs"`
}

// SurveyPipeline is one pipeline record, or a member of `pipelines`
// without one.
type SurveyPipeline struct {
	Key       string            `json:"key"`
	InSet     bool              `json:"in_set"`
	HasRecord bool              `json:"has_record"`
	Fields    map[string]string `json:"fields,omitempty"`
}

// WrongTypeKey is a key whose type is not what its name says.
type WrongTypeKey struct {
	Key  string `json:"key"`
	Type string `json:"type"`
	Want string `json:"want"`
}

// RedisClient is one line of CLIENT LIST.
type RedisClient struct {
	Addr string `json:"addr"`
	Name string `json:"name,omitempty"`
	Age  int64  `json:"age"`
	Idle int64  `json:"idle"`
	Sub  int64  `json:"sub"`
	Cmd  string `json:"cmd"`
}

// The channels whose subscribers the survey counts: `updates` has upstream's
// log processes (analyzer, trimmer, firehose, recorder, the cogs'
// tweeter) and the node; `archivebot:pipeline_updates` dashboards.
var surveyChannels = []string{ChannelUpdates, ChannelPipelineUpdates}

// survey batches: keys typed per round trip, hashes read per round trip.
const (
	surveyScanCount = 1000
	surveyBatch     = 500
	surveyOther     = 20
)

// expectedType is the type a key's name says, "" when the name says none.
func expectedType(k string) string {
	switch k {
	case KeyPending, KeyPendingAO, KeyPendingLarge, KeyWorking, KeyFinishNotifications,
		KeyFinishProcessing, KeyAdminNotices, KeyAdminNoticesProcessing, KeyStartNotifications, KeyStartProcessing:
		return "list"
	case KeyPipelines, KeyQueues, KeyStarted, KeyReaperReported:
		return "set"
	case KeyJobsCompleted, KeyJobsAborted, KeyJobsFailed, KeyLeader, KeyLeaderToken, KeyStartBaseline:
		return "string"
	case KeyTweetsQueue, KeyTweetsDone, KeyFinishedIndex:
		return "zset"
	case KeyPaused, KeyPipelineNotices:
		return "hash"
	}
	switch {
	case strings.HasPrefix(k, PendingNamedPrefix), strings.HasPrefix(k, PausedPrefix):
		return "list"
	case strings.HasPrefix(k, PipelinePrefix), strings.HasPrefix(k, FailedPrefix), strings.HasPrefix(k, "archivebot:origin:"):
		return "hash"
	case strings.HasPrefix(k, "archivebot:history:"):
		return "list"
	}
	return ""
}

// isIdent reports whether k could be a job's ident (lowercase base 36).
func isIdent(k string) bool {
	return k != "" && strings.Trim(k, "0123456789abcdefghijklmnopqrstuvwxyz") == ""
}

// jobLike reports whether a hash without url has a field only a job
// record has (what a pipeline's late write re-creates).
func jobLike(fields map[string]string) bool {
	for _, f := range []string{"heartbeat", "log_score", "finished_at", "bytes_downloaded", "items_downloaded",
		"items_queued", "started_at", "pipeline_id", "aborted", "death_timer"} {
		if _, ok := fields[f]; ok {
			return true
		}
	}
	return false
}

// Survey reads every key of the database once (SCAN, TYPE, then each
// value) and writes nothing. Keys that change while it reads are read as
// they are then: it is a picture of a running system, not one moment.
// feedText, when not nil, is the feed's text for a job's URL ("Archiving
// URL"): the survey then lists the running jobs whose text is not known
// yet (FeedNew).
func (s *Store) Survey(ctx context.Context, feedText func(url string) string) (*Survey, error) {
	start := time.Now()
	sv := &Survey{Keys: map[string]int{}, Ours: map[string]int{}, Counters: map[string]string{},
		Tweets: map[string]int64{}, Subscribers: map[string]int64{}, Processing: map[string]int{},
		Jobs: []SurveyJob{}, Queues: []SurveyQueue{}, Working: []string{}, Pipelines: []SurveyPipeline{}, Notices: []string{}}
	sv.Redis = s.redisFacts(ctx)

	var keys []string
	iter := s.rdb.Scan(ctx, 0, "*", surveyScanCount).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, wrap("scan the keyspace", err)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	types, err := s.typesOf(ctx, keys)
	if err != nil {
		return nil, err
	}
	present := make(map[string]string, len(keys))
	for i, k := range keys {
		present[k] = types[i]
	}

	var hashes, queues, pipes []string
	for _, k := range keys {
		typ := present[k]
		if typ == "none" {
			continue // gone since the SCAN
		}
		if want := expectedType(k); want != "" && want != typ {
			sv.WrongTypes = append(sv.WrongTypes, WrongTypeKey{Key: k, Type: typ, Want: want})
		}
		switch {
		case strings.HasPrefix(k, "archivebot:"):
			sv.Keys["ours"]++
			seg, _, _ := strings.Cut(strings.TrimPrefix(k, "archivebot:"), ":")
			sv.Ours[seg]++
		case k == KeyWorking:
			sv.Keys["working"]++
		case k == KeyPending || k == KeyPendingAO || k == KeyPendingLarge || strings.HasPrefix(k, PendingNamedPrefix):
			sv.Keys["queue"]++
			if typ == "list" {
				queues = append(queues, k)
			}
		case k == KeyPipelines:
			sv.Keys["pipeline"]++
		case strings.HasPrefix(k, PipelinePrefix):
			sv.Keys["pipeline"]++
			if typ == "hash" {
				pipes = append(pipes, k)
			}
		case k == KeyJobsCompleted || k == KeyJobsAborted || k == KeyJobsFailed:
			sv.Keys["counter"]++
		case k == KeyFinishNotifications:
			sv.Keys["notices"]++
		case k == KeyTweetsQueue || k == KeyTweetsDone:
			sv.Keys["tweets"]++
		case strings.HasSuffix(k, "_log") && isIdent(strings.TrimSuffix(k, "_log")):
			sv.Keys["log"]++
			if typ != "zset" {
				sv.WrongTypes = append(sv.WrongTypes, WrongTypeKey{Key: k, Type: typ, Want: "zset"})
			}
		case strings.HasSuffix(k, "_ignores") && isIdent(strings.TrimSuffix(k, "_ignores")):
			sv.Keys["ignores"]++
			if typ != "set" {
				sv.WrongTypes = append(sv.WrongTypes, WrongTypeKey{Key: k, Type: typ, Want: "set"})
			}
		case isIdent(k) && typ == "hash":
			hashes = append(hashes, k)
		default:
			sv.Keys["other"]++
			if len(sv.Other) < surveyOther {
				sv.Other = append(sv.Other, k)
			}
		}
	}

	if err := s.surveyLists(ctx, sv, queues, present); err != nil {
		return nil, err
	}
	if err := s.surveyJobs(ctx, sv, hashes, present); err != nil {
		return nil, err
	}
	if err := s.surveyPipelines(ctx, sv, pipes, present); err != nil {
		return nil, err
	}
	if err := s.surveyRest(ctx, sv, present); err != nil {
		return nil, err
	}
	if feedText != nil {
		if err := s.surveyFeed(ctx, sv, feedText); err != nil {
			return nil, err
		}
	}
	sv.Took = time.Since(start)
	return sv, nil
}

// typesOf is TYPE of every key, in batches.
func (s *Store) typesOf(ctx context.Context, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	for from := 0; from < len(keys); from += surveyScanCount {
		to := min(from+surveyScanCount, len(keys))
		cmds := make([]*redis.StatusCmd, to-from)
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys[from:to] {
				cmds[i] = p.Type(ctx, k)
			}
			return nil
		}); err != nil {
			return nil, wrap("type the keys", err)
		}
		for i, c := range cmds {
			out[from+i] = c.Val()
		}
	}
	return out, nil
}

func (s *Store) redisFacts(ctx context.Context) RedisFacts {
	var f RedisFacts
	info, err := s.rdb.Info(ctx).Result()
	if err != nil {
		f.InfoError = err.Error()
		return f
	}
	field := func(name string) string {
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
				return v
			}
		}
		return ""
	}
	f.Version, f.Mode, f.Role = field("redis_version"), field("redis_mode"), field("role")
	f.ClusterEnabled = field("cluster_enabled") == "1"
	f.MaxmemoryPolicy = field("maxmemory_policy")
	if f.Version == "" {
		f.InfoError = "INFO names no redis_version"
	}
	return f
}

func (s *Store) surveyLists(ctx context.Context, sv *Survey, queues []string, present map[string]string) error {
	read := func(k string) ([]string, error) {
		if present[k] != "list" {
			return nil, nil
		}
		l, err := s.rdb.LRange(ctx, k, 0, -1).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, wrap("read "+k, err)
		}
		return l, nil
	}
	for _, q := range queues {
		l, err := read(q)
		if err != nil {
			return err
		}
		slices.Reverse(l) // the right end is the head
		sv.Queues = append(sv.Queues, SurveyQueue{Name: q, Jobs: l})
	}
	var err error
	if sv.Working, err = read(KeyWorking); err != nil {
		return err
	}
	if sv.Working == nil {
		sv.Working = []string{}
	}
	if sv.Notices, err = read(KeyFinishNotifications); err != nil {
		return err
	}
	if sv.Notices == nil {
		sv.Notices = []string{}
	}
	for _, k := range []string{KeyFinishProcessing, KeyStartNotifications, KeyStartProcessing, KeyAdminNotices, KeyAdminNoticesProcessing} {
		if present[k] == "list" {
			n, err := s.rdb.LLen(ctx, k).Result()
			if err != nil {
				return wrap("read "+k, err)
			}
			sv.Processing[k] = int(n)
		}
	}
	return nil
}

func (s *Store) surveyJobs(ctx context.Context, sv *Survey, hashes []string, present map[string]string) error {
	working := make(map[string]bool, len(sv.Working))
	for _, id := range sv.Working {
		working[id] = true
	}
	for from := 0; from < len(hashes); from += surveyBatch {
		batch := hashes[from:min(from+surveyBatch, len(hashes))]
		all := make([]*redis.MapStringStringCmd, len(batch))
		ttls := make([]*redis.DurationCmd, len(batch))
		logs := make([]*redis.IntCmd, len(batch))
		fails := make([]*redis.MapStringStringCmd, len(batch))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range batch {
				all[i] = p.HGetAll(ctx, KeyJob(id))
				ttls[i] = p.PTTL(ctx, KeyJob(id))
				if t := present[KeyLog(id)]; t == "zset" {
					logs[i] = p.ZCard(ctx, KeyLog(id))
				}
				if present[KeyFailed(id)] == "hash" {
					fails[i] = p.HGetAll(ctx, KeyFailed(id))
				}
			}
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			return wrap("read the job records", err)
		}
		for i, id := range batch {
			fields := all[i].Val()
			if len(fields) == 0 {
				continue // gone since the SCAN
			}
			j := record.DecodeJob(id, fields)
			if j.Ghost() && !jobLike(fields) {
				// A hash of another program's whose name happens to look
				// like an ident.
				sv.Keys["other"]++
				if len(sv.Other) < surveyOther {
					sv.Other = append(sv.Other, id)
				}
				continue
			}
			if j.Ghost() {
				sv.Keys["ghost"]++
				sv.Ghosts = append(sv.Ghosts, id)
				continue
			}
			sv.Keys["job"]++
			var fail *record.Failure
			if fails[i] != nil && len(fails[i].Val()) > 0 {
				fail = record.DecodeFailure(id, fails[i].Val())
			}
			sj := SurveyJob{Ident: id, State: record.StateOf(j, fail, working[id]).String(), TTL: ttls[i].Val(), Fields: fields, LogEntries: 0}
			switch {
			case logs[i] != nil:
				sj.LogEntries = logs[i].Val()
			case present[KeyLog(id)] != "" && present[KeyLog(id)] != "none":
				sj.LogEntries = -1
			}
			sv.Jobs = append(sv.Jobs, sj)
		}
	}
	return nil
}

func (s *Store) surveyPipelines(ctx context.Context, sv *Survey, pipes []string, present map[string]string) error {
	var set []string
	if present[KeyPipelines] == "set" {
		var err error
		if set, err = s.rdb.SMembers(ctx, KeyPipelines).Result(); err != nil {
			return wrap("read "+KeyPipelines, err)
		}
	}
	keys := slices.Clone(pipes)
	for _, m := range set {
		if !slices.Contains(keys, m) {
			keys = append(keys, m)
		}
	}
	slices.Sort(keys)
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			if present[k] == "hash" {
				cmds[i] = p.HGetAll(ctx, k)
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return wrap("read the pipeline records", err)
	}
	for i, k := range keys {
		p := SurveyPipeline{Key: k, InSet: slices.Contains(set, k)}
		if cmds[i] != nil {
			p.Fields = cmds[i].Val()
			p.HasRecord = len(p.Fields) > 0
		}
		sv.Pipelines = append(sv.Pipelines, p)
	}
	return nil
}

func (s *Store) surveyRest(ctx context.Context, sv *Survey, present map[string]string) error {
	for _, k := range []string{KeyJobsCompleted, KeyJobsAborted, KeyJobsFailed} {
		if present[k] == "string" {
			v, err := s.rdb.Get(ctx, k).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return wrap("read "+k, err)
			}
			sv.Counters[k] = v
		}
	}
	for _, k := range []string{KeyTweetsQueue, KeyTweetsDone} {
		if present[k] == "zset" {
			n, err := s.rdb.ZCard(ctx, k).Result()
			if err != nil {
				return wrap("read "+k, err)
			}
			sv.Tweets[k] = n
		}
	}
	if present[KeyPaused] == "hash" {
		m, err := s.rdb.HGetAll(ctx, KeyPaused).Result()
		if err != nil {
			return wrap("read "+KeyPaused, err)
		}
		sv.Paused = m
	}
	for k, typ := range present {
		if strings.HasPrefix(k, PausedPrefix) && typ == "list" {
			n, err := s.rdb.LLen(ctx, k).Result()
			if err != nil {
				return wrap("read "+k, err)
			}
			if sv.PausedJobs == nil {
				sv.PausedJobs = map[string]int{}
			}
			sv.PausedJobs[strings.TrimPrefix(k, PausedPrefix)] = int(n)
		}
	}
	for _, k := range []struct {
		key string
		to  *string
	}{{KeyStartBaseline, &sv.Baseline}, {KeyLeader, &sv.Leader}} {
		if present[k.key] == "string" {
			v, err := s.rdb.Get(ctx, k.key).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return wrap("read "+k.key, err)
			}
			*k.to = v
		}
	}
	subs, err := s.rdb.PubSubNumSub(ctx, surveyChannels...).Result()
	if err != nil {
		return wrap("count the subscribers", err)
	}
	for k, v := range subs {
		sv.Subscribers[k] = v
	}
	clients, err := s.Clients(ctx)
	if errors.Is(err, ErrClientsRefused) {
		sv.ClientsError = err.Error() // refused (ACL), or not supported
		return nil
	}
	if err != nil {
		return err
	}
	sv.Clients = clients
	return nil
}

// surveyFeed lists the running jobs whose feed text is not known yet:
// the jobs tweet_queue.lua would queue a text for (in working, started,
// not finished, aborted, aborting or failed) whose text is neither in
// tweets:queue, tweets:done, archivebot:tweets:attempt nor
// archivebot:tweets:failed. One pipeline; nothing is written.
func (s *Store) surveyFeed(ctx context.Context, sv *Survey, feedText func(string) string) error {
	working := make(map[string]bool, len(sv.Working))
	for _, id := range sv.Working {
		working[id] = true
	}
	type probe struct {
		ident string
		cmds  [4]redis.Cmder
	}
	var probes []probe
	set := func(v string) bool { return v != "" }
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, j := range sv.Jobs {
			f := j.Fields
			if !working[j.Ident] || !set(f["url"]) || !set(f["started_at"]) || set(f["finished_at"]) ||
				f["aborted"] == "true" || f["abort_requested"] == "true" || f["failed"] == "true" {
				continue
			}
			text := feedText(f["url"])
			probes = append(probes, probe{j.Ident, [4]redis.Cmder{
				p.ZScore(ctx, KeyTweetsQueue, text), p.ZScore(ctx, KeyTweetsDone, text),
				p.HExists(ctx, KeyTweetsAttempt, text), p.ZScore(ctx, KeyTweetsFailed, text)}})
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return wrap("read the feed's texts", err)
	}
	for _, pr := range probes {
		known := false
		for _, c := range pr.cmds {
			switch c := c.(type) {
			case *redis.FloatCmd:
				known = known || c.Err() == nil
			case *redis.BoolCmd:
				known = known || c.Val()
			}
		}
		if !known {
			sv.FeedNew = append(sv.FeedNew, pr.ident)
		}
	}
	slices.Sort(sv.FeedNew)
	return nil
}

// parseClientList reads CLIENT LIST: one client a line, name=value pairs.
func parseClientList(list string) []RedisClient {
	var out []RedisClient
	for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var c RedisClient
		for _, kv := range strings.Fields(l) {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "addr":
				c.Addr = v
			case "name":
				c.Name = v
			case "age":
				c.Age = n
			case "idle":
				c.Idle = n
			case "sub", "psub":
				c.Sub += n
			case "cmd":
				c.Cmd = v
			}
		}
		out = append(out, c)
	}
	return out
}

// String is a one-line summary, for logs.
func (sv *Survey) String() string {
	return fmt.Sprintf("%d jobs, %d queues, %d working, %d pipelines, %d notices", len(sv.Jobs), len(sv.Queues), len(sv.Working), len(sv.Pipelines), len(sv.Notices))
}

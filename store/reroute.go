package store

// Reroute (!reroute, `archivebot reroute`): take a job away from the
// pipeline that appears banned from its site and queue it again at the
// front, with a pipeline key made to avoid the site (doc/pipeline-api.md,
// A ban shows itself; doc/commands.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/sitematch"
)

// EventRerouted is the history event of a reroute.
const EventRerouted = "rerouted"

// RerouteResetFields are the fields of a run a reroute removes from a
// running job's record, so that the next take starts as a new run would:
// RequeueResetFields but queued_at, which a reroute keeps (the job is
// the same job, queued when it was), and finished_at, failed and aborted,
// which a job that can be rerouted has not. The URL, depth, who queued
// it where, delays, concurrency, user agent, note and ignore patterns
// stay.
var RerouteResetFields = []string{
	"started_at", "pipeline_id", "heartbeat", "last_acknowledged_heartbeat", "death_timer",
	"bytes_downloaded", "items_downloaded", "items_queued", "log_score",
	"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count",
	"last_analyzed_log_entry", "last_broadcasted_log_entry", "last_trimmed_log_entry", "ts",
}

// Reroute refusals besides ErrNoJob, ErrJobFinished and *NotAJobError
// (nothing is written).
var (
	// ErrAbortRequested: an abort was asked for; the job is ending.
	ErrAbortRequested = errors.New("an abort was requested: the job is ending")
	// ErrNotRunningOrQueued: the job is in no queue and no pipeline
	// holds it.
	ErrNotRunningOrQueued = errors.New("the job is neither queued nor running")
	// ErrNoSuchPipelineKey: the key named to avoid the site is not a
	// registered pipeline key.
	ErrNoSuchPipelineKey = errors.New("no such pipeline key")
	// ErrRerouteNothing: a queued job and no key named to avoid its
	// site: no pipeline holds it, so nothing would change.
	ErrRerouteNothing = errors.New("the job is queued, not running: no pipeline holds it; name the pipeline key that must avoid its site")
)

// DirectPipelineError refuses to reroute a job that a pipeline runs
// straight from Redis (or whose pipeline_id is no API key's record): the
// node cannot tell it to let go, and its later writes, its mark-done
// above all, would land on the queued job's record.
type DirectPipelineError struct{ PipelineID string }

func (e *DirectPipelineError) Error() string {
	return fmt.Sprintf("it runs on %s, which is no pipeline API key: a pipeline that takes straight from Redis cannot be told to let go, and its later writes would land on the queued job (abort it and queue its URL again)", e.PipelineID)
}

// AvoidFullError refuses a reroute whose rule would not fit in the
// avoiding key's list.
type AvoidFullError struct {
	Key string
	N   int64
}

func (e *AvoidFullError) Error() string {
	return fmt.Sprintf("pipeline key %s's avoid list is full (%d rules, at most %d); remove some with `archivebot pipeline-key set %s avoid=...`",
		e.Key, e.N, MaxAvoidRules, e.Key)
}

// RerouteResult says what a reroute did.
type RerouteResult struct {
	Ident string `json:"ident"`
	URL   string `json:"url"`
	// Running: the job was running and was taken back from From (a
	// pipeline key name); else it was queued and moved.
	Running bool   `json:"running"`
	From    string `json:"from,omitempty"`
	// Queue is the queue the job waits in now, at the head.
	Queue string `json:"queue"`
	// Avoid is the key made to avoid the site ("" none), Rule the rule
	// ("" when the host has no registered domain: NoRule says why) and
	// RuleAdded whether the list did not have it before.
	Avoid     string `json:"avoid,omitempty"`
	Rule      string `json:"rule,omitempty"`
	RuleAdded bool   `json:"rule_added"`
	NoRule    string `json:"no_rule,omitempty"`
	// Notice is the line queued for the job's channel in the reroute's
	// own step (RerouteReported); nil from Reroute.
	Notice *AdminNotice `json:"notice,omitempty"`
}

// RerouteRule is the avoid rule of a job URL: the registered domain of its
// host (SiteOf, as the ban line names it), checked by sitematch.Parse.
// An IP address or a host that is a public suffix has none: the reason
// is returned instead.
func RerouteRule(url string) (rule, why string) {
	site := SiteOf(url)
	if site == "" {
		return "", "the job's URL has no host"
	}
	r, err := sitematch.Parse(site)
	if err != nil {
		return "", fmt.Sprintf("its host %s has no registered domain to avoid", site)
	}
	return r, ""
}

// Reroute takes ident away from the pipeline API key that holds it and
// queues it again at the head of its queue (taken next), with the key
// avoid (the holder when "") made to avoid the job's site; a queued job
// moves to the head of its queue, with avoid (required) made to avoid the
// site. One atomic step (reroute.lua) that also records by in the job's
// history; see RerouteResetFields for what a running job's record loses.
// Nothing is said in the job's channel: !reroute replies there.
func (s *Store) Reroute(ctx context.Context, ident, avoid, by string) (*RerouteResult, error) {
	return s.reroute(ctx, ident, avoid, by, false)
}

// RerouteReported is Reroute for a command whose report would otherwise
// be its reply only (`archivebot reroute`): the line for the job's
// channel (started_in, the nick that queued it first as requeue's line
// does; RerouteNoticeText) is queued for the admin notifier in the
// reroute's own atomic step, only when the job is rerouted, and returned
// in the result's Notice. The script picks the line for what it finds (a
// running job taken back or a queued job moved) and refuses, so that the
// caller reads again, when the channel or nick is not what was read.
func (s *Store) RerouteReported(ctx context.Context, ident, avoid, by string) (*RerouteResult, error) {
	return s.reroute(ctx, ident, avoid, by, true)
}

// RerouteNoticeText is the channel's line for r, rerouted by the
// operator by, for the job queued by nick ("" none): e.g. "erin: Job X
// for URL was rerouted by op (operator): taken from pipe-a and queued
// again at the front of pending; pipe-a avoids example.com." It says
// "avoids", true whether or not the list had the rule before.
func RerouteNoticeText(r *RerouteResult, by, nick string) string {
	s := "Job " + r.Ident + " for " + r.URL + " was rerouted by " + by + " (operator): "
	if nick != "" {
		s = nick + ": " + s
	}
	if r.Running {
		s += "taken from " + r.From + " and queued again at the front of " + r.Queue
	} else {
		s += "moved to the front of " + r.Queue
	}
	switch {
	case r.Avoid == "":
	case r.Rule == "":
		s += "; " + r.Avoid + " was given no rule: " + r.NoRule
	default:
		s += "; " + r.Avoid + " avoids " + r.Rule
	}
	return s + "."
}

func (s *Store) reroute(ctx context.Context, ident, avoid, by string, report bool) (*RerouteResult, error) {
	named, err := s.NamedQueues(ctx)
	if err != nil {
		return nil, err
	}
	var url, pid, depth, origin, startedIn, startedBy string
	var keyNames []string
	{
		var job *redis.SliceCmd
		var oq *redis.StringCmd
		var act, rev *redis.StringSliceCmd
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			job = p.HMGet(ctx, KeyJob(ident), "url", "pipeline_id", "fetch_depth", "started_in", "started_by")
			oq = p.HGet(ctx, KeyOrigin(ident), "queue")
			act = p.HKeys(ctx, KeyPipelineKeys)
			rev = p.HKeys(ctx, KeyPipelineKeysRevoked)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
			return nil, wrap("read job "+ident, err)
		}
		v := job.Val()
		str := func(i int) string {
			if i < len(v) {
				s, _ := v[i].(string)
				return s
			}
			return ""
		}
		url, pid, depth, origin = str(0), str(1), str(2), oq.Val()
		startedIn, startedBy = str(3), str(4)
		keyNames = append(act.Val(), rev.Val()...)
	}
	queue := origin
	if !IsQueueKey(queue) {
		queue = KeyPending
		if depth == "shallow" {
			queue = KeyPendingAO
		}
	}
	for range 3 {
		holder := ""
		for _, n := range keyNames {
			if pid != "" && APIPipelineKey(n) == pid {
				holder = n
				break
			}
		}
		av := avoid
		if av == "" {
			av = holder
		}
		rule, why := RerouteRule(url)
		heldSet, avoidSet := "", ""
		if holder != "" {
			heldSet = KeyPipelineKeyJobs(holder)
		}
		if av != "" {
			avoidSet = KeyPipelineKeyAvoid(av)
		}
		keys := []string{KeyJob(ident), KeyHistory(ident), KeyOrigin(ident), ChannelJob(ident), KeyWorking,
			heldSet, avoidSet, KeyPipelineKeys, queue, KeyPaused, KeyPausedQueue(queue), KeyQueues,
			KeyLog(ident), KeyBanCheck(ident), ChannelUpdates, KeyAdminNotices}
		for _, q := range append(append([]string{}, FixedQueues...), named...) {
			keys = append(keys, q, KeyPausedQueue(q))
		}
		detail := map[string]any{"queue": queue}
		if holder != "" {
			detail["from"] = holder
		}
		if av != "" {
			detail["avoid"] = av
		}
		if rule != "" {
			detail["rule"] = rule
		}
		// The two lines the script chooses from: a running job taken
		// back from holder, a queued job moved.
		var notices [2]*AdminNotice
		var docs [2]string
		if report {
			for i, running := range []bool{true, false} {
				r := &RerouteResult{Ident: ident, URL: url, Running: running, Queue: queue, Avoid: av, Rule: rule, NoRule: why}
				if running {
					r.From = holder
				}
				n := &AdminNotice{Channel: startedIn, Text: RerouteNoticeText(r, by, startedBy)}
				b, err := json.Marshal(n)
				if err != nil {
					return nil, err
				}
				notices[i], docs[i] = n, string(b)
			}
		}
		argv := []any{url, pid, holder, av, rule, MaxAvoidRules, s.entry(ident, EventRerouted, by, detail),
			docs[0], docs[1], startedIn, startedBy}
		for _, f := range RerouteResetFields {
			argv = append(argv, f)
		}
		res, err := s.runWrite(ctx, "reroute "+ident, rerouteScript, keys, argv...).Slice()
		s.notifyQueued()
		if err != nil {
			return nil, err
		}
		code, _ := res[0].(int64)
		switch code {
		case 1, 2:
			r := &RerouteResult{Ident: ident, URL: url, Running: code == 1, Avoid: av, Rule: rule, NoRule: why}
			r.Queue, _ = res[1].(string)
			added, _ := res[2].(int64)
			r.RuleAdded = added == 1
			if code == 1 {
				r.From = holder
				r.Notice = notices[0]
			} else {
				r.Notice = notices[1]
			}
			return r, nil
		case 0:
			return nil, ErrNoJob
		case -1:
			return nil, ErrJobFinished
		case -3:
			return nil, &NotAJobError{Key: KeyJob(ident)}
		case -4:
			return nil, ErrAbortRequested
		case -5:
			p, _ := res[1].(string)
			return nil, &DirectPipelineError{PipelineID: p}
		case -6:
			return nil, ErrNotRunningOrQueued
		case -7:
			n, _ := res[1].(int64)
			return nil, &AvoidFullError{Key: av, N: n}
		case -8:
			return nil, fmt.Errorf("%w: %s", ErrNoSuchPipelineKey, av)
		case -9:
			url, _ = res[1].(string)
			pid, _ = res[2].(string)
			queue, _ = res[3].(string)
			startedIn, _ = res[4].(string)
			startedBy, _ = res[5].(string)
			continue
		case -10:
			return nil, ErrRerouteNothing
		}
		return nil, fmt.Errorf("reroute %s: unexpected script result %v", ident, res)
	}
	return nil, fmt.Errorf("reroute %s: the job's records kept changing; try again", ident)
}

// Sentence is the reroute's outcome as !reroute and `archivebot reroute`
// say it, e.g. "Job X rerouted: aborted on pipe-a, queued again at the
// front of pending; pipe-a now avoids example.com."
func (r *RerouteResult) Sentence() string {
	s := "Job " + r.Ident + " rerouted: "
	if r.Running {
		s += "aborted on " + r.From + ", queued again at the front of " + r.Queue
	} else {
		s += "moved to the front of " + r.Queue
	}
	switch {
	case r.Avoid == "":
	case r.Rule == "":
		s += "; " + r.Avoid + " avoids nothing new: " + r.NoRule
	case r.RuleAdded:
		s += "; " + r.Avoid + " now avoids " + r.Rule
	default:
		s += "; " + r.Avoid + " already avoided " + r.Rule
	}
	return s + "."
}

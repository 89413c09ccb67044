package main

// `archivebot migrate check`: before a switch-over from upstream's bot to
// this node on the same Redis (doc/migrating.md), read everything once,
// write nothing, and say what the node will find, what it will refuse or
// change when it starts, and what blocks the switch. With -rollback, what
// blocks going back to upstream's bot.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// exitBlocked is the exit status of migrate check when something blocks.
const exitBlocked = 3

// nodeClientName is the name the node's Redis connections carry (CLIENT
// SETNAME), so that CLIENT LIST tells them from upstream's processes.
const nodeClientName = "archivebot"

// cliClientName is the name of the operator commands' connections.
const cliClientName = "archivebot-cli"

// minRedis is the oldest Redis the node's scripts run on: LPOS (6.0.6).
var minRedis = [3]int{6, 0, 6}

// knownJobFields are the job record's fields the node reads or writes
// (doc/protocol.md, Job record); others are kept as they are.
var knownJobFields = []string{"url", "url_file", "fetch_depth", "log_key", "ignore_patterns_set_key",
	"user_agent", "slug", "started_by", "started_in", "queued_at", "delay_min", "delay_max", "concurrency",
	"settings_age", "suppress_ignore_reports", "abort_requested", "note", "no_offsite_links", "started_at",
	"pipeline_id", "heartbeat", "last_acknowledged_heartbeat", "death_timer", "bytes_downloaded",
	"items_downloaded", "items_queued", "log_score", "r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk",
	"error_count", "last_analyzed_log_entry", "last_broadcasted_log_entry", "last_trimmed_log_entry",
	"aborted", "finished_at", "failed", "failed_reason", "ts", "warc_size"}

// counterFields are the fields the node (or a pipeline) adds to with
// HINCRBY: they must hold integers.
var counterFields = []string{"heartbeat", "death_timer", "log_score", "bytes_downloaded", "items_downloaded",
	"items_queued", "r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count", "settings_age"}

// finding is one thing migrate check says: what, the keys or jobs it is
// about (at most 10 named), and what to do.
type finding struct {
	What string   `json:"what"`
	Keys []string `json:"keys,omitempty"`
	More int      `json:"more,omitempty"`
	Do   string   `json:"do,omitempty"`
}

func newFinding(what string, keys []string, do string) finding {
	f := finding{What: what, Do: do}
	if len(keys) > 10 {
		f.Keys, f.More = keys[:10], len(keys)-10
	} else {
		f.Keys = keys
	}
	return f
}

// migrateReport is `archivebot migrate check -json`.
type migrateReport struct {
	Direction string           `json:"direction"` // "switch" or "rollback"
	Redis     store.RedisFacts `json:"redis"`
	Found     foundView        `json:"found"`
	Blocks    []finding        `json:"blocks"`
	Changes   []finding        `json:"changes"`
	Notes     []finding        `json:"notes"`
	Blocked   bool             `json:"blocked"`
	ReadIn    string           `json:"read_in"`
}

// foundView is what the survey found, summed up.
type foundView struct {
	Keys      map[string]int    `json:"keys"`
	Other     []string          `json:"other_keys,omitempty"`
	Ours      map[string]int    `json:"own_keys,omitempty"`
	Jobs      map[string]int    `json:"jobs"`
	Ghosts    int               `json:"ghosts"`
	Queues    []queueView       `json:"queues"`
	Working   int               `json:"working"`
	Pipelines []pipeView        `json:"pipelines"`
	Counters  map[string]string `json:"counters"`
	Notices   int               `json:"finish_notices"`
	Tweets    map[string]int64  `json:"tweets"`
	// FeedNew counts the running jobs whose "Archiving URL" text is not
	// known yet: the node's tweeter queues one for each.
	FeedNew  int            `json:"feed_new"`
	Channels map[string]int `json:"channels"`
	// Subscribers counts the subscribers of updates and
	// archivebot:pipeline_updates; Clients the connections (nil when
	// CLIENT LIST was refused), of which NodeClients are a node's
	// (named archivebot) and OwnClients this check's and other archivebot
	// commands' (named archivebot-cli).
	Subscribers map[string]int64 `json:"subscribers"`
	Clients     *int             `json:"clients,omitempty"`
	NodeClients int              `json:"node_clients"`
	OwnClients  int              `json:"own_clients"`
}

type queueView struct {
	Name   string   `json:"name"`
	Length int      `json:"length"`
	Next   []string `json:"next"`
}

type pipeView struct {
	Key       string   `json:"key"`
	Nickname  string   `json:"nickname,omitempty"`
	Version   string   `json:"version,omitempty"`
	Reported  *float64 `json:"reported_seconds_ago,omitempty"`
	State     string   `json:"state"` // reporting, silent, no record, not in pipelines
	APIKey    string   `json:"api_key,omitempty"`
	Jobs      []string `json:"jobs"`
	Hostname  string   `json:"hostname,omitempty"`
	silentFor time.Duration
}

func runMigrate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("migrate", stdout, stderr)
	rollback := a.fs.Bool("rollback", false, "check: check going back to upstream's bot instead: what the node leaves that upstream's bot, dashboard and pipelines would not read")
	yes := a.fs.Bool("yes", false, "delete-node-keys: delete them (without it, they are only counted)")
	pos, code := a.parse(args, 1)
	if code >= 0 {
		return code
	}
	switch sub := pos[0]; {
	case *rollback && sub != "check":
		a.failf("-rollback is a flag of check (archivebot migrate check -rollback); nothing was done")
		return 2
	case *yes && sub != "delete-node-keys":
		a.failf("-yes is a flag of delete-node-keys; nothing was done")
		return 2
	case sub == "return-notices":
		return a.session(func(ctx context.Context) int { return returnNotices(ctx, a) })
	case sub == "delete-node-keys":
		return a.session(func(ctx context.Context) int { return deleteNodeKeys(ctx, a, *yes) })
	case sub != "check":
		a.failf("unknown subcommand %q: check [-rollback], return-notices or delete-node-keys [-yes] (doc/migrating.md)", sub)
		return 2
	}
	return a.session(func(ctx context.Context) int {
		sv, err := a.store.Survey(ctx, tweeter.ArchivingText)
		if err != nil {
			return a.refusal("", err)
		}
		r := judge(sv, a.cfg, *rollback, time.Now())
		if a.json {
			if a.writeJSON(r) != 0 {
				return 1
			}
		} else {
			printMigrate(a.stdout, r)
		}
		if r.Blocked {
			return exitBlocked
		}
		return 0
	})
}

// judge turns the survey into the report.
func judge(sv *store.Survey, cfg *config.Config, rollback bool, now time.Time) *migrateReport {
	r := &migrateReport{Direction: "switch", Redis: sv.Redis, Blocks: []finding{}, Changes: []finding{}, Notes: []finding{},
		ReadIn: sv.Took.Round(time.Millisecond).String()}
	if rollback {
		r.Direction = "rollback"
	}
	r.Found = found(sv, cfg, now)
	nodeRuns, nodeWhy := nodeRunning(sv)
	if rollback {
		judgeRollback(r, sv, cfg, nodeRuns, nodeWhy)
	} else {
		judgeRedis(r, sv)
		judgeProcesses(r, sv, nodeRuns, nodeWhy)
		judgeTypes(r, sv)
		judgeJobs(r, sv, cfg, now)
		judgeNotices(r, sv, cfg)
		judgeRest(r, sv, cfg)
	}
	r.Blocked = len(r.Blocks) > 0
	return r
}

func found(sv *store.Survey, cfg *config.Config, now time.Time) foundView {
	f := foundView{Keys: sv.Keys, Other: sv.Other, Ours: sv.Ours, Ghosts: len(sv.Ghosts), Working: len(sv.Working),
		Counters: sv.Counters, Notices: len(sv.Notices), Tweets: sv.Tweets, Subscribers: sv.Subscribers,
		Jobs: map[string]int{}, Channels: map[string]int{}, Queues: []queueView{}, Pipelines: []pipeView{}}
	for _, s := range []record.State{record.StateQueued, record.StateRunning, record.StateFinished, record.StateAborted, record.StateFailed} {
		f.Jobs[s.String()] = 0
	}
	for _, j := range sv.Jobs {
		f.Jobs[j.State]++
		if !record.DecodeJob(j.Ident, j.Fields).Finished() {
			f.Channels[j.Fields["started_in"]]++
		}
	}
	for _, q := range sv.Queues {
		f.Queues = append(f.Queues, queueView{Name: q.Name, Length: len(q.Jobs), Next: q.Jobs[:min(3, len(q.Jobs))]})
	}
	if sv.Clients != nil {
		n := len(sv.Clients)
		f.Clients = &n
		for _, c := range sv.Clients {
			switch c.Name {
			case nodeClientName:
				f.NodeClients++
			case cliClientName:
				f.OwnClients++
			}
		}
	}
	f.FeedNew = len(sv.FeedNew)
	f.Pipelines = pipelines(sv, cfg, now)
	return f
}

// pipelines views every pipeline record and every pipeline a running job
// names.
func pipelines(sv *store.Survey, cfg *config.Config, now time.Time) []pipeView {
	byKey := map[string]*pipeView{}
	var out []*pipeView
	add := func(k string) *pipeView {
		if p := byKey[k]; p != nil {
			return p
		}
		p := &pipeView{Key: k, State: "no record", Jobs: []string{}}
		byKey[k] = p
		out = append(out, p)
		return p
	}
	for _, sp := range sv.Pipelines {
		p := add(sp.Key)
		if !sp.HasRecord {
			continue
		}
		p.Nickname, p.Version, p.Hostname, p.APIKey = sp.Fields["nickname"], sp.Fields["version"], sp.Fields["hostname"], sp.Fields["api_key"]
		p.State = "reporting"
		ts, err := strconv.ParseFloat(sp.Fields["ts"], 64)
		if err == nil && ts > 0 {
			ago := now.Sub(time.Unix(int64(ts), 0)).Seconds()
			p.Reported = &ago
			p.silentFor = time.Duration(ago * float64(time.Second))
		}
		if p.Reported == nil || p.silentFor > cfg.Notifier.PipelineSilentAfter.Duration {
			p.State = "silent"
		}
		if !sp.InSet {
			p.State = "not in pipelines"
		}
	}
	working := map[string]bool{}
	for _, id := range sv.Working {
		working[id] = true
	}
	for _, j := range sv.Jobs {
		if pid := j.Fields["pipeline_id"]; pid != "" && working[j.Ident] {
			p := add(pid)
			p.Jobs = append(p.Jobs, j.Ident)
		}
	}
	res := make([]pipeView, len(out))
	for i, p := range out {
		slices.Sort(p.Jobs)
		res[i] = *p
	}
	return res
}

// nodeRunning reports whether a node of this project seems to run on the
// Redis: a connection named as its are, or a leader lease.
func nodeRunning(sv *store.Survey) (bool, string) {
	n := 0
	for _, c := range sv.Clients {
		if c.Name == nodeClientName {
			n++
		}
	}
	switch {
	case n > 0:
		return true, fmt.Sprintf("%d connections named %q", n, nodeClientName)
	case sv.Leader != "":
		return true, "the leader lease is held (" + sv.Leader + ")"
	}
	return false, ""
}

func judgeRedis(r *migrateReport, sv *store.Survey) {
	f := sv.Redis
	switch {
	case f.InfoError != "":
		r.Notes = append(r.Notes, newFinding("INFO could not be read ("+f.InfoError+"): the Redis version, mode and role are not checked", nil,
			fmt.Sprintf("check by hand that it is Redis %d.%d.%d or newer, not a cluster, and the master", minRedis[0], minRedis[1], minRedis[2])))
	case !versionAtLeast(f.Version, minRedis):
		r.Blocks = append(r.Blocks, newFinding(fmt.Sprintf("Redis %s is older than %d.%d.%d, whose LPOS the node's scripts use: they would fail", f.Version, minRedis[0], minRedis[1], minRedis[2]), nil,
			"upgrade Redis first (upstream's bot and pipelines work on the newer one as well)"))
	}
	if f.ClusterEnabled || f.Mode == "cluster" {
		r.Blocks = append(r.Blocks, newFinding("Redis runs as a cluster: the node's scripts touch keys of many slots in one step", nil,
			"run the node on a standalone Redis (or one behind Sentinel)"))
	}
	if f.Role != "" && f.Role != "master" {
		r.Blocks = append(r.Blocks, newFinding("this Redis is a "+f.Role+" (read-only): the node writes", nil,
			"point redis.url at the master, or list the sentinels in redis.sentinels"))
	}
	if strings.HasPrefix(f.MaxmemoryPolicy, "allkeys-") {
		r.Notes = append(r.Notes, newFinding("maxmemory-policy "+f.MaxmemoryPolicy+" evicts any key when memory is full: queues and job records can vanish (with upstream's bot as with the node)", nil,
			"prefer noeviction or volatile-lru"))
	}
}

// versionAtLeast compares a dotted version with min.
func versionAtLeast(v string, min [3]int) bool {
	parts := strings.SplitN(v, ".", 3)
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			n, _ = strconv.Atoi(strings.TrimFunc(parts[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}

func judgeProcesses(r *migrateReport, sv *store.Survey, nodeRuns bool, nodeWhy string) {
	if nodeRuns {
		r.Notes = append(r.Notes, newFinding("a node of this project already runs on this Redis ("+nodeWhy+"): this is not a first switch", nil, ""))
	} else if n := sv.Subscribers[store.ChannelUpdates]; n > 0 {
		r.Blocks = append(r.Blocks, newFinding(fmt.Sprintf("%d connections subscribe to updates and no node of this project runs: upstream's processes still run (each updates-listener: analyzer, trimmer, recorder, log-firehose, set-watermarks; and the cogs); beside the node they would count every response twice and move the log bookmarks under it", n), nil,
			"stop them (doc/migrating.md, Stop upstream's processes; pgrep -af 'updates-listener|cogs/start' lists them)"))
	}
	if sv.Clients == nil {
		r.Notes = append(r.Notes, newFinding("CLIENT LIST was refused ("+sv.ClientsError+"): whether upstream's bot is still connected cannot be seen", nil,
			"make sure it is stopped"))
		return
	}
	var bots []string
	for _, c := range sv.Clients {
		if c.Name != nodeClientName && c.Cmd == "lpop" && c.Idle <= 60 {
			bots = append(bots, c.Addr)
		}
	}
	if len(bots) > 0 {
		r.Blocks = append(r.Blocks, newFinding("upstream's bot seems connected: a client popped finish_notifications in the last minute (its finish notifier does every 30 s); beside the node, both would answer commands and each would say some finish reports", bots,
			"stop upstream's bot (doc/migrating.md, Stop upstream's processes)"))
	}
}

func judgeTypes(r *migrateReport, sv *store.Survey) {
	if len(sv.WrongTypes) > 0 {
		keys := make([]string, len(sv.WrongTypes))
		for i, w := range sv.WrongTypes {
			keys[i] = fmt.Sprintf("%s is a %s, not a %s", w.Key, w.Type, w.Want)
		}
		r.Blocks = append(r.Blocks, newFinding("keys of the wrong type: the node's scripts refuse to write them (a queue that is not a list refuses every !a into it), and readers skip them", keys,
			"look at each (redis-cli TYPE, DUMP), then rename it aside or delete it"))
	}
	var bad []string
	for k, v := range sv.Counters {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			bad = append(bad, fmt.Sprintf("%s = %q", k, v))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		r.Blocks = append(r.Blocks, newFinding("counters that are not integers: INCR on them fails (a pipeline's mark-done, the node's abort and fail)", bad,
			"set each to the count it should have (redis-cli SET jobs_completed N)"))
	}
}

func judgeJobs(r *migrateReport, sv *store.Survey, cfg *config.Config, now time.Time) {
	pipes := map[string]pipeView{}
	for _, p := range r.Found.Pipelines {
		pipes[p.Key] = p
	}
	working := map[string]bool{}
	for _, id := range sv.Working {
		working[id] = true
	}
	jobs := map[string]store.SurveyJob{}
	unknown := map[string][]string{}
	var notInt, dead, noHeartbeat []string
	var deadNow int
	for _, j := range sv.Jobs {
		jobs[j.Ident] = j
		for f := range j.Fields {
			if !slices.Contains(knownJobFields, f) {
				unknown[f] = append(unknown[f], j.Ident)
			}
		}
		for _, f := range counterFields {
			if v, ok := j.Fields[f]; ok {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					notInt = append(notInt, fmt.Sprintf("%s %s = %q", j.Ident, f, v))
				}
			}
		}
		if !working[j.Ident] || j.State != record.StateRunning.String() {
			continue
		}
		if _, ok := j.Fields["heartbeat"]; !ok && j.Fields["started_at"] != "" {
			noHeartbeat = append(noHeartbeat, j.Ident)
		}
		p := pipes[j.Fields["pipeline_id"]]
		timer, _ := strconv.Atoi(j.Fields["death_timer"])
		if p.State == "reporting" && timer == 0 {
			continue
		}
		why := p.State
		if p.State == "silent" && p.Reported != nil {
			why = "silent for " + time.Duration(*p.Reported*float64(time.Second)).Round(time.Second).String()
		}
		if timer >= cfg.Reaper.Threshold {
			deadNow++
		}
		dead = append(dead, fmt.Sprintf("%s on %s (%s), death_timer %d", j.Ident, orDash(p.Nickname, j.Fields["pipeline_id"]), why, timer))
	}
	if len(dead) > 0 {
		do := fmt.Sprintf("the node's reaper goes on counting (reaper.threshold %d checks of %v) and tells the job's channel once at the threshold (%d of them are past it: at its first check)", cfg.Reaper.Threshold, cfg.Reaper.Interval.Duration, deadNow)
		if cfg.Reaper.AutoFail {
			do += "; with reaper.auto_fail it fails the job then. To put one back in its queue: " + typed(cfg, "requeue IDENT") + ", after the start"
		} else {
			do += "; reaper.auto_fail is off: an op can !fail it, or " + typed(cfg, "requeue IDENT") + " puts it back in its queue"
		}
		r.Changes = append(r.Changes, newFinding("running jobs whose pipeline is gone, silent, or whose heartbeat stopped (death_timer above 0)", dead, do))
	}
	if len(noHeartbeat) > 0 {
		r.Changes = append(r.Changes, newFinding("running jobs taken but never heartbeated: upstream's reaper skipped them for ever; the node counts them from the take", noHeartbeat,
			"if a pipeline really runs them, nothing; else they end dead and are reported"))
	}
	if len(notInt) > 0 {
		sort.Strings(notInt)
		r.Changes = append(r.Changes, newFinding("job counters that are not integers: the node's scripts refuse to add to them (the analyzer and the reaper leave that job alone, logged)", notInt,
			"fix the field, or let the job end"))
	}
	if len(unknown) > 0 {
		var list []string
		for f, ids := range unknown {
			list = append(list, fmt.Sprintf("%s (%d jobs, e.g. %s)", f, len(ids), ids[0]))
		}
		sort.Strings(list)
		r.Notes = append(r.Notes, newFinding("job record fields the node does not know: kept as they are, passed through (archivebot job -json, the stream's job_data), never read", list, ""))
	}
	if len(sv.Ghosts) > 0 {
		var inWorking, other []string
		for _, g := range sv.Ghosts {
			if working[g] {
				inWorking = append(inWorking, g)
			} else {
				other = append(other, g)
			}
		}
		if len(inWorking) > 0 {
			r.Changes = append(r.Changes, newFinding("ghost job records (a hash without url, re-created by a pipeline's late writes) in working: the reaper deletes them and their logs within a minute", inWorking, ""))
		}
		if len(other) > 0 {
			r.Changes = append(r.Changes, newFinding("ghost job records (a hash without url) outside working: never shown as jobs; !a of their URL registers over them", other,
				"delete them when convenient (redis-cli DEL IDENT IDENT_log IDENT_ignores)"))
		}
	}
	var notJobs []string
	for _, id := range sv.Working {
		if _, ok := jobs[id]; !ok && !slices.Contains(sv.Ghosts, id) {
			notJobs = append(notJobs, id)
		}
	}
	if len(notJobs) > 0 {
		r.Changes = append(r.Changes, newFinding("members of working that are no job record: every reader skips them, counted in archivebot_bad_members and one log line", notJobs,
			"LREM them from working once you know where they came from"))
	}
	var orphans []string
	for _, q := range sv.Queues {
		for _, id := range q.Jobs {
			if _, ok := jobs[id]; !ok {
				orphans = append(orphans, q.Name+": "+id)
			}
		}
	}
	if len(orphans) > 0 {
		r.Notes = append(r.Notes, newFinding("queue entries without a job record: a pipeline that takes one finds nothing to crawl (as with upstream's bot)", orphans,
			"LREM them from their queue"))
	}
	running := 0
	for _, id := range sv.Working {
		if j, ok := jobs[id]; ok && j.State == record.StateRunning.String() {
			running++
		}
	}
	if sv.Baseline == "" && running > 0 {
		r.Changes = append(r.Changes, newFinding(fmt.Sprintf("%d running jobs were taken before the node's first start: they get no \"has started\" line (a baseline), only a started entry in their history; jobs taken later are announced", running), nil, ""))
	}
	_ = now
}

func judgeNotices(r *migrateReport, sv *store.Survey, cfg *config.Config) {
	var bad, elsewhere, ok []string
	for i, doc := range sv.Notices {
		n, err := coordinator.ParseFinishNotice(doc)
		if err != nil {
			bad = append(bad, fmt.Sprintf("#%d: %v", i+1, err))
			continue
		}
		id := ident.Of(n.URL)
		ok = append(ok, id)
		if !cfg.Console() && !slices.ContainsFunc(cfg.IRC.Channels, func(c string) bool { return channelName(c) == strings.ToLower(n.StartedIn) }) {
			elsewhere = append(elsewhere, fmt.Sprintf("%s for %s", id, n.StartedIn))
		}
	}
	if len(ok) > 0 {
		r.Changes = append(r.Changes, newFinding(fmt.Sprintf("%d finish notices wait in finish_notifications (jobs that ended while no bot ran): the node reports each in its channel once it is connected, at least once", len(ok)), ok, ""))
	}
	if len(bad) > 0 {
		r.Changes = append(r.Changes, newFinding("finish notices the node cannot read: dropped with an error line each (upstream's bot would have failed on them too)", bad, ""))
	}
	if len(elsewhere) > 0 {
		where := "only logged (irc.report_channel is off)"
		if cfg.IRC.ReportChannel != "" {
			where = "said in " + cfg.IRC.ReportChannel + " with [for #channel] before them"
		}
		r.Changes = append(r.Changes, newFinding("finish notices for channels the node does not join: "+where, elsewhere,
			"list upstream's channels in irc.channels"))
	}
	var chans []string
	for ch, n := range r.Found.Channels {
		if !cfg.Console() && !slices.ContainsFunc(cfg.IRC.Channels, func(c string) bool { return channelName(c) == strings.ToLower(ch) }) {
			chans = append(chans, fmt.Sprintf("%s (%d jobs)", orDash(ch, "no channel"), n))
		}
	}
	sort.Strings(chans)
	if len(chans) > 0 {
		r.Notes = append(r.Notes, newFinding("queued and running jobs were started in channels the node does not join: their reports go to irc.report_channel", chans,
			"list upstream's channels in irc.channels"))
	}
}

// channelName is a configured channel's name (a key may follow it),
// lower-cased.
func channelName(c string) string {
	name, _, _ := strings.Cut(c, " ")
	return strings.ToLower(name)
}

func judgeRest(r *migrateReport, sv *store.Survey, cfg *config.Config) {
	nets := feedNetworks(cfg)
	dry := nets[0].Network == "dryrun"
	if n := len(sv.FeedNew); n > 0 {
		what := fmt.Sprintf("%d running jobs have no \"Archiving URL\" text in tweets:queue or tweets:done: once the node runs, its tweeter queues one for each (as upstream's tweeter does for a job it sees running, when it has a Twitter configuration)", n)
		if dry {
			r.Changes = append(r.Changes, newFinding(what+"; no feed network is configured: the dry run moves them to tweets:done, posting nothing (a network configured later never posts them)", sv.FeedNew, ""))
		} else {
			r.Changes = append(r.Changes, newFinding(what+fmt.Sprintf("; the node posts them on %s, within each network's budget: %d posts at the start", feedNames(nets), n), sv.FeedNew,
				"to post none of them: start the node without feed networks first; its dry run records each as posted ("+typed(cfg, "feed")+" shows none pending once it has), then add the networks"))
		}
	}
	if n := sv.Tweets[store.KeyTweetsQueue]; n > 0 {
		if dry {
			r.Changes = append(r.Changes, newFinding(fmt.Sprintf("%d texts wait in tweets:queue and no feed network is configured: the node's dry run moves them to tweets:done without posting them", n), nil,
				"configure [tweeter] (X, Mastodon or Bluesky) before the start to post them"))
		} else {
			r.Notes = append(r.Notes, newFinding(fmt.Sprintf("%d texts wait in tweets:queue: the node posts them on %s, within each network's budget", n, feedNames(nets)), nil, ""))
		}
	}
	var stray []string
	for _, p := range r.Found.Pipelines {
		if p.State == "not in pipelines" {
			stray = append(stray, p.Key)
		}
	}
	if len(stray) > 0 {
		r.Notes = append(r.Notes, newFinding("pipeline records missing from the pipelines set: upstream's dashboard (SCAN pipeline:*) shows them, the node (which reads the set a pipeline's report writes) does not until their next report", stray, ""))
	}
	if sv.Keys["ours"] > 0 {
		var kinds []string
		for k, n := range sv.Ours {
			kinds = append(kinds, fmt.Sprintf("%s (%d)", k, n))
		}
		sort.Strings(kinds)
		r.Notes = append(r.Notes, newFinding(fmt.Sprintf("%d keys of this node (archivebot:…) are already here: it ran on this Redis before", sv.Keys["ours"]), kinds, ""))
	}
	if len(sv.PausedJobs) > 0 {
		var qs []string
		for q, n := range sv.PausedJobs {
			qs = append(qs, fmt.Sprintf("%s (%d jobs aside)", q, n))
		}
		sort.Strings(qs)
		r.Notes = append(r.Notes, newFinding("queues paused by an earlier run of the node stay paused", qs, typed(cfg, "resume QUEUE")+" when they should run"))
	}
	if sv.Keys["other"] > 0 {
		r.Notes = append(r.Notes, newFinding(fmt.Sprintf("%d keys are neither upstream's nor the node's: left alone", sv.Keys["other"]), sv.Other, ""))
	}
}

func judgeRollback(r *migrateReport, sv *store.Survey, cfg *config.Config, nodeRuns bool, nodeWhy string) {
	if nodeRuns {
		r.Blocks = append(r.Blocks, newFinding("a node of this project still runs on this Redis ("+nodeWhy+")", nil,
			"stop it first (SIGTERM; with [ha] every node of the deployment)"))
	} else if sv.Clients == nil {
		r.Notes = append(r.Notes, newFinding("CLIENT LIST was refused ("+sv.ClientsError+"): whether a node of this project still runs can be seen only by the leader lease (not held)", nil,
			"make sure every node is stopped"))
	}
	if len(sv.Paused) > 0 || len(sv.PausedJobs) > 0 {
		var qs, cmds []string
		for q := range sv.Paused {
			cmds = append(cmds, typed(cfg, "resume "+q))
			if _, aside := sv.PausedJobs[q]; !aside {
				qs = append(qs, q+": paused")
			}
		}
		for q, n := range sv.PausedJobs {
			qs = append(qs, fmt.Sprintf("%s: paused, %d jobs aside in archivebot:paused:%s", q, n, q))
		}
		sort.Strings(qs)
		sort.Strings(cmds)
		r.Blocks = append(r.Blocks, newFinding("paused queues: their jobs wait under archivebot:paused:QUEUE, where upstream's bot and pipelines never look (lost to them), and upstream's pipelines do not honour a pause", qs,
			strings.Join(cmds, "; ")+", before stopping the node"))
	}
	var held []string
	for _, p := range r.Found.Pipelines {
		if p.APIKey != "" && len(p.Jobs) > 0 {
			held = append(held, fmt.Sprintf("%s (key %s): %s", p.Key, p.APIKey, strings.Join(p.Jobs, " ")))
		}
	}
	if len(held) > 0 {
		r.Blocks = append(r.Blocks, newFinding("jobs running on pipelines of the node's pipeline API (or the bridge): without the node they can neither report nor finish", held,
			"let them finish, or fail and requeue them ("+typed(cfg, "fail IDENT")+", then "+typed(cfg, "requeue IDENT")+") before the switch back; then point those pipelines at Redis directly"))
	}
	if n := sv.Processing[store.KeyFinishProcessing]; n > 0 {
		r.Blocks = append(r.Blocks, newFinding(fmt.Sprintf("%d finish notices are in archivebot:finish_notifications:processing (taken by a node that stopped before saying them): upstream's bot never reads that list", n), nil,
			typed(cfg, "migrate return-notices")+" puts them back at the head of finish_notifications, in order (or start the node again until they are said)"))
	}
	var lost []string
	for _, k := range []string{store.KeyStartNotifications, store.KeyStartProcessing, store.KeyAdminNotices, store.KeyAdminNoticesProcessing} {
		if n := sv.Processing[k]; n > 0 {
			lost = append(lost, fmt.Sprintf("%s: %d", k, n))
		}
	}
	if len(lost) > 0 {
		r.Notes = append(r.Notes, newFinding("start and operator notices not yet said: upstream's bot has no such notices; they are not said", lost, ""))
	}
	var api []string
	for _, p := range r.Found.Pipelines {
		if p.APIKey != "" && p.State != "no record" {
			api = append(api, p.Key)
		}
	}
	if len(api) > 0 {
		r.Notes = append(r.Notes, newFinding("pipeline records of the node's pipeline API: upstream's bot and dashboard would list them (as silent pipelines) until removed", api,
			typed(cfg, "reap-pipeline ID")+" for each (doc/migrating.md, Rolling back)"))
	}
	if n := sv.Tweets[store.KeyTweetsQueue]; n > 0 {
		r.Notes = append(r.Notes, newFinding(fmt.Sprintf("%d texts wait in tweets:queue (\"Archiving URL\", some perhaps of jobs already over): upstream's tweeter posts them, one every 2 minutes, when its cogs run with a Twitter configuration; without one they stay there unread", n), nil,
			"to post none of them: redis-cli DEL tweets:queue before upstream's cogs start"))
	}
	if n := sv.Keys["ours"]; n > 0 {
		r.Notes = append(r.Notes, newFinding(fmt.Sprintf("%d keys of the node (archivebot:…) stay: none of upstream's readers looks at them", n), nil,
			typed(cfg, "migrate delete-node-keys -yes")+" deletes them, when you are sure you will not switch again (doc/migrating.md, Rolling back)"))
	}
}

// typed is the command line of `archivebot ARGS` as the operator types
// it: with -config and the configuration's file when there is one (an
// operator's command without it would use REDIS_URL, or 127.0.0.1:6379,
// which may be another Redis).
func typed(cfg *config.Config, args string) string {
	if cfg == nil || cfg.File == "" {
		return "archivebot " + args
	}
	f := cfg.File
	if strings.ContainsAny(f, " '\"$\\`;&|<>()*?[]#~!{}") {
		f = "'" + strings.ReplaceAll(f, "'", `'\''`) + "'"
	}
	return "archivebot " + args + " -config " + f
}

// feedNames names the configured feed networks.
func feedNames(nets []feedNetView) string {
	names := make([]string, len(nets))
	for i, n := range nets {
		names[i] = n.Network
	}
	return strings.Join(names, ", ")
}

func orDash(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

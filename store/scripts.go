package store

import (
	"context"
	"embed"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Lua scripts, one file each in scripts/ (each documents its KEYS, ARGV
// and return values).
//
// Every script starts with the prologue libSrc (scripts/lib.lua: the
// shared type checks, and the key names scripts compare against).
//
// Every script that writes is fenced (a one-line change): it is declared
// with fenced(), or command() for a user command. It then starts with
// scripts/fence.lua and refuses to write for a node that lost the leader
// lease (see doc/architecture.md, High availability).
// TestWriteScriptsFenced fails for a script that writes and is not fenced
// (only the lease scripts themselves are exempt).
//
// The scripts of user commands (run with runWrite) include
// scripts/cmdrecord.lua (their outcome record, see outcome.go; it takes
// the two ARGV before the fence's) and then scripts/history.lua after the
// fence prologue.

//go:embed scripts/*.lua
var scriptFiles embed.FS

// lua returns the source of scripts/NAME.lua.
func lua(name string) string {
	src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err) // a name misspelled here: every test fails at once
	}
	return string(src)
}

// Sources that other scripts include.
var (
	cmdRecordSrc = lua("cmdrecord")
	// history.lua follows cmdrecord.lua in the scripts that change jobs.
	historySrc = lua("history")
	// feed_finalize.lua is a library the feed's view and resolve scripts
	// include.
	feedFinalizeSrc = lua("feed_finalize")
	// api_held.lua starts the pipeline API's scripts that need the job
	// held by the calling pipeline.
	apiHeldSrc = lua("api_held")
)

// Job commands (jobs.go, commands.go).
var (
	registerScript   = command("register")
	settingsScript   = command("settings")
	abortScript      = command("abort")
	queueIndexScript = fenced(lua("queue_index"))
	expireScript     = command("expire")
)

// Queue tools (queues.go) and pauses (schedule.go).
var (
	moveScript   = command("move")
	pauseScript  = fenced(lua("pause"))
	resumeScript = fenced(lua("resume"))
)

// Operator commands (commands.go, pipelines.go).
var (
	requeueScript        = fenced(lua("requeue"))
	pipelineRemoveScript = fenced(lua("pipeline_remove"))
	rerouteScript        = command("reroute")
)

// Scripts of the background services and of FailJob.
var (
	// read_log.lua only reads: not fenced.
	readLogScript = plain(lua("read_log"))
	// FailJob is a user command and the reaper's auto-fail.
	failScript         = command("fail")
	reapScript         = fenced(lua("reap"))
	reapReportedScript = fenced(lua("reap_reported"))
	reapGhostsScript   = fenced(lua("reap_ghosts"))
	// The delivery queues' take and acknowledge (queue.go).
	noticeTakeScript    = fenced(lua("notice_take"))
	noticeAckScript     = fenced(lua("notice_ack"))
	analyzeCommitScript = fenced(lua("analyze_commit"))
)

// The start scan and the job-end history step (notices.go, history.go).
var (
	startScanScript = fenced(historySrc + lua("start_scan"))
	jobEndScript    = fenced(historySrc + lua("job_end"))
)

// The live stream's broadcast bookmark (stream.go).
var broadcastScript = fenced(lua("broadcast"))

// relayMarkScript appends the leader's firehose batches to the relay
// stream and moves their bookmarks (relay.go).
var relayMarkScript = fenced(lua("relay_mark"))

// The index of finished jobs and the failure records (history.go, failures.go).
var (
	indexFinishedScript = fenced(lua("index_finished"))
	recordFailureScript = fenced(lua("record_failure"))
)

// Scripts of the tweet feed (tweets.go) and the per-network feed
// progress (feed.go).
var (
	tweetQueueScript  = fenced(lua("tweet_queue"))
	tweetPruneScript  = fenced(lua("tweet_prune"))
	feedViewScript    = fenced(feedFinalizeSrc + lua("feed_view"))
	feedClaimScript   = fenced(lua("feed_claim"))
	feedResolveScript = fenced(feedFinalizeSrc + lua("feed_resolve"))
	feedPruneScript   = fenced(lua("feed_prune"))
	feedSummaryScript = fenced(lua("feed_summary"))
)

// The leader lease's scripts. They are not fenced: they are the fence.
var (
	leaseAcquireScript = plain(lua("lease_acquire"))
	leaseRenewScript   = plain(lua("lease_renew"))
	leaseReleaseScript = plain(lua("lease_release"))
)

// Scripts of the pipeline API (pipelineapi.go; doc/pipeline-api.md).
var (
	apiTakeScript     = fenced(lua("take"))
	apiUpdateScript   = fenced(apiHeldSrc + lua("api_update"))
	apiAbortScript    = fenced(apiHeldSrc + lua("api_abort"))
	apiDoneScript     = fenced(apiHeldSrc + lua("api_done"))
	apiNonceScript    = fenced(lua("api_nonce"))
	apiReportScript   = fenced(lua("api_report"))
	apiKeyStatsScript = fenced(lua("api_key_stats"))
	banCheckScript    = fenced(lua("ban_check"))
	noticeOnceScript  = fenced(lua("notice_once"))
)

// libSrc is the prologue of every script (scripts/lib.lua): the table K
// of the names scripts compare against or publish to, spelled here from
// keys.go (key names reach Lua only from the Go side: keys a script reads
// or writes as KEYS, these as K), then the shared type checks typed and
// expect. It is the same on every load, and so is every script's SHA1.
var libSrc = "local K = {" +
	"pending = " + strconv.Quote(KeyPending) +
	", pending_ao = " + strconv.Quote(KeyPendingAO) +
	", pending_large = " + strconv.Quote(KeyPendingLarge) +
	", named_prefix = " + strconv.Quote(PendingNamedPrefix) +
	", origin_prefix = " + strconv.Quote(KeyOrigin("")) +
	", paused_prefix = " + strconv.Quote(PausedPrefix) +
	", job_events = " + strconv.Quote(ChannelJobEvents) + "}\n" + lua("lib")

// plain declares a script that is not fenced (it only reads, or it is the
// lease itself): src behind the prologue.
func plain(src string) *redis.Script {
	return redis.NewScript(libSrc + src)
}

// fencedScript is a write script with the fence prologue
// (scripts/fence.lua). Its Run takes the same arguments as redis.Script's
// and appends the lease key and the caller's fencing token (WithFence);
// user commands run it with runWrite instead.
type fencedScript struct {
	*redis.Script
	src string // the whole source, prologue included
}

// fencedList holds the source of every fenced script, for the test that
// checks that no writing script was left out.
var fencedList []string

// fenced declares a service write script: src behind the fence and the
// prologue (libSrc).
func fenced(src string) *fencedScript {
	full := lua("fence") + libSrc + src
	fencedList = append(fencedList, full)
	return &fencedScript{Script: redis.NewScript(full), src: full}
}

// command declares the script of a user command, scripts/NAME.lua, run
// with runWrite: fenced, after the command record and the history step.
func command(name string) *fencedScript {
	return fenced(cmdRecordSrc + historySrc + lua(name))
}

// Run runs the script with the fence arguments last (EVALSHA, then EVAL).
func (f *fencedScript) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	keys = append(keys[:len(keys):len(keys)], KeyLeader)
	args = append(args[:len(args):len(args)], fenceToken(ctx))
	return f.Script.Run(ctx, c, keys, args...)
}

type fenceKey struct{}

// WithFence returns a context under which every fenced script checks that
// archivebot:leader still holds value (the lease this node took; see
// Lease). Without it (a single node, the standby's reads) the check is
// skipped.
func WithFence(ctx context.Context, value string) context.Context {
	return context.WithValue(ctx, fenceKey{}, value)
}

func fenceToken(ctx context.Context) string {
	v, _ := ctx.Value(fenceKey{}).(string)
	return v
}

// pipelinedScript runs fill's pipeline of EVALSHAs of script; when Redis
// does not have the script yet (NOSCRIPT, a pipeline cannot fall back to
// EVAL per command) it loads it and runs the pipeline once more.
func (s *Store) pipelinedScript(ctx context.Context, script *redis.Script, fill func(redis.Pipeliner) error) error {
	_, err := s.rdb.Pipelined(ctx, fill)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = script.Load(ctx, s.rdb).Err(); err == nil {
			_, err = s.rdb.Pipelined(ctx, fill)
		}
	}
	return err
}

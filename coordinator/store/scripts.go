package store

import (
	"context"
	_ "embed"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Lua scripts. Each file documents its KEYS, ARGV and return values.
// The scripts of user commands include scripts/cmdrecord.lua (their
// outcome record, see outcome.go; it takes the two ARGV before the
// fence's) after the fence prologue.
//
// Every script starts with the prologue libSrc (scripts/lib.lua: the
// shared type checks, and the key names scripts compare against).
//
// Every script that writes is fenced (a one-line change): a service
// script is declared with fenced(), a user-command script's source is
// wrapped in fencedSrc(). It then starts with scripts/fence.lua and
// refuses to write for a node that lost the leader lease (see
// doc/architecture.md, High availability). TestWriteScriptsFenced fails
// for a script that writes and is not fenced (only the lease scripts
// themselves are exempt).
var (
	//go:embed scripts/cmdrecord.lua
	cmdRecordSrc string

	// history.lua follows cmdrecord.lua in the scripts that change jobs.
	//go:embed scripts/history.lua
	historySrc string

	//go:embed scripts/register.lua
	registerBody   string
	registerSrc    = fencedSrc(cmdRecordSrc + historySrc + registerBody)
	registerScript = redis.NewScript(registerSrc)
)

var (
	//go:embed scripts/settings.lua
	settingsBody   string
	settingsSrc    = fencedSrc(cmdRecordSrc + historySrc + settingsBody)
	settingsScript = redis.NewScript(settingsSrc)

	//go:embed scripts/abort.lua
	abortBody   string
	abortSrc    = fencedSrc(cmdRecordSrc + historySrc + abortBody)
	abortScript = redis.NewScript(abortSrc)

	//go:embed scripts/queue_index.lua
	queueIndexSrc    string
	queueIndexScript = fenced(queueIndexSrc)

	//go:embed scripts/expire.lua
	expireBody   string
	expireSrc    = fencedSrc(cmdRecordSrc + historySrc + expireBody)
	expireScript = redis.NewScript(expireSrc)
)

// Queue tools (queues.go).
var (
	//go:embed scripts/move.lua
	moveBody   string
	moveSrc    = fencedSrc(cmdRecordSrc + historySrc + moveBody)
	moveScript = redis.NewScript(moveSrc)
)

// Operator commands (commands.go, pipelines.go).
var (
	//go:embed scripts/requeue.lua
	requeueSrc    string
	requeueScript = fenced(requeueSrc)

	//go:embed scripts/pipeline_remove.lua
	pipelineRemoveSrc    string
	pipelineRemoveScript = fenced(pipelineRemoveSrc)
)

// Scripts of the background services and of FailJob.
var (
	// read_log.lua only reads: not fenced.
	//go:embed scripts/read_log.lua
	readLogSrc    string
	readLogScript = plain(readLogSrc)

	//go:embed scripts/fail.lua
	failBody string
	// FailJob is a user command and the reaper's auto-fail: fenced.
	failScript = fenced(cmdRecordSrc + historySrc + failBody)

	//go:embed scripts/reap.lua
	reapSrc    string
	reapScript = fenced(reapSrc)

	//go:embed scripts/reap_reported.lua
	reapReportedSrc    string
	reapReportedScript = fenced(reapReportedSrc)

	// The delivery queues' take and acknowledge (queue.go).
	//go:embed scripts/notice_take.lua
	noticeTakeSrc    string
	noticeTakeScript = fenced(noticeTakeSrc)

	//go:embed scripts/notice_ack.lua
	noticeAckSrc    string
	noticeAckScript = fenced(noticeAckSrc)

	//go:embed scripts/analyze_commit.lua
	analyzeCommitSrc    string
	analyzeCommitScript = fenced(analyzeCommitSrc)
)

// The start scan and the job-end history step (notices.go, history.go).
var (
	//go:embed scripts/start_scan.lua
	startScanBody   string
	startScanScript = fenced(historySrc + startScanBody)

	//go:embed scripts/job_end.lua
	jobEndBody   string
	jobEndScript = fenced(historySrc + jobEndBody)
)

// The live stream's broadcast bookmark (stream.go).
var (
	//go:embed scripts/broadcast.lua
	broadcastSrc    string
	broadcastScript = fenced(broadcastSrc)
)

// The index of finished jobs and the failure records (history.go, failures.go).
var (
	//go:embed scripts/index_finished.lua
	indexFinishedSrc    string
	indexFinishedScript = fenced(indexFinishedSrc)

	//go:embed scripts/record_failure.lua
	recordFailureSrc    string
	recordFailureScript = fenced(recordFailureSrc)
)

// Scripts of the tweet feed (tweets.go).
var (
	//go:embed scripts/tweet_queue.lua
	tweetQueueSrc    string
	tweetQueueScript = fenced(tweetQueueSrc)

	//go:embed scripts/tweet_prune.lua
	tweetPruneSrc    string
	tweetPruneScript = fenced(tweetPruneSrc)

	// Per-network feed progress (feed.go); feed_finalize.lua is a library
	// the view and resolve scripts include.
	//go:embed scripts/feed_finalize.lua
	feedFinalizeSrc string
	//go:embed scripts/feed_view.lua
	feedViewBody   string
	feedViewScript = fenced(feedFinalizeSrc + feedViewBody)
	//go:embed scripts/feed_claim.lua
	feedClaimSrc    string
	feedClaimScript = fenced(feedClaimSrc)
	//go:embed scripts/feed_resolve.lua
	feedResolveBody   string
	feedResolveScript = fenced(feedFinalizeSrc + feedResolveBody)
	//go:embed scripts/feed_prune.lua
	feedPruneSrc    string
	feedPruneScript = fenced(feedPruneSrc)
	//go:embed scripts/feed_summary.lua
	feedSummarySrc    string
	feedSummaryScript = fenced(feedSummarySrc)
)

// The leader lease's scripts. They are not fenced: they are the fence.
var (
	//go:embed scripts/lease_acquire.lua
	leaseAcquireSrc    string
	leaseAcquireScript = plain(leaseAcquireSrc)

	//go:embed scripts/lease_renew.lua
	leaseRenewSrc    string
	leaseRenewScript = plain(leaseRenewSrc)

	//go:embed scripts/lease_release.lua
	leaseReleaseSrc    string
	leaseReleaseScript = plain(leaseReleaseSrc)
)

//go:embed scripts/fence.lua
var fenceSrc string

//go:embed scripts/lib.lua
var libBody string

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
	", job_events = " + strconv.Quote(ChannelJobEvents) + "}\n" + libBody

// plain declares a script that is not fenced (it only reads, or it is the
// lease itself): src behind the prologue.
func plain(src string) *redis.Script {
	return redis.NewScript(libSrc + src)
}

// fencedScript is a service write script with the fence prologue
// (scripts/fence.lua). Its Run takes the same arguments as redis.Script's
// and appends the lease key and the caller's fencing token (WithFence).
type fencedScript struct {
	*redis.Script
	src string // the whole source, prologue included
}

// fencedHashes holds the SHA1 of every fenced script, so that runWrite
// knows to append the fence arguments.
var fencedHashes = map[string]bool{}

// fencedList holds the source of every fenced script, for the test that
// checks that no writing script was left out.
var fencedList []string

// fenced declares a service write script: src, run behind the fence.
func fenced(src string) *fencedScript {
	full := fencedSrc(src)
	return &fencedScript{Script: redis.NewScript(full), src: full}
}

// fencedSrc returns src behind the fence and the prologue (libSrc), for a
// script run with runWrite (user commands), which then appends the fence
// arguments.
func fencedSrc(src string) string {
	full := fenceSrc + libSrc + src
	fencedHashes[redis.NewScript(full).Hash()] = true
	fencedList = append(fencedList, full)
	return full
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

// Scripts of the pipeline API (pipelineapi.go; doc/pipeline-api.md).
var (
	//go:embed scripts/api_held.lua
	apiHeldSrc string
	//go:embed scripts/api_take.lua
	apiTakeSrc    string
	apiTakeScript = fenced(apiTakeSrc)
	//go:embed scripts/api_update.lua
	apiUpdateSrc    string
	apiUpdateScript = fenced(apiHeldSrc + apiUpdateSrc)
	//go:embed scripts/api_abort.lua
	apiAbortSrc    string
	apiAbortScript = fenced(apiHeldSrc + apiAbortSrc)
	//go:embed scripts/api_done.lua
	apiDoneSrc    string
	apiDoneScript = fenced(apiHeldSrc + apiDoneSrc)
	//go:embed scripts/api_nonce.lua
	apiNonceSrc    string
	apiNonceScript = fenced(apiNonceSrc)
	//go:embed scripts/api_report.lua
	apiReportSrc    string
	apiReportScript = fenced(apiReportSrc)
	//go:embed scripts/api_key_stats.lua
	apiKeyStatsSrc    string
	apiKeyStatsScript = fenced(apiKeyStatsSrc)
)

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

package store

// Every Redis key and pub/sub channel the control node touches is spelled
// here and nowhere else. The layout is shared with existing pipelines and
// dashboards (doc/protocol.md): names, types and list directions are a
// wire format. Keys of our own start with "archivebot:".

import (
	"crypto/md5"
	"encoding/hex"
)

const (
	// KeyPending (list) holds idents queued with !a. The bot LPUSHes;
	// pipelines RPOPLPUSH from the right, so the right end is the head.
	KeyPending = "pending"
	// KeyPendingAO (list) holds !ao jobs.
	KeyPendingAO = "pending-ao"
	// KeyPendingLarge (list) holds !a --large jobs.
	KeyPendingLarge = "pending-large"
	// KeyWorking (list) holds idents a pipeline has taken.
	KeyWorking = "working"
	// KeyPipelines (set) holds pipeline:<md5hex> keys.
	KeyPipelines = "pipelines"
	// KeyJobsCompleted, KeyJobsAborted, KeyJobsFailed (strings) are INCR counters.
	KeyJobsCompleted = "jobs_completed"
	KeyJobsAborted   = "jobs_aborted"
	KeyJobsFailed    = "jobs_failed"
	// KeyFinishNotifications (list) gets one JSON document per finished
	// job, RPUSHed by pipelines.
	KeyFinishNotifications = "finish_notifications"
	// KeyFinishProcessing (list, ours) holds notices being delivered.
	KeyFinishProcessing = "archivebot:finish_notifications:processing"
	// KeyQueues (set, ours) indexes the pending:NAME queues, so that
	// reading them never scans the keyspace (see doc/protocol.md, Queues).
	KeyQueues = "archivebot:queues"
	// KeyReaperReported (set, ours) holds idents whose death was announced.
	KeyReaperReported = "archivebot:reaper:reported"
	// KeyPipelineNotices (hash, ours): field = a pipeline key, value = the
	// pipeline notifier's state of its version-change lines (when one was
	// last posted, the version it said, changes held back since), so the
	// hourly limit survives restarts and a change of leader.
	KeyPipelineNotices = "archivebot:pipeline_notices"
	// KeyTweetsQueue and KeyTweetsDone (sorted sets): member = tweet text,
	// score = UNIX time queued / posted.
	KeyTweetsQueue = "tweets:queue"
	KeyTweetsDone  = "tweets:done"
	// KeyTweetsAttempt (hash, ours) held the one-network tweeter's
	// attempts; the per-network feed keeps them in KeyFeedAttempts. It is
	// still checked before queueing and pruned, for records an older
	// version left.
	KeyTweetsAttempt = "archivebot:tweets:attempt"
	// KeyTweetsFailed (sorted set, ours): member = tweet text the tweeter
	// gave up on, score = UNIX time it gave up. Pruned with tweets:done.
	KeyTweetsFailed = "archivebot:tweets:failed"
	// KeyFeedURLs (hash, ours): member = text in tweets:queue, value = the
	// job URL it was made from, so each network can word its own post
	// (see doc/protocol.md, Tweets). Removed when the text leaves the queue.
	KeyFeedURLs = "archivebot:feed:urls"

	// KeyLeader (string, ours) is the leader lease: "TOKEN NODE ACQUIRED_MS",
	// with a PX lifetime (see doc/protocol.md, Leader lease).
	KeyLeader = "archivebot:leader"
	// KeyLeaderToken (string counter, ours) issues fencing tokens.
	KeyLeaderToken = "archivebot:leader:token"

	// ChannelUpdates gets a job ident on every log entry, finish and abort.
	ChannelUpdates = "updates"
	// ChannelPipelineUpdates gets a pipeline key on every report and exit.
	ChannelPipelineUpdates = "archivebot:pipeline_updates"

	// PendingNamedPrefix prefixes --pipeline NAME queues.
	PendingNamedPrefix = "pending:"
	// PipelinePrefix prefixes pipeline records.
	PipelinePrefix = "pipeline:"
	// KeyAdminNotices (list, ours) holds channel lines the operator's
	// commands want said: JSON {"channel": "#c", "text": "…"}, RPUSHed by
	// `archivebot` subcommands, delivered by the running node at least
	// once, as finish notices are.
	KeyAdminNotices = "archivebot:admin_notices"
	// KeyAdminNoticesProcessing (list, ours) holds admin notices being
	// delivered.
	KeyAdminNoticesProcessing = "archivebot:admin_notices:processing"
	// KeyFinishedIndex (sorted set, ours): member = ident of a job that
	// finished, was aborted or failed; score = its finished_at (failed_at
	// for failures). Entries older than FailureTTL are pruned whenever one
	// is added; entries whose job record and failure record have both
	// expired are skipped and removed when /finished reads them.
	KeyFinishedIndex = "archivebot:finished"
	// FailedPrefix prefixes failure records: archivebot:failed:IDENT (hash).
	FailedPrefix = "archivebot:failed:"
)

// FeedPrefix prefixes the keys of one feed network (x, mastodon,
// bluesky, dryrun): archivebot:feed:NET:KIND.
const FeedPrefix = "archivebot:feed:"

// KeyFeedState (hash, ours): member = text in tweets:queue, value = where
// network net is with it: "a:KEY" (attempt KEY in flight), "p:T" (posted
// at UNIX time T), "d:KEY" (carried by digest KEY), "f:T" (given up at T).
// Fields go when the text leaves tweets:queue.
func KeyFeedState(net string) string { return FeedPrefix + net + ":state" }

// KeyFeedAttempts (hash, ours): member = attempt key, value = JSON
// {"at","post","items","digest"}: a post sent or about to be sent and not
// yet recorded, so a crash between send and record is resolved on restart.
func KeyFeedAttempts(net string) string { return FeedPrefix + net + ":attempts" }

// KeyFeedSent (sorted set, ours): member = attempt key, score = UNIX ms it
// was claimed: the posts counted against the network's budget window.
func KeyFeedSent(net string) string { return FeedPrefix + net + ":sent" }

// KeyFeedDigests (sorted set, ours): member = JSON {"key","post","items"}
// of a digest posted, score = UNIX time. Pruned with tweets:done.
func KeyFeedDigests(net string) string { return FeedPrefix + net + ":digests" }

// KeyFeedFailed (sorted set, ours): member = JSON {"text","reason"} of a
// text the network gave up on, score = UNIX time. Pruned with tweets:done.
func KeyFeedFailed(net string) string { return FeedPrefix + net + ":failed" }

// KeyFeedSummary (string, ours) is the UTC day (YYYY-MM-DD) of the last
// daily summary posted on net.
func KeyFeedSummary(net string) string { return FeedPrefix + net + ":summary" }

// KeyJob is the job record (hash) of ident.
func KeyJob(ident string) string { return ident }

// KeyIgnores is the job's ignore-pattern set.
func KeyIgnores(ident string) string { return ident + "_ignores" }

// KeyLog is the job's log (sorted set scored by log_score).
func KeyLog(ident string) string { return ident + "_log" }

// KeyPendingNamed is the queue (list) for --pipeline name.
func KeyPendingNamed(name string) string { return PendingNamedPrefix + name }

// KeyCommand (string, ours) is the outcome record of one user command:
// the reply of its script, written in the same script as the change, kept
// a few minutes (see coordinator/outcome.go).
func KeyCommand(id string) string { return "archivebot:cmd:" + id }

// ChannelJob is the channel a job's settings age is published on.
func ChannelJob(ident string) string { return "archivebot:job:" + ident }

// FixedQueues are the queues that always exist by name, in the order a
// pipeline checks them after its named queues (doc/protocol.md, Queues).
var FixedQueues = []string{KeyPendingLarge, KeyPending, KeyPendingAO}

// Keys of our own for job history, start notices, failure and origin
// records (doc/protocol.md, Job history and Start notices).
const (
	// ChannelJobEvents (pub/sub, ours) gets every history entry appended
	// to any job's history, as the same JSON document.
	ChannelJobEvents = "archivebot:job_events"
	// ChannelAPILog (pub/sub, ours) carries the log entries that reached
	// the leader through the pipeline API, in batches (store/apilog.go):
	// every node's live stream takes them from here.
	ChannelAPILog = "archivebot:api_log"
	// KeyStreamRelay (stream, ours) carries what the leader's firehose
	// streams, log entries and job events, in batches, capped near
	// RelayMaxLen messages (store/relay.go): under ha.enabled every
	// node's live stream reads it, the leader's included.
	KeyStreamRelay = "archivebot:stream_relay"
	// KeyStreamRelaySeq (string, ours) numbers the relay's messages.
	KeyStreamRelaySeq = "archivebot:stream_relay:seq"
	// KeyStarted (set, ours) holds the idents in `working` whose start was
	// observed (history entry written, notice queued). Idents that left
	// `working` are removed by the next start scan.
	KeyStarted = "archivebot:started"
	// KeyStartNotifications (list, ours) gets one JSON document per start
	// notice to deliver; KeyStartProcessing holds the ones being delivered.
	KeyStartNotifications = "archivebot:start_notifications"
	KeyStartProcessing    = "archivebot:start_notifications:processing"
	// KeyStartBaseline (string, ours) is the time of the first start scan
	// against this Redis; while it is absent, the jobs in `working` were
	// running before this node first started and get no start notice.
	KeyStartBaseline = "archivebot:start_baseline"
	// QueuedByPrefix prefixes the per-nick sets of queued idents used by
	// the per-user pending limit: archivebot:queued_by:FOLDEDNICK.
	QueuedByPrefix = "archivebot:queued_by:"
)

// KeyHistory is the job's history (list, ours): one JSON entry per event,
// oldest first, at most HistoryMax entries.
func KeyHistory(ident string) string { return "archivebot:history:" + ident }

// KeyOrigin is what register knew about a job that its hash cannot hold
// (hash, ours): `queue` (the exact queue key it was pushed to) and
// `notify_start` ("1" or "0").
func KeyOrigin(ident string) string { return "archivebot:origin:" + ident }

// KeyQueuedBy is the set of idents a nick queued (folded with the IRC
// server's CASEMAPPING), for the per-user pending limit.
func KeyQueuedBy(foldedNick string) string { return QueuedByPrefix + foldedNick }

// KeyFailed is the failure record (hash, ours) of ident.
func KeyFailed(ident string) string { return FailedPrefix + ident }

// Keys of the pipeline API (doc/pipeline-api.md; doc/protocol.md,
// Pipeline API keys). All ours, under archivebot:.
const (
	// KeyPipelineKeys (hash): key name -> public key text ("ed25519:…").
	// A name here is active.
	KeyPipelineKeys = "archivebot:pipeline_keys"
	// KeyPipelineKeysRevoked (hash): key name -> UNIX seconds it was
	// revoked. A revoked name is not in KeyPipelineKeys.
	KeyPipelineKeysRevoked = "archivebot:pipeline_keys:revoked"
	// PipelineKeyPrefix prefixes a key's statistics (hash: added_at,
	// last_seen, refusals, last_refusal), its held set (…:jobs), its
	// nonces (…:nonces) and its take_ids (…:take_ids, …:take_ids_at).
	PipelineKeyPrefix = "archivebot:pipeline_key:"
	// APIPipelineIDPrefix is hashed with the key name into the key's
	// pipeline record: pipeline:<md5hex("api:" + name)>.
	APIPipelineIDPrefix = "api:"
)

// KeyPipelineKeyStats is a key's statistics (hash).
func KeyPipelineKeyStats(name string) string { return PipelineKeyPrefix + name }

// KeyPipelineKeyJobs is the set of idents a key took and still holds.
func KeyPipelineKeyJobs(name string) string { return PipelineKeyPrefix + name + ":jobs" }

// KeyPipelineKeyNonces is the sorted set of a key's recent nonces.
func KeyPipelineKeyNonces(name string) string { return PipelineKeyPrefix + name + ":nonces" }

// KeyPipelineKeyTakeIDs is the hash of a key's recent take_ids: take_id ->
// the job it took, IDENT "\n" QUEUE (scripts/take.lua).
func KeyPipelineKeyTakeIDs(name string) string { return PipelineKeyPrefix + name + ":take_ids" }

// KeyPipelineKeyTakeIDsAt is the sorted set of a key's recent take_ids,
// scored by when they took (UNIX seconds): the age and the cap of
// KeyPipelineKeyTakeIDs.
func KeyPipelineKeyTakeIDsAt(name string) string {
	return PipelineKeyPrefix + name + ":take_ids_at"
}

// APIPipelineKey is the pipeline record of an API key:
// pipeline:<md5 hex of "api:" + name>.
func APIPipelineKey(name string) string {
	sum := md5.Sum([]byte(APIPipelineIDPrefix + name))
	return PipelinePrefix + hex.EncodeToString(sum[:])
}

// Keys of the take rule (doc/pipeline-api.md, The take rule; doc/protocol.md,
// Paused queues). All ours, under archivebot:.
const (
	// KeyPaused (hash): field = a queue name, or "all"; value = JSON
	// {"by","at","reason"}: who paused it, when (UNIX seconds), why.
	KeyPaused = "archivebot:paused"
	// PausedPrefix prefixes where a paused queue's list waits:
	// archivebot:paused:QUEUE (list, same order). Upstream's pipelines
	// look for `pending*` names only, so they never see it.
	PausedPrefix = "archivebot:paused:"
)

// KeyPausedQueue is where queue's jobs wait while it is paused.
func KeyPausedQueue(queue string) string { return PausedPrefix + queue }

// KeyPipelineKeyRules is a key's rules (hash): targeted_only ("1").
func KeyPipelineKeyRules(name string) string { return PipelineKeyPrefix + name + ":rules" }

// KeyPipelineKeyAvoid is the set of domains operators made a key avoid.
func KeyPipelineKeyAvoid(name string) string { return PipelineKeyPrefix + name + ":avoid" }

// KeyPipelineKeyAvoidSelf is the set of domains the pipeline itself said
// (in its report) it must not crawl.
func KeyPipelineKeyAvoidSelf(name string) string { return PipelineKeyPrefix + name + ":avoid_self" }

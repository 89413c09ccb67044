package store

// Every Redis key and pub/sub channel the control node touches is spelled
// here and nowhere else. The layout is shared with existing pipelines and
// dashboards (doc/protocol.md): names, types and list directions are a
// wire format. Keys of our own start with "archivebot:".

import (
	_ "embed"
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
	// KeyTweetsQueue and KeyTweetsDone (sorted sets): member = tweet text,
	// score = UNIX time queued / posted.
	KeyTweetsQueue = "tweets:queue"
	KeyTweetsDone  = "tweets:done"
	// KeyTweetsAttempt (hash, ours) records texts whose post was attempted
	// but not yet recorded, so a crash does not post twice.
	KeyTweetsAttempt = "archivebot:tweets:attempt"
	// KeyTweetsFailed (sorted set, ours): member = tweet text the tweeter
	// gave up on, score = UNIX time it gave up. Pruned with tweets:done.
	KeyTweetsFailed = "archivebot:tweets:failed"

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

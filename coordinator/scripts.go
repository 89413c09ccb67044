package coordinator

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Lua scripts. Each file documents its KEYS, ARGV and return values.
// The scripts of user commands start with scripts/cmdrecord.lua (their
// outcome record, see outcome.go) and take its two ARGV last.
var (
	//go:embed scripts/cmdrecord.lua
	cmdRecordSrc string

	// history.lua follows cmdrecord.lua in the scripts that change jobs.
	//go:embed scripts/history.lua
	historySrc string

	//go:embed scripts/register.lua
	registerBody   string
	registerSrc    = cmdRecordSrc + historySrc + registerBody
	registerScript = redis.NewScript(registerSrc)
)

var (
	//go:embed scripts/settings.lua
	settingsBody   string
	settingsSrc    = cmdRecordSrc + historySrc + settingsBody
	settingsScript = redis.NewScript(settingsSrc)

	//go:embed scripts/abort.lua
	abortBody   string
	abortSrc    = cmdRecordSrc + historySrc + abortBody
	abortScript = redis.NewScript(abortSrc)

	//go:embed scripts/queue_index.lua
	queueIndexSrc    string
	queueIndexScript = redis.NewScript(queueIndexSrc)

	//go:embed scripts/expire.lua
	expireBody   string
	expireSrc    = cmdRecordSrc + historySrc + expireBody
	expireScript = redis.NewScript(expireSrc)
)

// Scripts of the background services and of FailJob.
var (
	//go:embed scripts/fail.lua
	failBody   string
	failSrc    = cmdRecordSrc + historySrc + failBody
	failScript = redis.NewScript(failSrc)

	//go:embed scripts/reap.lua
	reapSrc    string
	reapScript = redis.NewScript(reapSrc)

	//go:embed scripts/reap_reported.lua
	reapReportedSrc    string
	reapReportedScript = redis.NewScript(reapReportedSrc)

	//go:embed scripts/finish_take.lua
	finishTakeSrc    string
	finishTakeScript = redis.NewScript(finishTakeSrc)

	//go:embed scripts/finish_ack.lua
	finishAckSrc    string
	finishAckScript = redis.NewScript(finishAckSrc)

	//go:embed scripts/analyze_commit.lua
	analyzeCommitSrc    string
	analyzeCommitScript = redis.NewScript(analyzeCommitSrc)
)

// Scripts of the tweet feed (tweets.go).
var (
	//go:embed scripts/tweet_queue.lua
	tweetQueueSrc    string
	tweetQueueScript = redis.NewScript(tweetQueueSrc)

	//go:embed scripts/tweet_claim.lua
	tweetClaimSrc    string
	tweetClaimScript = redis.NewScript(tweetClaimSrc)

	//go:embed scripts/tweet_resolve.lua
	tweetResolveSrc    string
	tweetResolveScript = redis.NewScript(tweetResolveSrc)

	//go:embed scripts/tweet_prune.lua
	tweetPruneSrc    string
	tweetPruneScript = redis.NewScript(tweetPruneSrc)
)

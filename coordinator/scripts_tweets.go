package coordinator

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Lua scripts of the tweeter's store operations (tweets.go). Each file
// documents its KEYS, ARGV and return values.
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

package coordinator

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Lua scripts of the background services and of FailJob. Each file
// documents its KEYS, ARGV and return values.
var (
	//go:embed scripts/fail.lua
	failSrc    string
	failScript = redis.NewScript(failSrc)

	//go:embed scripts/reap.lua
	reapSrc    string
	reapScript = redis.NewScript(reapSrc)

	//go:embed scripts/analyze_commit.lua
	analyzeCommitSrc    string
	analyzeCommitScript = redis.NewScript(analyzeCommitSrc)
)

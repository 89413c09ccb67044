package coordinator

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Lua scripts. Each file documents its KEYS, ARGV and return values.
var (
	//go:embed scripts/register.lua
	registerSrc    string
	registerScript = redis.NewScript(registerSrc)
)

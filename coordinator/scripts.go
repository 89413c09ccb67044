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

var (
	//go:embed scripts/settings.lua
	settingsSrc    string
	settingsScript = redis.NewScript(settingsSrc)

	//go:embed scripts/abort.lua
	abortSrc    string
	abortScript = redis.NewScript(abortSrc)

	//go:embed scripts/expire.lua
	expireSrc    string
	expireScript = redis.NewScript(expireSrc)
)

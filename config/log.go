package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// Log configures the process log (standard error).
type Log struct {
	// Format is "text" (logfmt-like key=value) or "json".
	Format string `toml:"format"`
	// Level is the least level logged: "debug", "info", "warn", "error".
	Level string `toml:"level"`
}

// ParseLevel reads a log level name: debug, info, warn (warning) or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf(`must be "debug", "info", "warn" or "error", got %q`, s)
}

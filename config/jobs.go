package config

import "time"

// Defaults of the bot's commands and the job queues. Every default of the
// services is spelled once, next to its section: setDefaults fills the
// configuration file's keys from them, cmd/archivebot passes every value
// to the services explicitly, and a service given a zero value (tests,
// tools) takes the same constant.
const (
	// DefaultOutcomeWait is how long the bot keeps finding out what
	// happened to a write Redis took but did not answer.
	DefaultOutcomeWait = 3 * time.Minute

	// DefaultQueueIndexRebuild is how often the index of named queues is
	// rebuilt with a SCAN, to find queues other programs created.
	DefaultQueueIndexRebuild = 10 * time.Minute
)

// Jobs configures job registration.
type Jobs struct {
	Schemes      []string `toml:"schemes"`
	PendingLimit int      `toml:"pending_limit"`
	// PerUserPendingLimit is how many queued jobs one nick may have (ops
	// exempt); 0 means no limit.
	PerUserPendingLimit int    `toml:"per_user_pending_limit"`
	IgnoreSetsDir       string `toml:"ignore_sets_dir"`
	UserAgentsDir       string `toml:"user_agents_dir"`
}

// Bot configures command handling.
type Bot struct {
	// OutcomeWait is how long the bot keeps finding out what happened to a
	// command Redis took but did not answer, before telling the user the
	// outcome is still unknown.
	OutcomeWait Duration `toml:"outcome_wait"`
}

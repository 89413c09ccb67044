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

	// DefaultTakeScanLimit is the most queued jobs of each queue one
	// take examines (doc/pipeline-api.md, The take rule).
	DefaultTakeScanLimit = 1000

	// DefaultBanCheckResponses is how many first responses of a job decide
	// the ban line (doc/pipeline-api.md, A ban shows itself).
	DefaultBanCheckResponses = 50

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
	PerUserPendingLimit int `toml:"per_user_pending_limit"`
	// PerUserRunningLimit: a take skips the jobs of a nick that has this
	// many jobs running; 0 means off (doc/pipeline-api.md, The take rule).
	PerUserRunningLimit int `toml:"per_user_running_limit"`
	// PerUserRunningOpsExempt: jobs queued by channel operators are not
	// held by PerUserRunningLimit.
	PerUserRunningOpsExempt bool `toml:"per_user_running_ops_exempt"`
	// TakeScanLimit is the most queued jobs one take examines.
	TakeScanLimit int `toml:"take_scan_limit"`
	// BanCheckResponses: when a job's first this many responses are all
	// errors, a line in its channel says its pipeline may be banned; 0
	// switches the check off.
	BanCheckResponses int    `toml:"ban_check_responses"`
	IgnoreSetsDir     string `toml:"ignore_sets_dir"`
	UserAgentsDir     string `toml:"user_agents_dir"`
	// RequireAccount: commands that change jobs need a services account
	// (the IRC server tells it through account-tag, extended-join or
	// account-notify). Default off.
	RequireAccount bool `toml:"require_account"`
}

// Bot configures command handling.
type Bot struct {
	// OutcomeWait is how long the bot keeps finding out what happened to a
	// command Redis took but did not answer, before telling the user the
	// outcome is still unknown.
	OutcomeWait Duration `toml:"outcome_wait"`
}

package config

import "time"

// Defaults of the reaper, the notifier and the analyzer (see the defaults
// in jobs.go for how they are used).
const (
	DefaultReaperInterval  = 2 * time.Second
	DefaultReaperThreshold = 3600 // checks: 2 hours at 2 s

	DefaultFinishInterval = 30 * time.Second
	// DefaultFinishBatch is the most finish notices one cycle delivers.
	DefaultFinishBatch = 1000
	// DefaultFinishPushGap is the least time between two finish cycles
	// started by `updates` messages rather than by the interval.
	DefaultFinishPushGap = 250 * time.Millisecond

	// DefaultStartInterval is how often `working` is checked for jobs a
	// pipeline has taken (start notices).
	DefaultStartInterval = 5 * time.Second

	DefaultPipelineInterval    = 30 * time.Second
	DefaultPipelineSilentAfter = 5 * time.Minute
	// DefaultPipelineChangeEvery is the least time between two
	// version-change lines of one pipeline.
	DefaultPipelineChangeEvery = time.Hour
	// DefaultAvoidSiteEvery is the least time between two "every
	// pipeline avoids its site" lines for one site (a stranger queuing
	// 25 jobs on it made 25 lines, the default scan 1,000).
	DefaultAvoidSiteEvery = time.Hour

	DefaultAnalyzerSweepInterval = 60 * time.Second
	DefaultAnalyzerTrimAfter     = 1000
	// DefaultAnalyzerBatch is the most log entries one atomic step reads.
	DefaultAnalyzerBatch = 5000
	// DefaultAnalyzerDebounce is how long `updates` messages pile up
	// before the logs they announce are read.
	DefaultAnalyzerDebounce = time.Second
)

// Reaper configures the death timer (see doc/protocol.md, Death timer).
type Reaper struct {
	Interval  Duration `toml:"interval"`
	Threshold int      `toml:"threshold"`
	AutoFail  bool     `toml:"auto_fail"`
}

// Notifier configures the finish and pipeline notifiers (see doc/protocol.md, Finish notices and Pipelines).
type Notifier struct {
	FinishInterval   Duration `toml:"finish_interval"`
	PipelineInterval Duration `toml:"pipeline_interval"`
	// PipelineSilentAfter is how old a pipeline's ts may get before it is
	// announced as silent.
	PipelineSilentAfter Duration `toml:"pipeline_silent_after"`
	// PipelineChangeEvery is the least time between two version-change
	// lines of one pipeline (default 1h; "0s" is no limit).
	PipelineChangeEvery Duration `toml:"pipeline_change_every"`
	// AvoidSiteEvery is the least time between two "every pipeline
	// avoids its site" lines for one avoided site (default 1h; "0s": one
	// per job, no bound per site).
	AvoidSiteEvery Duration `toml:"avoid_site_every"`
	// StartNotices announces in its channel when a pipeline takes a job
	// (jobs can opt in or out with --notify-start / --no-notify-start;
	// !ao jobs are announced only when they opt in). Default true.
	StartNotices bool `toml:"start_notices"`
	// StartInterval is how often `working` is checked for new jobs (an
	// `updates` message of a job not seen yet checks at once).
	StartInterval Duration `toml:"start_interval"`
}

// Analyzer configures the log analyzer and trimmer (see doc/protocol.md, Job logs).
type Analyzer struct {
	SweepInterval Duration `toml:"sweep_interval"`
	TrimAfter     int      `toml:"trim_after"`
	// RespectBroadcast trims only up to min(analyzed, broadcast) so that a
	// running dashboard firehose misses nothing.
	RespectBroadcast bool `toml:"respect_broadcast"`
}

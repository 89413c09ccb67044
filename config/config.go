// Package config loads and validates the control node's TOML configuration.
//
// Loading happens in two steps, as in ergo and soju: decode (unknown keys are
// errors), then validate and fill defaults, with every error naming the file
// and the key.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// Defaults of the services. This is the one place they are spelled:
// setDefaults fills the configuration file's keys from them, cmd/archivebot
// passes every value to the services explicitly, and a service given a
// zero value (tests, tools) takes the same constant.
const (
	// DefaultOutcomeWait is how long the bot keeps finding out what
	// happened to a write Redis took but did not answer.
	DefaultOutcomeWait = 3 * time.Minute

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

	DefaultAnalyzerSweepInterval = 60 * time.Second
	DefaultAnalyzerTrimAfter     = 1000
	// DefaultStreamListen is upstream's WebSocket port, where its
	// dashboard looks for /stream.
	DefaultStreamListen = "127.0.0.1:4568"
	// The pipeline API's per-key limits (doc/pipeline-api.md, Limits).
	DefaultPipelineRate       = 50
	DefaultPipelineLogRate    = 5000
	DefaultPipelineMaxStreams = 4
	// The pipeline API listener's limits (doc/pipeline-api.md, Listener).
	DefaultPipelineMaxConns        = 512
	DefaultPipelineMaxConnsPerAddr = 64
	DefaultPipelineReadTimeout     = 10 * time.Second
	DefaultPipelineIdleTimeout     = 60 * time.Second
	DefaultPipelineWriteTimeout    = 30 * time.Second
	DefaultPipelineMaxWaitingTakes = 8
	// DefaultMaxClockSkew: how far a node's clock may be from Redis's
	// TIME for it to lead (ha.max_clock_skew).
	DefaultMaxClockSkew = 5 * time.Second
	// DefaultRecentMaxBytes caps one /logs/recent answer.
	DefaultRecentMaxBytes = 4 << 20
	// DefaultStreamMaxLag: entries of one job the trimmer keeps for a
	// lagging live stream.
	DefaultStreamMaxLag = 10000
	// DefaultStreamQueueBytes and DefaultStreamTotalBytes bound what the
	// live stream queues for one client and for all clients together.
	DefaultStreamQueueBytes = 4 << 20
	DefaultStreamTotalBytes = 64 << 20
	// DefaultStreamUnreadBytes and DefaultStreamUnreadBytesUpstream bound
	// the bytes sent to one live-stream client (of our protocol, of
	// upstream's) that it has not read yet (doc/web.md, Backpressure).
	DefaultStreamUnreadBytes         = 256 << 10
	DefaultStreamUnreadBytesUpstream = 64 << 10
	// DefaultAnalyzerBatch is the most log entries one atomic step reads.
	DefaultAnalyzerBatch = 5000
	// DefaultAnalyzerDebounce is how long `updates` messages pile up
	// before the logs they announce are read.
	DefaultAnalyzerDebounce = time.Second

	// DefaultQueueIndexRebuild is how often the index of named queues is
	// rebuilt with a SCAN, to find queues other programs created.
	DefaultQueueIndexRebuild = 10 * time.Minute

	// DefaultPubSubMinBackoff and DefaultPubSubMaxBackoff bound the wait
	// between attempts to resubscribe to a pub/sub channel (`updates`,
	// job events).
	DefaultPubSubMinBackoff = 100 * time.Millisecond
	DefaultPubSubMaxBackoff = 10 * time.Second

	DefaultTweeterInterval       = 2 * time.Minute
	DefaultTweeterDelay          = 2 * time.Minute
	DefaultTweeterAPI            = "v2"
	DefaultTweeterMaxTries       = 5
	DefaultTweeterRetryBackoff   = 5 * time.Second
	DefaultTweeterMaxBackoff     = 2 * time.Minute
	DefaultTweeterRateLimitPause = 15 * time.Minute
	DefaultTweeterSweepInterval  = time.Minute
	DefaultTweeterPruneInterval  = 24 * time.Hour
	DefaultTweeterRetention      = 30 * 24 * time.Hour
	DefaultTweeterSeenTTL        = 24 * time.Hour
	DefaultTweeterSeenMax        = 10000
	// Posting budgets (posts per window) of the feed's networks: X's free
	// tier (17 posts a day per user), Mastodon's 300 posts per 3 hours per
	// account, and for Bluesky 450 an hour (a post costs 3 points: 1,350 of
	// the 5,000 points an hour, and 10,800 of the 35,000 a day).
	DefaultTweeterBudget               = 17
	DefaultTweeterBudgetWindow         = 24 * time.Hour
	DefaultTweeterMastodonBudget       = 300
	DefaultTweeterMastodonBudgetWindow = 3 * time.Hour
	DefaultTweeterBlueskyBudget        = 450
	DefaultTweeterBlueskyBudgetWindow  = time.Hour
	DefaultTweeterBlueskyService       = "https://bsky.social"

	// The embedded Redis server's (redis.listen, redis.save_interval,
	// redis.proto_max_bulk_len); package embeddedredis takes the same.
	DefaultRedisListen          = "127.0.0.1:6379"
	DefaultRedisSaveInterval    = 30 * time.Second
	DefaultRedisProtoMaxBulkLen = 64 << 20

	// DefaultWaitTimeout bounds WAIT after a command's write when
	// redis.wait_replicas is set.
	DefaultWaitTimeout = time.Second
	// DefaultLeaseTTL is the leader lease's lifetime; the leader renews it
	// every third of it.
	DefaultLeaseTTL = 10 * time.Second
)

// DefaultDataDir is where the embedded Redis keeps its files when
// redis.data_dir is left out: the XDG base directory specification's
// state directory, $XDG_STATE_HOME/archivebot (an absolute
// $XDG_STATE_HOME), else ~/.local/state/archivebot; "data" under the
// working directory only when there is no home directory. So a run from a
// clone leaves no state in it, and every run of one user finds the same
// data wherever it is started. The Docker image and the systemd unit set
// ARCHIVEBOT_DATA_DIR.
func DefaultDataDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "archivebot")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "archivebot")
	}
	return "data"
}

// Duration is a Go duration string in TOML ("2s", "30s", "2m").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole configuration file.
type Config struct {
	IRC      IRC      `toml:"irc"`
	Redis    Redis    `toml:"redis"`
	Jobs     Jobs     `toml:"jobs"`
	Bot      Bot      `toml:"bot"`
	Reaper   Reaper   `toml:"reaper"`
	Notifier Notifier `toml:"notifier"`
	Analyzer Analyzer `toml:"analyzer"`
	Tweeter  Tweeter  `toml:"tweeter"`
	HTTP     HTTP     `toml:"http"`
	Log      Log      `toml:"log"`
	HA       HA       `toml:"ha"`
	// Pipelines configures the pipeline API (doc/pipeline-api.md).
	Pipelines Pipelines `toml:"pipelines"`

	// File is the path the configuration was loaded from ("" for defaults).
	File string `toml:"-"`
}

// IRC configures the IRC front end. An empty Server selects the console.
type IRC struct {
	Server            string   `toml:"server"`
	Nick              string   `toml:"nick"`
	Channels          []string `toml:"channels"`
	Password          string   `toml:"password"`
	SASL              string   `toml:"sasl"`
	MessagesPerSecond float64  `toml:"messages_per_second"`
	Burst             int      `toml:"burst"`
	TLSCA             string   `toml:"tls_ca"`
	// CommandsPerMinute is the per-nick command throttle for users
	// without a rank; voiced users and operators get ten times as many.
	CommandsPerMinute int `toml:"commands_per_minute"`
	// ReportChannel is where reports meant for a channel that is not in
	// Channels go (saying where they were meant to go). Left out: the
	// first of Channels; "": off, such reports are only logged.
	ReportChannel string `toml:"report_channel"`
}

// Redis configures the Redis connection or the embedded server.
type Redis struct {
	URL          string   `toml:"url"`
	Listen       string   `toml:"listen"`
	DataDir      string   `toml:"data_dir"`
	Password     string   `toml:"password"`
	SaveInterval Duration `toml:"save_interval"`
	// ProtoMaxBulkLen bounds, in bytes, each argument a client sends to the
	// embedded Redis and the strings its commands build, as Redis's
	// proto-max-bulk-len (left out or 0: 64 MiB; at least 1 MiB, since
	// Lua scripts are arguments too).
	ProtoMaxBulkLen int `toml:"proto_max_bulk_len"`

	// Sentinels, when set, finds the master through Redis Sentinel
	// (host:port of each sentinel) instead of url; the embedded server is
	// not started. MasterName is the name the sentinels monitor.
	Sentinels        []string `toml:"sentinels"`
	MasterName       string   `toml:"master_name"`
	SentinelPassword string   `toml:"sentinel_password"`
	// MasterPassword and DB are the master's (and replicas') AUTH password
	// and database number under Sentinel. Password above stays the
	// embedded server's; a url carries its own credentials and DB.
	MasterPassword string `toml:"master_password"`
	DB             int    `toml:"db"`

	// WaitReplicas, when positive, makes every acknowledged user-command
	// write wait (Redis WAIT) until that many replicas have it, for up to
	// WaitTimeout; fewer means the outcome is reported unknown.
	WaitReplicas int      `toml:"wait_replicas"`
	WaitTimeout  Duration `toml:"wait_timeout"`
}

// HA configures the active/standby pair of nodes (see doc/architecture.md,
// High availability): every node with enabled = true campaigns for the
// lease archivebot:leader; only its holder connects to IRC and runs the
// services.
type HA struct {
	Enabled  bool     `toml:"enabled"`
	LeaseTTL Duration `toml:"lease_ttl"`
	// MaxClockSkew is how far a node's clock may be from Redis's TIME for
	// it to lead (default 5s; written as 0: not checked).
	MaxClockSkew Duration `toml:"max_clock_skew"`
	// NodeID names this node in the lease; default hostname-pid.
	NodeID string `toml:"node_id"`
}

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

// Tweeter configures the "Archiving URL" feed (see doc/protocol.md, Tweets).
type Tweeter struct {
	Interval       Duration `toml:"interval"`
	Delay          Duration `toml:"delay"`
	API            string   `toml:"api"`
	ConsumerKey    string   `toml:"consumer_key"`
	ConsumerSecret string   `toml:"consumer_secret"`
	AccessToken    string   `toml:"access_token"`
	AccessSecret   string   `toml:"access_secret"`
	// Budget is how many posts X may make per BudgetWindow; more queued
	// texts go out in digests (0: no budget).
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
	// DigestSchedule (cron, UTC) is when digests may go out once the queue
	// outruns a budget ("": whenever needed). SummarySchedule (cron, UTC)
	// is when yesterday's summary is posted ("": never).
	DigestSchedule  string `toml:"digest_schedule"`
	SummarySchedule string `toml:"summary_schedule"`
	// Mastodon and Bluesky are the other networks, each off unless
	// configured.
	Mastodon TweeterMastodon `toml:"mastodon"`
	Bluesky  TweeterBluesky  `toml:"bluesky"`
}

// TweeterMastodon configures the Mastodon network of the feed: on when
// server and access_token are set.
type TweeterMastodon struct {
	// Server is the instance's base URL (http:// allowed, for relays).
	Server       string   `toml:"server"`
	AccessToken  string   `toml:"access_token"`
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
}

// On reports whether Mastodon is configured.
func (m TweeterMastodon) On() bool { return m.Server != "" || m.AccessToken != "" }

// TweeterBluesky configures the Bluesky network of the feed: on when
// identifier and app_password are set.
type TweeterBluesky struct {
	// Service is the PDS base URL; default https://bsky.social.
	Service string `toml:"service"`
	// Identifier is the account's handle or DID.
	Identifier   string   `toml:"identifier"`
	AppPassword  string   `toml:"app_password"`
	Budget       int      `toml:"budget"`
	BudgetWindow Duration `toml:"budget_window"`
}

// On reports whether Bluesky is configured.
func (b TweeterBluesky) On() bool { return b.Identifier != "" || b.AppPassword != "" }

// HTTP configures the web server (the JSON API, /metrics, /readyz).
type HTTP struct {
	// Listen is the address to serve on; default 127.0.0.1:4567
	// (upstream's port). Written as "" it switches the server off.
	Listen string `toml:"listen"`
	// StreamListen is a second address serving only the upstream-compatible
	// live stream (/stream), where upstream's dashboard looks for it;
	// default 127.0.0.1:4568. Written as "" it is off (the stream is still
	// on the main listener).
	StreamListen string `toml:"stream_listen"`
	// StreamMaxLag bounds how far the trimmer waits for the live stream:
	// when more than this many log entries of one job were analyzed but
	// not broadcast, it trims anyway and counts them as skipped. Default
	// 10000; 0 means no waiting for the stream at all.
	StreamMaxLag int `toml:"stream_max_lag"`
	// StreamQueueBytes and StreamTotalBytes bound the bytes the live
	// stream holds for one slow client and for all clients together
	// (defaults 4 MiB and 64 MiB); past them clients lose their oldest
	// log frames, counted (doc/web.md, Backpressure).
	StreamQueueBytes int64 `toml:"stream_queue_bytes"`
	StreamTotalBytes int64 `toml:"stream_total_bytes"`
	// StreamUnreadBytes and StreamUnreadBytesUpstream bound the bytes sent
	// to one client of our protocol (of upstream's) that it has not read
	// yet, as its pongs to progress pings tell (defaults 256 KiB and 64
	// KiB); a client past it is sent nothing more until it reads, and its
	// frames age in its queue, where the 1 s budget drops them, counted.
	// 0: no bound but the kernels' socket buffers.
	StreamUnreadBytes         int `toml:"stream_unread_bytes"`
	StreamUnreadBytesUpstream int `toml:"stream_unread_bytes_upstream"`
	// RecentMaxBytes caps one /logs/recent answer (default 4 MiB; written
	// as 0: no cap): past it each job keeps its newest entries.
	RecentMaxBytes int `toml:"recent_max_bytes"`
}

// Pipelines configures the pipeline API listener (doc/pipeline-api.md).
// Every limit is per pipeline key; 0 takes the default.
type Pipelines struct {
	// Listen is the API's own address; "" (the default) switches it off.
	Listen string `toml:"listen"`
	// TLSCert and TLSKey are PEM files: both set serves HTTPS, both empty
	// plain HTTP (behind a TLS-terminating proxy).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// Rate is requests per second (default 50), LogRate log entries per
	// second (default 5000), both with a burst of twice as many;
	// MaxStreams the open control streams (default 4).
	Rate       float64 `toml:"rate"`
	LogRate    float64 `toml:"log_rate"`
	MaxStreams int     `toml:"max_streams"`
	// Listener limits; left out: the default, written as 0: off.
	// MaxConns (default 512) and MaxConnsPerAddr (64) cap open
	// connections in total and per remote address; ReadTimeout (10s)
	// bounds reading a request, IdleTimeout (60s) a kept-alive
	// connection without requests, WriteTimeout (30s) each write of an
	// answer or of a control stream event. MaxWaitingTakes (8) caps the
	// long-poll takes waiting per key.
	MaxConns        int      `toml:"max_conns"`
	MaxConnsPerAddr int      `toml:"max_conns_per_addr"`
	ReadTimeout     Duration `toml:"read_timeout"`
	IdleTimeout     Duration `toml:"idle_timeout"`
	WriteTimeout    Duration `toml:"write_timeout"`
	MaxWaitingTakes int      `toml:"max_waiting_takes"`
}

// Log configures the process log (standard error).
type Log struct {
	// Format is "text" (logfmt-like key=value) or "json".
	Format string `toml:"format"`
	// Level is the least level logged: "debug", "info", "warn", "error".
	Level string `toml:"level"`
}

// Environment variables the configuration honours (besides REDIS_URL).
const (
	EnvRedisURL    = "REDIS_URL"
	EnvRedisListen = "ARCHIVEBOT_REDIS_LISTEN"
	EnvDataDir     = "ARCHIVEBOT_DATA_DIR"
	// EnvHTTPListen and EnvStreamListen set http.listen and
	// http.stream_listen: a second node on one machine moves its ports
	// without a file.
	EnvHTTPListen   = "ARCHIVEBOT_HTTP_LISTEN"
	EnvStreamListen = "ARCHIVEBOT_STREAM_LISTEN"
)

// Overrides are values given on the command line; they win over the
// environment and the file.
type Overrides struct {
	RedisListen  string
	DataDir      string
	HTTPListen   string
	StreamListen string
	// HTTPListenSet and StreamListenSet say the flag was given: given
	// empty (-http-listen "", -stream-listen ""), it switches that
	// listener off, as listen = "" in the file does.
	HTTPListenSet, StreamListenSet bool
}

// StreamOn reports whether the node runs the live log stream: whenever it
// serves HTTP (listen = "" switches the second listener off too).
func (h HTTP) StreamOn() bool { return h.Listen != "" }

// Console reports whether the console front end is selected.
func (c *Config) Console() bool { return c.IRC.Server == "" }

// Embedded reports whether the embedded Redis server is used.
func (c *Config) Embedded() bool { return c.Redis.URL == "" && len(c.Redis.Sentinels) == 0 }

// Default returns the configuration used when no file is given.
func Default() *Config {
	c := &Config{}
	c.Notifier.StartNotices = true
	c.setDefaults()
	c.IRC.ReportChannel = c.IRC.defaultReportChannel()
	return c
}

// defaultReportChannel is the first configured channel's name, "" when
// there is none.
func (i IRC) defaultReportChannel() string {
	if len(i.Channels) == 0 {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimSpace(i.Channels[0]), " ")
	return name
}

// foldChannel folds a channel name the widest way IRC servers do
// (rfc1459: ASCII letters and []\~ against {}|^), for comparing names
// before the server's CASEMAPPING is known.
func foldChannel(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c == '[' || c == ']' || c == '\\' || c == '~':
			b[i] = c + '{' - '['
		}
	}
	return string(b)
}

// Positive sets *p to the default v when it is zero or negative: how a
// package that takes options (tests, tools) fills what was not given.
func Positive[T ~int | ~int64 | ~float64](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// zero sets *p to v when it is the zero value (the key was not set).
func zero[T comparable](p *T, v T) {
	var z T
	if *p == z {
		*p = v
	}
}

func (c *Config) setDefaults() {
	def := func(d *Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	zero(&c.IRC.Nick, "ArchiveBot")
	zero(&c.IRC.MessagesPerSecond, 1.0)
	zero(&c.IRC.Burst, 3)
	zero(&c.IRC.CommandsPerMinute, 20)
	zero(&c.Redis.Listen, DefaultRedisListen)
	zero(&c.Redis.DataDir, DefaultDataDir())
	def(&c.Redis.SaveInterval, DefaultRedisSaveInterval)
	zero(&c.Redis.ProtoMaxBulkLen, DefaultRedisProtoMaxBulkLen)
	def(&c.Redis.WaitTimeout, DefaultWaitTimeout)
	def(&c.HA.LeaseTTL, DefaultLeaseTTL)
	def(&c.HA.MaxClockSkew, DefaultMaxClockSkew)
	if c.HA.NodeID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "node"
		}
		c.HA.NodeID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(c.Jobs.Schemes) == 0 {
		c.Jobs.Schemes = []string{"http", "https", "ftp"}
	}
	zero(&c.Jobs.PendingLimit, 5)
	zero(&c.Pipelines.Rate, DefaultPipelineRate)
	zero(&c.Pipelines.LogRate, DefaultPipelineLogRate)
	zero(&c.Pipelines.MaxStreams, DefaultPipelineMaxStreams)
	zero(&c.Pipelines.MaxConns, DefaultPipelineMaxConns)
	zero(&c.Pipelines.MaxConnsPerAddr, DefaultPipelineMaxConnsPerAddr)
	zero(&c.Pipelines.MaxWaitingTakes, DefaultPipelineMaxWaitingTakes)
	zero(&c.HTTP.RecentMaxBytes, DefaultRecentMaxBytes)
	def(&c.Pipelines.ReadTimeout, DefaultPipelineReadTimeout)
	def(&c.Pipelines.IdleTimeout, DefaultPipelineIdleTimeout)
	def(&c.Pipelines.WriteTimeout, DefaultPipelineWriteTimeout)
	def(&c.Bot.OutcomeWait, DefaultOutcomeWait)
	def(&c.Reaper.Interval, DefaultReaperInterval)
	zero(&c.Reaper.Threshold, DefaultReaperThreshold)
	def(&c.Notifier.FinishInterval, DefaultFinishInterval)
	def(&c.Notifier.PipelineInterval, DefaultPipelineInterval)
	def(&c.Notifier.StartInterval, DefaultStartInterval)
	def(&c.Notifier.PipelineSilentAfter, DefaultPipelineSilentAfter)
	def(&c.Notifier.PipelineChangeEvery, DefaultPipelineChangeEvery)
	def(&c.Analyzer.SweepInterval, DefaultAnalyzerSweepInterval)
	zero(&c.Analyzer.TrimAfter, DefaultAnalyzerTrimAfter)
	def(&c.Tweeter.Interval, DefaultTweeterInterval)
	def(&c.Tweeter.Delay, DefaultTweeterDelay)
	zero(&c.Tweeter.API, DefaultTweeterAPI)
	zero(&c.Tweeter.Budget, DefaultTweeterBudget)
	def(&c.Tweeter.BudgetWindow, DefaultTweeterBudgetWindow)
	zero(&c.Tweeter.Mastodon.Budget, DefaultTweeterMastodonBudget)
	def(&c.Tweeter.Mastodon.BudgetWindow, DefaultTweeterMastodonBudgetWindow)
	zero(&c.Tweeter.Bluesky.Budget, DefaultTweeterBlueskyBudget)
	def(&c.Tweeter.Bluesky.BudgetWindow, DefaultTweeterBlueskyBudgetWindow)
	zero(&c.Tweeter.Bluesky.Service, DefaultTweeterBlueskyService)
	zero(&c.HTTP.Listen, "127.0.0.1:4567")
	zero(&c.Log.Format, "text")
	zero(&c.Log.Level, "info")
	zero(&c.HTTP.StreamListen, DefaultStreamListen)
	zero(&c.HTTP.StreamMaxLag, DefaultStreamMaxLag)
	zero(&c.HTTP.StreamQueueBytes, DefaultStreamQueueBytes)
	zero(&c.HTTP.StreamTotalBytes, DefaultStreamTotalBytes)
	zero(&c.HTTP.StreamUnreadBytes, DefaultStreamUnreadBytes)
	zero(&c.HTTP.StreamUnreadBytesUpstream, DefaultStreamUnreadBytesUpstream)
}

// Load reads path (if non-empty), applies REDIS_URL,
// ARCHIVEBOT_REDIS_LISTEN and ARCHIVEBOT_DATA_DIR from the environment,
// fills defaults and validates.
func Load(path string) (*Config, error) { return LoadWith(path, Overrides{}) }

// LoadWith is Load with command-line values applied last. Its error, when
// the file has problems, is a Problems listing every one of them.
func LoadWith(path string, o Overrides) (*Config, error) {
	c, err := LoadPartial(path, o)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// maxTOMLErrors bounds the syntax and type errors one load reports: each
// one found costs a parse of the whole file.
const maxTOMLErrors = 50

// LoadPartial is LoadWith that does not stop at the first problem: a
// TOML syntax error or a value of the wrong type is reported with its
// line and that line is read as if it were empty, an unknown key is
// reported, and every key is then checked. It returns the configuration
// read (defaults where a line could not be read) and, when anything is
// wrong, a Problems error holding every problem found. The configuration
// is nil only when the file cannot be read at all.
func LoadPartial(path string, o Overrides) (*Config, error) {
	c := &Config{File: path}
	name := path
	if name == "" {
		name = "(defaults)"
	}
	var probs Problems
	httpOff, streamOff, lagOff, changeOff := false, false, false, false
	var budgetsOff []*int
	var durationsOff []*Duration
	reportSet := false
	if path != "" {
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var md toml.MetaData
		c, md, probs = decodeAll(path, string(text))
		reportSet = md.IsDefined("irc", "report_channel")
		for _, k := range md.Undecoded() {
			probs = append(probs, Problem{File: path, Line: keyLine(string(text), k), Msg: "unknown key " + k.String()})
		}
		// The file's own errors in the order of its lines (a key's line
		// is 0 when not known: those go last).
		slices.SortStableFunc(probs, func(a, b Problem) int {
			if (a.Line == 0) != (b.Line == 0) {
				return b.Line - a.Line
			}
			return a.Line - b.Line
		})
		// An explicit listen = "" switches the web server off.
		httpOff = md.IsDefined("http", "listen") && c.HTTP.Listen == ""
		streamOff = md.IsDefined("http", "stream_listen") && c.HTTP.StreamListen == ""
		lagOff = md.IsDefined("http", "stream_max_lag") && c.HTTP.StreamMaxLag == 0
		changeOff = md.IsDefined("notifier", "pipeline_change_every") && c.Notifier.PipelineChangeEvery.Duration == 0
		// An explicit budget = 0 is no budget; an explicit limit = 0 no
		// limit.
		for _, b := range []struct {
			keys []string
			v    *int
		}{
			{[]string{"pipelines", "max_conns"}, &c.Pipelines.MaxConns},
			{[]string{"pipelines", "max_conns_per_addr"}, &c.Pipelines.MaxConnsPerAddr},
			{[]string{"pipelines", "max_waiting_takes"}, &c.Pipelines.MaxWaitingTakes},
			{[]string{"http", "recent_max_bytes"}, &c.HTTP.RecentMaxBytes},
			{[]string{"http", "stream_unread_bytes"}, &c.HTTP.StreamUnreadBytes},
			{[]string{"http", "stream_unread_bytes_upstream"}, &c.HTTP.StreamUnreadBytesUpstream},
			{[]string{"tweeter", "budget"}, &c.Tweeter.Budget},
			{[]string{"tweeter", "mastodon", "budget"}, &c.Tweeter.Mastodon.Budget},
			{[]string{"tweeter", "bluesky", "budget"}, &c.Tweeter.Bluesky.Budget},
		} {
			if md.IsDefined(b.keys...) && *b.v == 0 {
				budgetsOff = append(budgetsOff, b.v)
			}
		}
		for _, d := range []struct {
			key string
			v   *Duration
		}{
			{"read_timeout", &c.Pipelines.ReadTimeout},
			{"idle_timeout", &c.Pipelines.IdleTimeout},
			{"write_timeout", &c.Pipelines.WriteTimeout},
			{"ha.max_clock_skew", &c.HA.MaxClockSkew},
		} {
			sect, key, found := strings.Cut(d.key, ".")
			if !found {
				sect, key = "pipelines", d.key
			}
			if md.IsDefined(sect, key) && d.v.Duration == 0 {
				durationsOff = append(durationsOff, d.v)
			}
		}
		// A boolean that defaults to true: only an explicit false is off.
		if !md.IsDefined("notifier", "start_notices") {
			c.Notifier.StartNotices = true
		}
	} else {
		c.Notifier.StartNotices = true
	}
	if env := os.Getenv(EnvRedisURL); env != "" {
		c.Redis.URL = env
	}
	for _, v := range []struct {
		dst      *string
		env, arg string
	}{
		{&c.Redis.Listen, EnvRedisListen, o.RedisListen},
		{&c.Redis.DataDir, EnvDataDir, o.DataDir},
		{&c.HTTP.Listen, EnvHTTPListen, o.HTTPListen},
		{&c.HTTP.StreamListen, EnvStreamListen, o.StreamListen},
	} {
		if env := os.Getenv(v.env); env != "" {
			*v.dst = env
		}
		if v.arg != "" {
			*v.dst = v.arg
		}
	}
	// A listen address given by the environment or a flag wins over the
	// file's "" (off).
	httpOff = httpOff && c.HTTP.Listen == ""
	streamOff = streamOff && c.HTTP.StreamListen == ""
	// A flag given empty is off, over the file and the environment.
	if o.HTTPListenSet && o.HTTPListen == "" {
		httpOff = true
	}
	if o.StreamListenSet && o.StreamListen == "" {
		streamOff = true
	}
	c.setDefaults()
	if httpOff {
		c.HTTP.Listen = ""
	}
	if !reportSet {
		c.IRC.ReportChannel = c.IRC.defaultReportChannel()
	}
	if streamOff {
		c.HTTP.StreamListen = ""
	}
	if lagOff {
		c.HTTP.StreamMaxLag = 0
	}
	if changeOff {
		c.Notifier.PipelineChangeEvery.Duration = 0
	}
	for _, b := range budgetsOff {
		*b = 0
	}
	for _, d := range durationsOff {
		d.Duration = 0
	}
	for _, p := range c.validate() {
		p.File = name
		probs = append(probs, p)
	}
	if len(probs) > 0 {
		return c, probs
	}
	return c, nil
}

// Problem is one thing wrong with a configuration.
type Problem struct {
	File string // the file, or "(defaults)"
	Line int    // the line in File, 0 when not known
	Key  string // the key ("irc.server"), "" for a syntax error
	Msg  string
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem one load found, in the order of the file's
// lines for TOML errors, then the keys' checks. Its Error has one line
// per problem.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Has reports whether one of the problems is about key.
func (ps Problems) Has(key string) bool {
	for _, p := range ps {
		if p.Key == key {
			return true
		}
	}
	return false
}

// decodeAll decodes text into a Config, reporting every TOML error rather
// than the first: a syntax error is reported with its line, and the line
// is then read as empty; a value that does not fit its key (a string for
// a number, "soon" for a duration) is reported with its line and key, and
// its line (and, for a value over several lines, the lines that then no
// longer parse) read as empty. What remains is decoded.
func decodeAll(path, text string) (*Config, toml.MetaData, Problems) {
	var probs Problems
	lines := strings.Split(text, "\n")
	blank := func(line int) bool {
		if line < 1 || line > len(lines) || strings.TrimSpace(lines[line-1]) == "" {
			return false
		}
		lines[line-1] = ""
		return true
	}
	// Syntax: decoding into a map can only fail on the syntax.
	syntaxOK := false
	for range maxTOMLErrors {
		var m map[string]any
		_, err := toml.Decode(strings.Join(lines, "\n"), &m)
		if err == nil {
			syntaxOK = true
			break
		}
		var pe toml.ParseError
		if !errors.As(err, &pe) || !blank(pe.Position.Line) {
			// Nothing left to skip (an unterminated string at the end):
			// report it and read nothing more.
			line := 0
			if errors.As(err, &pe) {
				line = pe.Position.Line
			}
			probs = append(probs, Problem{File: path, Line: line, Msg: tomlMessage(err)})
			return &Config{File: path}, toml.MetaData{}, probs
		}
		probs = append(probs, Problem{File: path, Line: pe.Position.Line, Msg: pe.Message})
	}
	if !syntaxOK {
		probs = append(probs, Problem{File: path, Msg: fmt.Sprintf("more than %d TOML errors; the rest of the file was not read", maxTOMLErrors)})
		return &Config{File: path}, toml.MetaData{}, probs
	}
	// Types: the struct decoder stops at the first value that does not fit.
	for range maxTOMLErrors {
		c := &Config{File: path}
		md, err := toml.Decode(strings.Join(lines, "\n"), c)
		if err == nil {
			return c, md, probs
		}
		line, key, msg := decodeError(err)
		if !blank(line) {
			probs = append(probs, Problem{File: path, Line: line, Key: key, Msg: msg})
			break
		}
		probs = append(probs, Problem{File: path, Line: line, Key: key, Msg: msg})
		// A value over several lines leaves lines that no longer parse
		// on their own: they were part of the value just reported.
		for range len(lines) {
			var m map[string]any
			_, err := toml.Decode(strings.Join(lines, "\n"), &m)
			var pe toml.ParseError
			if err == nil || !errors.As(err, &pe) || pe.Position.Line <= line || !blank(pe.Position.Line) {
				break
			}
		}
	}
	return &Config{File: path}, toml.MetaData{}, probs
}

// decodeLine matches BurntSushi/toml's error for a value of the wrong type.
var decodeLine = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError finds the line and key of a decoding error.
func decodeError(err error) (line int, key, msg string) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Position.Line, pe.LastKey, pe.Message
	}
	if m := decodeLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2], m[3]
	}
	return 0, "", tomlMessage(err)
}

func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return strings.TrimPrefix(err.Error(), "toml: ")
}

// keyLine finds the line where key is set in text, for a key given as
// `name = …` under its [table] header (0 when it is written another way,
// as a dotted key or in an inline table).
func keyLine(text string, key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	table, last := strings.Join(key[:len(key)-1], "."), key[len(key)-1]
	current := ""
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") && !strings.HasPrefix(l, "[[") {
			if end := strings.Index(l, "]"); end > 0 {
				current = strings.TrimSpace(l[1:end])
			}
			continue
		}
		name, _, ok := strings.Cut(l, "=")
		if ok && current == table && strings.Trim(strings.TrimSpace(name), `"'`) == last {
			return i + 1
		}
	}
	return 0
}

// validate checks every key; each problem names its key.
func (c *Config) validate() Problems {
	var errs Problems
	bad := func(key, format string, a ...any) {
		errs = append(errs, Problem{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	if s := c.IRC.Server; s != "" {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			bad("irc.server", "%v", err)
		case u.Scheme != "irc" && u.Scheme != "ircs":
			bad("irc.server", "scheme must be irc:// or ircs://, got %q", s)
		case u.Hostname() == "":
			bad("irc.server", "no host in %q", s)
		}
		if len(c.IRC.Channels) == 0 {
			bad("irc.channels", "at least one channel is needed when irc.server is set")
		}
	}
	for _, ch := range c.IRC.Channels {
		name, _, _ := strings.Cut(ch, " ")
		if name == "" || !strings.ContainsRune("#&+!", rune(name[0])) || strings.ContainsAny(name, ",\x07\r\n\x00") {
			bad("irc.channels", "%q is not a channel name (channels start with #; a key may follow after a space)", ch)
		}
	}
	if rc := c.IRC.ReportChannel; rc != "" {
		found := false
		for _, ch := range c.IRC.Channels {
			name, _, _ := strings.Cut(strings.TrimSpace(ch), " ")
			found = found || foldChannel(name) == foldChannel(rc)
		}
		if !found {
			bad("irc.report_channel", "%q is not one of irc.channels (leave it out for the first channel, \"\" for none)", rc)
		}
	}
	if strings.ContainsAny(c.IRC.Nick, " \r\n\x00!@#,*?") || c.IRC.Nick == "" {
		bad("irc.nick", "%q is not a valid nickname", c.IRC.Nick)
	}
	if c.IRC.SASL != "" && !strings.Contains(c.IRC.SASL, ":") {
		bad("irc.sasl", `must be "user:password"`)
	}
	if c.IRC.MessagesPerSecond < 0 {
		bad("irc.messages_per_second", "must be positive")
	}
	if c.IRC.Burst < 1 {
		bad("irc.burst", "must be at least 1")
	}
	if c.Redis.URL != "" {
		// Parsed exactly as the run will parse it.
		if _, err := ParseRedisURL(c.Redis.URL); err != nil {
			bad("redis.url", "%v (REDIS_URL overrides the file)", err)
		}
	}
	if c.Redis.ProtoMaxBulkLen < 1<<20 {
		bad("redis.proto_max_bulk_len", "must be at least 1048576 (1 MiB): Lua scripts are arguments too")
	}
	if err := checkListen(c.Redis.Listen); err != nil {
		bad("redis.listen", "%v (also set by -redis-listen or %s)", err, EnvRedisListen)
	}
	if len(c.Redis.Sentinels) > 0 {
		if c.Redis.URL != "" {
			bad("redis.sentinels", "set either redis.url (or REDIS_URL) or redis.sentinels, not both")
		}
		if c.Redis.MasterName == "" {
			bad("redis.master_name", "must be set with redis.sentinels (the name in the sentinels' `sentinel monitor` line)")
		}
		for _, a := range c.Redis.Sentinels {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad("redis.sentinels", "%q: %v", a, err)
			}
		}
	} else if c.Redis.MasterName != "" || c.Redis.SentinelPassword != "" || c.Redis.MasterPassword != "" || c.Redis.DB != 0 {
		bad("redis.master_name", "master_name, sentinel_password, master_password and db need redis.sentinels (a url carries its own password and DB)")
	}
	if c.Redis.DB < 0 {
		bad("redis.db", "must not be negative")
	}
	if c.Redis.WaitReplicas < 0 {
		bad("redis.wait_replicas", "must not be negative")
	}
	if c.Redis.WaitReplicas > 0 && c.Embedded() {
		bad("redis.wait_replicas", "the embedded Redis has no replicas; set redis.url or redis.sentinels")
	}
	if c.Redis.WaitTimeout.Duration < time.Millisecond {
		bad("redis.wait_timeout", "must be at least 1ms (WAIT 0 would wait forever)")
	}
	if c.HA.Enabled && c.Embedded() {
		bad("ha.enabled", "the embedded Redis mode is single-node; set redis.url or redis.sentinels to share a Redis between nodes")
	}
	if c.HA.Enabled && c.Console() {
		bad("ha.enabled", "needs irc.server: the leader is the node that holds the IRC connection")
	}
	if c.HA.LeaseTTL.Duration < time.Second {
		bad("ha.lease_ttl", "must be at least 1s")
	}
	if strings.ContainsAny(c.HA.NodeID, " \r\n") {
		bad("ha.node_id", "%q must not contain spaces", c.HA.NodeID)
	}
	if c.HTTP.Listen != "" {
		if err := checkListen(c.HTTP.Listen); err != nil {
			bad("http.listen", "%v (also set by -http-listen or %s; write listen = \"\" to switch the web server off)", err, EnvHTTPListen)
		}
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", `must be "text" or "json", got %q`, c.Log.Format)
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	if c.HTTP.StreamListen != "" {
		if err := checkListen(c.HTTP.StreamListen); err != nil {
			bad("http.stream_listen", "%v (also set by -stream-listen or %s; write stream_listen = \"\" to switch it off)", err, EnvStreamListen)
		}
	}
	if c.HTTP.StreamMaxLag < 0 {
		bad("http.stream_max_lag", "must be 0 (no bound) or more")
	}
	if c.HTTP.StreamUnreadBytes < 0 || c.HTTP.StreamUnreadBytesUpstream < 0 {
		bad("http.stream_unread_bytes", "http.stream_unread_bytes and http.stream_unread_bytes_upstream must be 0 (no bound) or more")
	}
	if c.HTTP.StreamQueueBytes < 0 || c.HTTP.StreamTotalBytes < 0 {
		bad("http.stream_queue_bytes", "http.stream_queue_bytes and http.stream_total_bytes must be 0 (the default) or more")
	}
	if c.Pipelines.Listen != "" {
		if err := checkListen(c.Pipelines.Listen); err != nil {
			bad("pipelines.listen", "%v (leave it out or write \"\" to switch the pipeline API off)", err)
		}
	}
	if (c.Pipelines.TLSCert == "") != (c.Pipelines.TLSKey == "") {
		bad("pipelines.tls_cert", "tls_cert and tls_key go together (both empty: plain HTTP behind a TLS proxy)")
	}
	if c.Pipelines.Rate < 0 || c.Pipelines.LogRate < 0 || c.Pipelines.MaxStreams < 0 {
		bad("pipelines.rate", "rate, log_rate and max_streams must not be negative (0: the default)")
	}
	if c.HTTP.RecentMaxBytes < 0 {
		bad("http.recent_max_bytes", "must not be negative (0: no cap)")
	}
	if c.Pipelines.MaxConns < 0 || c.Pipelines.MaxConnsPerAddr < 0 || c.Pipelines.MaxWaitingTakes < 0 {
		bad("pipelines.max_conns", "max_conns, max_conns_per_addr and max_waiting_takes must not be negative (0: no limit)")
	}
	if c.Pipelines.ReadTimeout.Duration < 0 || c.Pipelines.IdleTimeout.Duration < 0 || c.Pipelines.WriteTimeout.Duration < 0 {
		bad("pipelines.read_timeout", "read_timeout, idle_timeout and write_timeout must not be negative (0: none)")
	}
	for _, s := range c.Jobs.Schemes {
		if s == "" || strings.ToLower(s) != s {
			bad("jobs.schemes", "%q must be a lowercase scheme name", s)
		}
	}
	if c.Jobs.PendingLimit < 0 {
		bad("jobs.pending_limit", "must not be negative")
	}
	if c.Jobs.PerUserPendingLimit < 0 {
		bad("jobs.per_user_pending_limit", "must not be negative (0 means no limit)")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"redis.save_interval", c.Redis.SaveInterval.Duration},
		{"bot.outcome_wait", c.Bot.OutcomeWait.Duration},
		{"reaper.interval", c.Reaper.Interval.Duration},
		{"notifier.finish_interval", c.Notifier.FinishInterval.Duration},
		{"notifier.start_interval", c.Notifier.StartInterval.Duration},
		{"notifier.pipeline_interval", c.Notifier.PipelineInterval.Duration},
		{"notifier.pipeline_silent_after", c.Notifier.PipelineSilentAfter.Duration},
		{"notifier.pipeline_change_every", c.Notifier.PipelineChangeEvery.Duration},
		{"analyzer.sweep_interval", c.Analyzer.SweepInterval.Duration},
		{"tweeter.interval", c.Tweeter.Interval.Duration},
	} {
		if d.v < 0 {
			bad(d.key, "must be positive")
		}
	}
	if c.Tweeter.Delay.Duration < 0 {
		bad("tweeter.delay", "must not be negative")
	}
	// Pipelines report ts in whole seconds about once a second: a shorter
	// limit would call live pipelines silent.
	if d := c.Notifier.PipelineSilentAfter.Duration; d > 0 && d < 2*time.Second {
		bad("notifier.pipeline_silent_after", "must be at least 2s (pipelines report about once a second, in whole seconds)")
	}
	if c.Reaper.Threshold < 1 {
		bad("reaper.threshold", "must be at least 1")
	}
	if c.Analyzer.TrimAfter < 1 {
		bad("analyzer.trim_after", "must be at least 1")
	}
	if c.Tweeter.API != "v1.1" && c.Tweeter.API != "v2" {
		bad("tweeter.api", `must be "v2" or "v1.1", got %q`, c.Tweeter.API)
	}
	creds := []string{c.Tweeter.ConsumerKey, c.Tweeter.ConsumerSecret, c.Tweeter.AccessToken, c.Tweeter.AccessSecret}
	set := 0
	for _, v := range creds {
		if v != "" {
			set++
		}
	}
	if set != 0 && set != len(creds) {
		bad("tweeter", "consumer_key, consumer_secret, access_token and access_secret must all be set, or none (dry run)")
	}
	for _, b := range []struct {
		key    string
		budget int
		window time.Duration
	}{
		{"tweeter", c.Tweeter.Budget, c.Tweeter.BudgetWindow.Duration},
		{"tweeter.mastodon", c.Tweeter.Mastodon.Budget, c.Tweeter.Mastodon.BudgetWindow.Duration},
		{"tweeter.bluesky", c.Tweeter.Bluesky.Budget, c.Tweeter.Bluesky.BudgetWindow.Duration},
	} {
		if b.budget < 0 {
			bad(b.key+".budget", "must not be negative (0 means no budget)")
		}
		if b.window <= 0 {
			bad(b.key+".budget_window", "must be positive")
		}
	}
	for _, s := range []struct{ key, spec string }{
		{"tweeter.digest_schedule", c.Tweeter.DigestSchedule},
		{"tweeter.summary_schedule", c.Tweeter.SummarySchedule},
	} {
		if s.spec == "" {
			continue
		}
		if _, err := cronParser.Parse(s.spec); err != nil {
			bad(s.key, "is not a cron schedule (5 fields or @hourly, @daily…; UTC): %v", err)
		}
	}
	if m := c.Tweeter.Mastodon; m.On() {
		if m.Server == "" || m.AccessToken == "" {
			bad("tweeter.mastodon", "server and access_token must both be set, or neither (Mastodon off)")
		} else if err := checkBaseURL(m.Server); err != nil {
			bad("tweeter.mastodon.server", "%v", err)
		}
	}
	if b := c.Tweeter.Bluesky; b.On() {
		if b.Identifier == "" || b.AppPassword == "" {
			bad("tweeter.bluesky", "identifier and app_password must both be set, or neither (Bluesky off)")
		}
		if err := checkBaseURL(b.Service); err != nil {
			bad("tweeter.bluesky.service", "%v", err)
		}
	}
	return errs
}

// cronParser reads the feed's schedules: five fields or a descriptor
// (@hourly, @daily…), as robfig/cron's standard parser.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// checkBaseURL checks a network's base URL: http(s), a host, nothing after
// the path.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("must be an http(s) base URL like https://example.social, got %q", RedactURL(raw))
	}
	return nil
}

// checkListen resolves a listen address as net.Listen will: host:port, a
// port in 0–65535, a host that resolves.
func checkListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return err
	}
	if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
		return err
	}
	return nil
}

// RedactURL hides a password in a URL for messages and logs. A URL that
// does not parse has everything before its last "@" hidden.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil && strings.Contains(raw, "@") {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			scheme := ""
			if j := strings.Index(raw[:i], "://"); j >= 0 {
				scheme = raw[:j+3]
			}
			return scheme + "xxxxx" + raw[i:]
		}
		if err != nil {
			return raw
		}
	}
	return u.Redacted()
}

// RedisURLForm is the form of a Redis URL, for messages.
const RedisURLForm = "redis://[:password@]host[:port][/db], or rediss://… for TLS"

// ParseRedisURL parses a Redis URL exactly as go-redis does (the run
// connects with what it returns); its error says what was given (password
// hidden) and what is expected, and for a bare host:port which URL to
// write instead.
func ParseRedisURL(raw string) (*redis.Options, error) {
	opt, err := redis.ParseURL(raw)
	if err == nil {
		return opt, nil
	}
	shown := RedactURL(raw)
	scheme, _, hasScheme := strings.Cut(raw, "://")
	switch {
	case raw == "":
		return nil, fmt.Errorf("the Redis URL is empty; expected %s", RedisURLForm)
	case !hasScheme:
		hint := ""
		if host, port, err := net.SplitHostPort(raw); err == nil && !strings.Contains(raw, "@") {
			hint = fmt.Sprintf(" (for that address: redis://%s/0)", net.JoinHostPort(host, port))
		}
		return nil, fmt.Errorf("%q is not a Redis URL: it has no scheme; expected %s%s", shown, RedisURLForm, hint)
	case scheme != "redis" && scheme != "rediss" && scheme != "unix":
		return nil, fmt.Errorf("%q is not a Redis URL: its scheme is %q; expected %s", shown, scheme, RedisURLForm)
	}
	// go-redis's own message may quote the URL whole, password included.
	msg := strings.ReplaceAll(err.Error(), raw, shown)
	return nil, fmt.Errorf("%q is not a Redis URL (%s); expected %s", shown, msg, RedisURLForm)
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

// TweeterDryRun reports whether no network of the feed is configured (X,
// Mastodon or Bluesky): texts are then only logged.
func (c *Config) TweeterDryRun() bool {
	return c.Tweeter.ConsumerKey == "" && !c.Tweeter.Mastodon.On() && !c.Tweeter.Bluesky.On()
}

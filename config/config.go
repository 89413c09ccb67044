// Package config loads and validates the control node's TOML configuration.
//
// Loading happens in two steps, as in ergo and soju: decode (unknown keys are
// errors), then validate and fill defaults, with every error naming the file
// and the key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
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

	DefaultPipelineInterval    = 30 * time.Second
	DefaultPipelineSilentAfter = 5 * time.Minute

	DefaultAnalyzerSweepInterval = 60 * time.Second
	DefaultAnalyzerTrimAfter     = 1000
	// DefaultStreamListen is upstream's WebSocket port, where its
	// dashboard looks for /stream.
	DefaultStreamListen = "127.0.0.1:4568"
	// DefaultStreamMaxLag: entries of one job the trimmer keeps for a
	// lagging live stream.
	DefaultStreamMaxLag = 10000
	// DefaultAnalyzerBatch is the most log entries one atomic step reads.
	DefaultAnalyzerBatch = 5000
	// DefaultAnalyzerDebounce is how long `updates` messages pile up
	// before the logs they announce are read.
	DefaultAnalyzerDebounce = time.Second

	// DefaultQueueIndexRebuild is how often the index of named queues is
	// rebuilt with a SCAN, to find queues other programs created.
	DefaultQueueIndexRebuild = 10 * time.Minute

	// DefaultUpdatesMinBackoff and DefaultUpdatesMaxBackoff bound the wait
	// between attempts to resubscribe to `updates`.
	DefaultUpdatesMinBackoff = 100 * time.Millisecond
	DefaultUpdatesMaxBackoff = 10 * time.Second

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
)

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
	// CommandsPerMinute is the per-nick command throttle.
	CommandsPerMinute int `toml:"commands_per_minute"`
}

// Redis configures the Redis connection or the embedded server.
type Redis struct {
	URL          string   `toml:"url"`
	Listen       string   `toml:"listen"`
	DataDir      string   `toml:"data_dir"`
	Password     string   `toml:"password"`
	SaveInterval Duration `toml:"save_interval"`
}

// Jobs configures job registration.
type Jobs struct {
	Schemes       []string `toml:"schemes"`
	PendingLimit  int      `toml:"pending_limit"`
	IgnoreSetsDir string   `toml:"ignore_sets_dir"`
	UserAgentsDir string   `toml:"user_agents_dir"`
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
}

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
}

// StreamOn reports whether the node runs the live log stream: whenever it
// serves HTTP (listen = "" switches the second listener off too).
func (h HTTP) StreamOn() bool { return h.Listen != "" }

// Console reports whether the console front end is selected.
func (c *Config) Console() bool { return c.IRC.Server == "" }

// Embedded reports whether the embedded Redis server is used.
func (c *Config) Embedded() bool { return c.Redis.URL == "" }

// Default returns the configuration used when no file is given.
func Default() *Config {
	c := &Config{}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	def := func(d *Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	if c.IRC.Nick == "" {
		c.IRC.Nick = "ArchiveBot"
	}
	if c.IRC.MessagesPerSecond == 0 {
		c.IRC.MessagesPerSecond = 1.0
	}
	if c.IRC.Burst == 0 {
		c.IRC.Burst = 3
	}
	if c.IRC.CommandsPerMinute == 0 {
		c.IRC.CommandsPerMinute = 20
	}
	if c.Redis.Listen == "" {
		c.Redis.Listen = "127.0.0.1:6379"
	}
	if c.Redis.DataDir == "" {
		c.Redis.DataDir = "data"
	}
	def(&c.Redis.SaveInterval, 30*time.Second)
	if len(c.Jobs.Schemes) == 0 {
		c.Jobs.Schemes = []string{"http", "https", "ftp"}
	}
	if c.Jobs.PendingLimit == 0 {
		c.Jobs.PendingLimit = 5
	}
	def(&c.Bot.OutcomeWait, DefaultOutcomeWait)
	def(&c.Reaper.Interval, DefaultReaperInterval)
	if c.Reaper.Threshold == 0 {
		c.Reaper.Threshold = DefaultReaperThreshold
	}
	def(&c.Notifier.FinishInterval, DefaultFinishInterval)
	def(&c.Notifier.PipelineInterval, DefaultPipelineInterval)
	def(&c.Notifier.PipelineSilentAfter, DefaultPipelineSilentAfter)
	def(&c.Analyzer.SweepInterval, DefaultAnalyzerSweepInterval)
	if c.Analyzer.TrimAfter == 0 {
		c.Analyzer.TrimAfter = DefaultAnalyzerTrimAfter
	}
	def(&c.Tweeter.Interval, DefaultTweeterInterval)
	def(&c.Tweeter.Delay, DefaultTweeterDelay)
	if c.Tweeter.API == "" {
		c.Tweeter.API = DefaultTweeterAPI
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = "127.0.0.1:4567"
	}
	if c.HTTP.StreamListen == "" {
		c.HTTP.StreamListen = DefaultStreamListen
	}
	if c.HTTP.StreamMaxLag == 0 {
		c.HTTP.StreamMaxLag = DefaultStreamMaxLag
	}
}

// Load reads path (if non-empty), applies REDIS_URL from the environment,
// fills defaults and validates.
func Load(path string) (*Config, error) {
	c := &Config{File: path}
	httpOff, streamOff, lagOff := false, false, false
	if path != "" {
		md, err := toml.DecodeFile(path, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			keys := make([]string, len(und))
			for i, k := range und {
				keys[i] = k.String()
			}
			return nil, fmt.Errorf("%s: unknown key %s", path, strings.Join(keys, ", "))
		}
		// An explicit listen = "" switches the web server off.
		httpOff = md.IsDefined("http", "listen") && c.HTTP.Listen == ""
		streamOff = md.IsDefined("http", "stream_listen") && c.HTTP.StreamListen == ""
		lagOff = md.IsDefined("http", "stream_max_lag") && c.HTTP.StreamMaxLag == 0
	}
	if env := os.Getenv("REDIS_URL"); env != "" {
		c.Redis.URL = env
	}
	c.setDefaults()
	if httpOff {
		c.HTTP.Listen = ""
	}
	if streamOff {
		c.HTTP.StreamListen = ""
	}
	if lagOff {
		c.HTTP.StreamMaxLag = 0
	}
	if err := c.validate(); err != nil {
		name := path
		if name == "" {
			name = "(defaults)"
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
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
		if _, err := url.Parse(c.Redis.URL); err != nil || !strings.HasPrefix(c.Redis.URL, "redis") {
			bad("redis.url", "%q is not a redis:// or rediss:// URL", c.Redis.URL)
		}
	}
	if _, _, err := net.SplitHostPort(c.Redis.Listen); err != nil {
		bad("redis.listen", "%v", err)
	}
	if c.HTTP.Listen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", "%v (write listen = \"\" to switch the web server off)", err)
		}
	}
	if c.HTTP.StreamListen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.StreamListen); err != nil {
			bad("http.stream_listen", "%v (write stream_listen = \"\" to switch it off)", err)
		}
	}
	if c.HTTP.StreamMaxLag < 0 {
		bad("http.stream_max_lag", "must be 0 (no bound) or more")
	}
	for _, s := range c.Jobs.Schemes {
		if s == "" || strings.ToLower(s) != s {
			bad("jobs.schemes", "%q must be a lowercase scheme name", s)
		}
	}
	if c.Jobs.PendingLimit < 0 {
		bad("jobs.pending_limit", "must not be negative")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"redis.save_interval", c.Redis.SaveInterval.Duration},
		{"bot.outcome_wait", c.Bot.OutcomeWait.Duration},
		{"reaper.interval", c.Reaper.Interval.Duration},
		{"notifier.finish_interval", c.Notifier.FinishInterval.Duration},
		{"notifier.pipeline_interval", c.Notifier.PipelineInterval.Duration},
		{"notifier.pipeline_silent_after", c.Notifier.PipelineSilentAfter.Duration},
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
	return errors.Join(errs...)
}

// TweeterDryRun reports whether no Twitter credentials are configured.
func (c *Config) TweeterDryRun() bool { return c.Tweeter.ConsumerKey == "" }

// Package config loads and validates the control node's TOML configuration.
//
// Loading happens in two steps, as in ergo and soju: decode (unknown keys are
// errors), then validate and fill defaults, with every error naming the file
// and the key.
package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
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
	Web      Web      `toml:"web"`
	Log      Log      `toml:"log"`
	HA       HA       `toml:"ha"`
	// Pipelines configures the pipeline API (doc/pipeline-api.md).
	Pipelines Pipelines `toml:"pipelines"`

	// File is the path the configuration was loaded from ("" for defaults).
	File string `toml:"-"`
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
	def(&c.HA.IRCReplayWindow, DefaultIRCReplayWindow)
	def(&c.HA.IRCHandoverAfter, DefaultIRCHandoverAfter)
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
	zero(&c.Jobs.TakeScanLimit, DefaultTakeScanLimit)
	zero(&c.Jobs.BanCheckResponses, DefaultBanCheckResponses)
	zero(&c.Pipelines.Rate, DefaultPipelineRate)
	zero(&c.Pipelines.LogRate, DefaultPipelineLogRate)
	zero(&c.Pipelines.MaxStreams, DefaultPipelineMaxStreams)
	zero(&c.Pipelines.MaxConns, DefaultPipelineMaxConns)
	zero(&c.Pipelines.MaxConnsPerAddr, DefaultPipelineMaxConnsPerAddr)
	zero(&c.Pipelines.MaxWaitingTakes, DefaultPipelineMaxWaitingTakes)
	zero(&c.Pipelines.BodyBudget, DefaultPipelineBodyBudget)
	zero(&c.Pipelines.BodyBudgetPerAddr, DefaultPipelineBodyBudgetPerAddr)
	zero(&c.Pipelines.BodyBudgetPerKey, DefaultPipelineBodyBudgetPerKey)
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
	def(&c.Notifier.AvoidSiteEvery, DefaultAvoidSiteEvery)
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
	zero(&c.HTTP.MaxConns, DefaultHTTPMaxConns)
	zero(&c.HTTP.MaxConnsPerAddr, DefaultHTTPMaxConnsPerAddr)
	def(&c.HTTP.StreamMaxAge, DefaultStreamMaxAge)
	c.Web.setDefaults()
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
	httpOff, streamOff, lagOff, changeOff, avoidSiteOff := false, false, false, false, false
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
			msg := "unknown key " + k.String()
			if s := suggestKey(k.String()); s != "" {
				msg += "; did you mean " + s + "?"
			}
			probs = append(probs, Problem{File: path, Line: keyLine(string(text), k), Msg: msg})
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
		avoidSiteOff = md.IsDefined("notifier", "avoid_site_every") && c.Notifier.AvoidSiteEvery.Duration == 0
		// An explicit budget = 0 is no budget; an explicit limit = 0 no
		// limit.
		for _, b := range []struct {
			keys []string
			v    *int
		}{
			{[]string{"pipelines", "max_conns"}, &c.Pipelines.MaxConns},
			{[]string{"jobs", "ban_check_responses"}, &c.Jobs.BanCheckResponses},
			{[]string{"pipelines", "max_conns_per_addr"}, &c.Pipelines.MaxConnsPerAddr},
			{[]string{"pipelines", "max_waiting_takes"}, &c.Pipelines.MaxWaitingTakes},
			{[]string{"pipelines", "body_budget"}, &c.Pipelines.BodyBudget},
			{[]string{"pipelines", "body_budget_per_addr"}, &c.Pipelines.BodyBudgetPerAddr},
			{[]string{"pipelines", "body_budget_per_key"}, &c.Pipelines.BodyBudgetPerKey},
			{[]string{"http", "recent_max_bytes"}, &c.HTTP.RecentMaxBytes},
			{[]string{"http", "stream_unread_bytes"}, &c.HTTP.StreamUnreadBytes},
			{[]string{"http", "stream_unread_bytes_upstream"}, &c.HTTP.StreamUnreadBytesUpstream},
			{[]string{"http", "max_conns"}, &c.HTTP.MaxConns},
			{[]string{"http", "max_conns_per_addr"}, &c.HTTP.MaxConnsPerAddr},
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
			{"http.stream_max_age", &c.HTTP.StreamMaxAge},
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
	if avoidSiteOff {
		c.Notifier.AvoidSiteEvery.Duration = 0
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
	if c.HA.IRCStandby && (c.HA.IRCReplayWindow.Duration <= 0 || c.HA.IRCHandoverAfter.Duration <= 0) {
		bad("ha.irc_replay_window", "and ha.irc_handover_after must be positive")
	}
	if c.HA.IRCStandby && c.HA.IRCReplayWindow.Duration > MaxIRCReplayWindow {
		bad("ha.irc_replay_window", "must be at most %s (the lifetime of the record that a command was run: a command held longer could run twice at a takeover)", MaxIRCReplayWindow)
	}
	if strings.ContainsAny(c.IRC.StandbyNick, " \r\n\x00!@#,*?") {
		bad("irc.standby_nick", "%q is not a valid nickname", c.IRC.StandbyNick)
	}
	if c.IRC.StandbyNick != "" && strings.EqualFold(c.IRC.StandbyNick, c.IRC.Nick) {
		bad("irc.standby_nick", "must differ from irc.nick (the leader's nick)")
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
	if c.HTTP.MaxConns < 0 || c.HTTP.MaxConnsPerAddr < 0 || c.HTTP.StreamMaxAge.Duration < 0 {
		bad("http.max_conns", "http.max_conns, http.max_conns_per_addr and http.stream_max_age must be 0 (no bound) or more")
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
	if err := checkPublicURL(c.HTTP.PublicURL); err != nil {
		bad("http.public_url", "%v", err)
	}
	c.Web.check(bad)
	if c.HTTP.RecentMaxBytes < 0 {
		bad("http.recent_max_bytes", "must not be negative (0: no cap)")
	}
	if c.Pipelines.MaxConns < 0 || c.Pipelines.MaxConnsPerAddr < 0 || c.Pipelines.MaxWaitingTakes < 0 {
		bad("pipelines.max_conns", "max_conns, max_conns_per_addr and max_waiting_takes must not be negative (0: no limit)")
	}
	if c.Pipelines.BodyBudget < 0 || c.Pipelines.BodyBudgetPerAddr < 0 || c.Pipelines.BodyBudgetPerKey < 0 {
		bad("pipelines.body_budget", "body_budget, body_budget_per_addr and body_budget_per_key must not be negative (0: no limit)")
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
	if c.Jobs.BanCheckResponses < 0 || c.Jobs.BanCheckResponses > 10000 {
		bad("jobs.ban_check_responses", "must be 0 (off) to 10000")
	}
	if c.Jobs.PerUserRunningLimit < 0 {
		bad("jobs.per_user_running_limit", "must not be negative (0 means no limit)")
	}
	if c.Jobs.TakeScanLimit < 0 {
		bad("jobs.take_scan_limit", "must be a positive number of jobs")
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
		{"notifier.avoid_site_every", c.Notifier.AvoidSiteEvery.Duration},
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

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"time"
)

// wantLoadErrors checks that each configuration text fails to load with
// an error naming its key.
func wantLoadErrors(t *testing.T, textKey map[string]string) {
	t.Helper()
	for text, key := range textKey {
		if _, err := Load(write(t, text)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", text, err, key)
		}
	}
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The example file documents every key with its default: loading it must
// give exactly the defaults.
func TestExampleIsDefaults(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv(EnvRedisListen, "")
	t.Setenv(EnvDataDir, "")
	t.Setenv(EnvHTTPListen, "")
	t.Setenv(EnvStreamListen, "")
	got, err := Load("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	got.File = ""
	// irc.channels has no default: the example shows it commented out.
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("example differs from defaults (-want +got):\n%s", d)
	}
}

func TestLoadErrorsNameFileAndKey(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	cases := []struct{ text, want string }{
		{"[irc]\nnick = \"x\"\nbogus = 1\n", "unknown key irc.bogus"},
		{"[reaper]\ninterval = \"soon\"\n", "soon"},
		{"[irc]\nserver = \"http://x\"\nchannels=[\"#a\"]\n", "irc.server"},
		{"[irc]\nserver = \"irc://x\"\n", "irc.channels"},
		{"[irc]\nchannels = [\"nohash\"]\n", "irc.channels"},
		{"[irc]\nsasl = \"nocolon\"\n", "irc.sasl"},
		{"[tweeter]\nconsumer_key = \"k\"\n", "tweeter"},
		{"[tweeter]\napi = \"v3\"\n", "tweeter.api"},
		// The feed's networks and schedules.
		{"[tweeter]\ndigest_schedule = \"every hour\"\n", "tweeter.digest_schedule"},
		{"[tweeter]\nsummary_schedule = \"0 0 * *\"\n", "tweeter.summary_schedule"},
		{"[tweeter]\nsummary_schedule = \"61 0 * * *\"\n", "tweeter.summary_schedule"},
		{"[tweeter]\nbudget = -1\n", "tweeter.budget"},
		{"[tweeter.mastodon]\nbudget_window = \"-1h\"\n", "tweeter.mastodon.budget_window"},
		{"[tweeter.mastodon]\nserver = \"https://m.example\"\n", "tweeter.mastodon"},
		{"[tweeter.mastodon]\nserver = \"m.example\"\naccess_token = \"t\"\n", "tweeter.mastodon.server"},
		{"[tweeter.bluesky]\nidentifier = \"a.bsky.social\"\n", "tweeter.bluesky"},
		{"[tweeter.bluesky]\nservice = \"ftp://x\"\nidentifier = \"a\"\napp_password = \"p\"\n", "tweeter.bluesky.service"},
		{"[redis]\nlisten = \"nope\"\n", "redis.listen"},
		{"[redis]\nproto_max_bulk_len = 1000\n", "redis.proto_max_bulk_len"},
		{"[jobs]\nschemes = [\"HTTP\"]\n", "jobs.schemes"},
		{"[notifier]\npipeline_silent_after = \"1s\"\n", "notifier.pipeline_silent_after"},
		{"[irc]\nchannels = [\"#a\"]\nreport_channel = \"#victim\"\n", "irc.report_channel"},
		// Sentinel and HA keys.
		{"[redis]\nsentinels = [\"127.0.0.1:26379\"]\n", "redis.master_name"},
		{"[redis]\nsentinels = [\"nope\"]\nmaster_name = \"m\"\n", "redis.sentinels"},
		{"[redis]\nurl = \"redis://x:1/0\"\nsentinels = [\"127.0.0.1:26379\"]\nmaster_name = \"m\"\n", "redis.sentinels"},
		{"[redis]\nurl = \"redis://x:1/0\"\nmaster_password = \"p\"\n", "redis.master_name"},
		{"[redis]\nwait_replicas = 1\n", "redis.wait_replicas"},
		{"[redis]\nurl = \"redis://x:1/0\"\nwait_timeout = \"500us\"\n", "redis.wait_timeout"},
		{"[irc]\nserver = \"irc://x\"\nchannels = [\"#a\"]\n[ha]\nenabled = true\n", "ha.enabled"},
		{"[redis]\nurl = \"redis://x:1/0\"\n[ha]\nenabled = true\n", "ha.enabled"},
		{"[redis]\nurl = \"redis://x:1/0\"\n[ha]\nlease_ttl = \"10ms\"\n", "ha.lease_ttl"},
		{"[redis]\nurl = \"redis://x:1/0\"\n[ha]\nirc_standby = true\nirc_replay_window = \"-1s\"\n", "ha.irc_replay_window"},
		{"[redis]\nurl = \"redis://x:1/0\"\n[ha]\nirc_standby = true\nirc_replay_window = \"15m\"\n", "ha.irc_replay_window"},
		{"[irc]\nnick = \"Bot\"\nstandby_nick = \"bot\"\n", "irc.standby_nick"},
		{"[irc]\nnick = \"Bot\"\nstandby_nick = \"Bot sb\"\n", "irc.standby_nick"},
		{"[irc]\nnick = \"Bot\"\nstandby_nick = \"Bot\\r\\nQUIT\"\n", "irc.standby_nick"},
	}
	for _, c := range cases {
		p := write(t, c.text)
		_, err := Load(p)
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: error %q should name %q and the file", c.text, err, c.want)
		}
	}
}

func TestRedisURLFromEnvironment(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://10.0.0.5:6379/2")
	c, err := Load(write(t, "[redis]\nurl = \"redis://other:1/0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.URL != "redis://10.0.0.5:6379/2" || c.Embedded() {
		t.Fatalf("url = %q", c.Redis.URL)
	}
}

func TestDurationsAndModes(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, "[irc]\nserver = \"ircs://irc.example:6697\"\nchannels = [\"#a\", \"#b key\"]\n[reaper]\ninterval = \"500ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Reaper.Interval.Duration != 500*time.Millisecond || c.Console() || !c.Embedded() {
		t.Fatalf("got %+v", c)
	}
	d := Default()
	if !d.Console() || d.Redis.Listen != "127.0.0.1:6379" || d.Reaper.Threshold != 3600 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestHTTPListen(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	if d := Default(); d.HTTP.Listen != "127.0.0.1:4567" {
		t.Fatalf("default http.listen = %q", d.HTTP.Listen)
	}
	c, err := Load(write(t, "[irc]\nnick = \"x\"\n"))
	if err != nil || c.HTTP.Listen != "127.0.0.1:4567" {
		t.Fatalf("left out: %q, %v", c.HTTP.Listen, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"\"\n"))
	if err != nil || c.HTTP.Listen != "" {
		t.Fatalf(`listen = "": %q, %v (want off)`, c.HTTP.Listen, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"0.0.0.0:8080\"\n"))
	if err != nil || c.HTTP.Listen != "0.0.0.0:8080" {
		t.Fatalf("explicit: %q, %v", c.HTTP.Listen, err)
	}
	p := write(t, "[http]\nlisten = \"nope\"\n")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("bad listen: %v", err)
	}
}

// irc.report_channel: left out, the first channel; "" is off; otherwise one
// of the channels, compared without case.
func TestReportChannel(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	for _, c := range []struct{ text, want string }{
		{"[irc]\nchannels = [\"#a key\", \"#b\"]\n", "#a"},
		{"[irc]\nchannels = [\"#a\", \"#b\"]\nreport_channel = \"\"\n", ""},
		{"[irc]\nchannels = [\"#a\", \"#Ops[1]\"]\nreport_channel = \"#ops{1}\"\n", "#ops{1}"},
		{"", ""},
	} {
		cfg, err := Load(write(t, c.text))
		if err != nil {
			t.Errorf("%q: %v", c.text, err)
			continue
		}
		if cfg.IRC.ReportChannel != c.want {
			t.Errorf("%q: report_channel = %q, want %q", c.text, cfg.IRC.ReportChannel, c.want)
		}
	}
}

// The environment and the command line set the embedded Redis's address
// and the data directory; the flag wins over the variable, which wins
// over the file.
func TestListenAndDataDirOverrides(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	p := write(t, "[redis]\nlisten = \"127.0.0.1:7000\"\ndata_dir = \"/file\"\n")
	t.Setenv(EnvRedisListen, "127.0.0.1:7001")
	t.Setenv(EnvDataDir, "/env")
	c, err := Load(p)
	if err != nil || c.Redis.Listen != "127.0.0.1:7001" || c.Redis.DataDir != "/env" {
		t.Fatalf("env: %v %+v", err, c.Redis)
	}
	c, err = LoadWith(p, Overrides{RedisListen: "127.0.0.1:7002", DataDir: "/flag"})
	if err != nil || c.Redis.Listen != "127.0.0.1:7002" || c.Redis.DataDir != "/flag" {
		t.Fatalf("flags: %v %+v", err, c.Redis)
	}
}

// Sentinels select Redis without the embedded server.
func TestSentinelsAreNotEmbedded(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, "[irc]\nserver = \"irc://x\"\nchannels = [\"#a\"]\n[redis]\nsentinels = [\"127.0.0.1:26379\", \"127.0.0.1:26380\"]\nmaster_name = \"m\"\ndb = 2\nwait_replicas = 1\n[ha]\nenabled = true\nnode_id = \"n1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Embedded() || c.Redis.DB != 2 || !c.HA.Enabled || c.HA.NodeID != "n1" || c.HA.LeaseTTL.Duration != DefaultLeaseTTL || c.Redis.WaitTimeout.Duration != DefaultWaitTimeout {
		t.Fatalf("config = %+v %+v", c.Redis, c.HA)
	}
}

// The live stream's keys: left out they take their defaults; "" and 0
// mean off; bad values name the key.
func TestHTTPStreamKeys(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, "[irc]\nnick = \"x\"\n"))
	if err != nil || c.HTTP.StreamListen != "127.0.0.1:4568" || c.HTTP.StreamMaxLag != 10000 || !c.HTTP.StreamOn() ||
		c.HTTP.StreamQueueBytes != 4<<20 || c.HTTP.StreamTotalBytes != 64<<20 {
		t.Fatalf("defaults: %+v, %v", c.HTTP, err)
	}
	c, err = Load(write(t, "[http]\nstream_queue_bytes = 1000\nstream_total_bytes = 50000\n"))
	if err != nil || c.HTTP.StreamQueueBytes != 1000 || c.HTTP.StreamTotalBytes != 50000 {
		t.Fatalf("queue bytes: %+v, %v", c.HTTP, err)
	}
	c, err = Load(write(t, "[http]\nstream_listen = \"\"\nstream_max_lag = 0\n"))
	if err != nil || c.HTTP.StreamListen != "" || c.HTTP.StreamMaxLag != 0 || !c.HTTP.StreamOn() {
		t.Fatalf("off: %+v, %v", c.HTTP, err)
	}
	c, err = Load(write(t, "[http]\nlisten = \"\"\n"))
	if err != nil || c.HTTP.StreamOn() {
		t.Fatalf("listen = \"\" must switch the stream off too: %+v, %v", c.HTTP, err)
	}
	wantLoadErrors(t, map[string]string{
		"[http]\nstream_listen = \"nope\"\n": "http.stream_listen",
		"[http]\nstream_max_lag = -1\n":      "http.stream_max_lag",
		"[http]\nstream_total_bytes = -1\n":  "http.stream_total_bytes",
	})
}

// The feed's budgets default per network; an explicit 0 is no
// budget; schedules are kept as written.
func TestTweeterNetworks(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := Load(write(t, `[tweeter]
digest_schedule = "@hourly"
summary_schedule = "0 0 * * *"
budget = 0
[tweeter.mastodon]
server = "http://127.0.0.1:3000"
access_token = "tok"
[tweeter.bluesky]
identifier = "archivebot.bsky.social"
app_password = "p"
budget = 10
`))
	if err != nil {
		t.Fatal(err)
	}
	tw := c.Tweeter
	if tw.Budget != 0 || tw.Mastodon.Budget != DefaultTweeterMastodonBudget || tw.Mastodon.BudgetWindow.Duration != 3*time.Hour ||
		tw.Bluesky.Budget != 10 || tw.Bluesky.Service != "https://bsky.social" || tw.DigestSchedule != "@hourly" {
		t.Errorf("tweeter = %+v", tw)
	}
	if c.TweeterDryRun() {
		t.Error("dry run with Mastodon and Bluesky configured")
	}
	d := Default()
	if !d.TweeterDryRun() || d.Tweeter.Budget != DefaultTweeterBudget || d.Tweeter.Mastodon.On() || d.Tweeter.Bluesky.On() {
		t.Errorf("defaults = %+v", d.Tweeter)
	}
}

// The web and stream listen addresses have a variable and a flag, as the
// embedded Redis's has: the flag wins over the variable, which wins over
// the file, also over its "" (off).
func TestHTTPListenOverrides(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv(EnvHTTPListen, "")
	t.Setenv(EnvStreamListen, "")
	p := write(t, "[http]\nlisten = \"127.0.0.1:7100\"\nstream_listen = \"\"\n")
	c, err := Load(p)
	if err != nil || c.HTTP.Listen != "127.0.0.1:7100" || c.HTTP.StreamListen != "" {
		t.Fatalf("file: %v %+v", err, c.HTTP)
	}
	t.Setenv(EnvHTTPListen, "127.0.0.1:7101")
	t.Setenv(EnvStreamListen, "127.0.0.1:7102")
	c, err = Load(p)
	if err != nil || c.HTTP.Listen != "127.0.0.1:7101" || c.HTTP.StreamListen != "127.0.0.1:7102" {
		t.Fatalf("env: %v %+v", err, c.HTTP)
	}
	c, err = LoadWith(p, Overrides{HTTPListen: "127.0.0.1:7103", StreamListen: "127.0.0.1:7104"})
	if err != nil || c.HTTP.Listen != "127.0.0.1:7103" || c.HTTP.StreamListen != "127.0.0.1:7104" {
		t.Fatalf("flags: %v %+v", err, c.HTTP)
	}
	t.Setenv(EnvHTTPListen, "nonsense")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestPipelinesConfig(t *testing.T) {
	c, err := Load(write(t, "[pipelines]\nlisten = \"127.0.0.1:0\"\nrate = 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipelines.Listen != "127.0.0.1:0" || c.Pipelines.Rate != 7 || c.Pipelines.LogRate != DefaultPipelineLogRate || c.Pipelines.MaxStreams != DefaultPipelineMaxStreams {
		t.Errorf("pipelines %+v", c.Pipelines)
	}
	wantLoadErrors(t, map[string]string{
		"[pipelines]\nlisten = \"nonsense\"\n":   "pipelines.listen",
		"[pipelines]\ntls_cert = \"cert.pem\"\n": "pipelines.tls_cert",
		"[pipelines]\nlog_rate = -1\n":           "pipelines.rate",
	})
}

// TestPipelinesListenerLimits: the API listener's limits default when
// left out, are off when written as 0, and refuse negative values.
func TestPipelinesListenerLimits(t *testing.T) {
	c, err := Load(write(t, "[pipelines]\nlisten = \"127.0.0.1:0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pipelines
	if p.MaxConns != DefaultPipelineMaxConns || p.MaxConnsPerAddr != DefaultPipelineMaxConnsPerAddr ||
		p.MaxWaitingTakes != DefaultPipelineMaxWaitingTakes || p.ReadTimeout.Duration != DefaultPipelineReadTimeout ||
		p.IdleTimeout.Duration != DefaultPipelineIdleTimeout || p.WriteTimeout.Duration != DefaultPipelineWriteTimeout {
		t.Errorf("defaults: %+v", p)
	}
	c, err = Load(write(t, "[pipelines]\nmax_conns = 0\nmax_conns_per_addr = 0\nmax_waiting_takes = 0\nread_timeout = \"0s\"\nidle_timeout = \"0s\"\nwrite_timeout = \"0s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p = c.Pipelines
	if p.MaxConns != 0 || p.MaxConnsPerAddr != 0 || p.MaxWaitingTakes != 0 || p.ReadTimeout.Duration != 0 ||
		p.IdleTimeout.Duration != 0 || p.WriteTimeout.Duration != 0 {
		t.Errorf("written as 0: %+v", p)
	}
	wantLoadErrors(t, map[string]string{
		"[pipelines]\nmax_conns = -1\n":         "pipelines.max_conns",
		"[pipelines]\nidle_timeout = \"-1s\"\n": "pipelines.read_timeout",
	})
}

// One load reports every problem of a file: TOML syntax errors
// and values of the wrong type with their lines (a value over several
// lines is one problem), unknown keys, then every key's check; never only
// the first.
func TestLoadReportsEveryProblem(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	p := write(t, `[irc]
server = "http://irc.example.net"
channels = ["#a"]
burst = "three"
nick = "x" "y"

[reaper]
threshhold = 5
interval = "soon"

[jobs]
schemes = [
  "http",
  3,
]
pending_limit = -1
`)
	_, err := Load(p)
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("error %v (%T), want Problems", err, err)
	}
	want := []string{
		p + `:4: irc.burst: incompatible types`,
		p + `:5: expected a top-level item to end`,
		p + `:8: unknown key reaper.threshhold; did you mean reaper.threshold?`,
		p + `:9: reaper.interval: time: invalid duration "soon"`,
		p + `:12: jobs.schemes: incompatible types`,
		p + `: irc.server: scheme must be irc:// or ircs://`,
		p + `: jobs.pending_limit: must not be negative`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	for _, key := range []string{"irc.burst", "reaper.interval", "jobs.schemes", "irc.server", "jobs.pending_limit"} {
		if !probs.Has(key) {
			t.Errorf("Problems.Has(%q) = false", key)
		}
	}
}

// LoadPartial returns what it could read, defaults elsewhere, so that
// -check-config can go on to check the rest.
func TestLoadPartialKeepsWhatItRead(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	c, err := LoadPartial(write(t, "[irc]\nburst = \"x\"\nnick = \"Kept\"\n[http]\nlisten = \"\"\n"), Overrides{})
	if err == nil || c == nil {
		t.Fatalf("config %v, error %v", c, err)
	}
	if c.IRC.Nick != "Kept" || c.IRC.Burst != 3 || c.HTTP.Listen != "" {
		t.Fatalf("nick %q burst %d http.listen %q: want the file's nick, the default burst, the web server off", c.IRC.Nick, c.IRC.Burst, c.HTTP.Listen)
	}
}

// A bad Redis URL says what was given (password hidden) and what is
// expected (before: it ended with "redis: invalid URL scheme: ").
func TestRedisURLErrors(t *testing.T) {
	cases := []struct{ url, want string }{
		{"redis//user:secret@localhost:6379", `"xxxxx@localhost:6379" is not a Redis URL: it has no scheme; expected redis://`},
		{"localhost:6379", `"localhost:6379" is not a Redis URL: it has no scheme; expected redis://[:password@]host[:port][/db], or rediss://… for TLS (for that address: redis://localhost:6379/0)`},
		{"127.0.0.1:6379", `(for that address: redis://127.0.0.1:6379/0)`},
		{"http://u:secret@x:1/0", `"http://u:xxxxx@x:1/0" is not a Redis URL: its scheme is "http"; expected redis://`},
		{"redis://u:secret@x:abc/0", `"redis://xxxxx@x:abc/0" is not a Redis URL (parse "redis://xxxxx@x:abc/0": invalid port`},
		{"", "the Redis URL is empty; expected redis://"},
	}
	for _, c := range cases {
		_, err := ParseRedisURL(c.url)
		if err == nil {
			t.Errorf("%q: no error", c.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "secret") || strings.HasSuffix(msg, ": ") {
			t.Errorf("%q: %q, want %q, no password, nothing cut off", c.url, msg, c.want)
		}
	}
	t.Setenv("REDIS_URL", "")
	_, err := Load(write(t, "[redis]\nurl = \"redis//localhost:6379\"\n"))
	if err == nil || strings.HasSuffix(err.Error(), "scheme: ") || !strings.Contains(err.Error(), "redis.url") || !strings.Contains(err.Error(), "expected redis://") {
		t.Fatalf("Load: %v", err)
	}
}

// The embedded Redis's data directory defaults to the user's state
// directory, never the working directory (before: "./data" put the state
// inside the clone the node was started from).
func TestDefaultDataDir(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv(EnvDataDir, "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".local", "state", "archivebot"); c.Redis.DataDir != want {
		t.Errorf("without XDG_STATE_HOME: %q, want %q", c.Redis.DataDir, want)
	}
	t.Setenv("XDG_STATE_HOME", "/srv/state")
	if c, _ := Load(""); c.Redis.DataDir != "/srv/state/archivebot" {
		t.Errorf("XDG_STATE_HOME=/srv/state: %q", c.Redis.DataDir)
	}
	// The specification ignores a relative XDG_STATE_HOME.
	t.Setenv("XDG_STATE_HOME", "relative")
	if c, _ := Load(""); c.Redis.DataDir != filepath.Join(home, ".local", "state", "archivebot") {
		t.Errorf("relative XDG_STATE_HOME: %q", c.Redis.DataDir)
	}
	t.Setenv(EnvDataDir, "/var/lib/archivebot")
	if c, _ := Load(""); c.Redis.DataDir != "/var/lib/archivebot" {
		t.Errorf("%s: %q", EnvDataDir, c.Redis.DataDir)
	}
}

// TestStreamUnreadBytes: the live stream's unread-bytes bounds
// default when left out, are off when written as 0, and
// refuse negative values.
func TestStreamUnreadBytes(t *testing.T) {
	c, err := Load(write(t, "[http]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.StreamUnreadBytes != DefaultStreamUnreadBytes || c.HTTP.StreamUnreadBytesUpstream != DefaultStreamUnreadBytesUpstream {
		t.Errorf("defaults: %d %d", c.HTTP.StreamUnreadBytes, c.HTTP.StreamUnreadBytesUpstream)
	}
	c, err = Load(write(t, "[http]\nstream_unread_bytes = 0\nstream_unread_bytes_upstream = 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.StreamUnreadBytes != 0 || c.HTTP.StreamUnreadBytesUpstream != 0 {
		t.Errorf("written as 0: %d %d", c.HTTP.StreamUnreadBytes, c.HTTP.StreamUnreadBytesUpstream)
	}
	wantLoadErrors(t, map[string]string{
		"[http]\nstream_unread_bytes_upstream = -1\n": "http.stream_unread_bytes",
	})
}

// TestBanCheckResponses: jobs.ban_check_responses defaults to 50 when left
// out, is off when written as 0, and refuses negative or huge values.
func TestBanCheckResponses(t *testing.T) {
	c, err := Load(write(t, "[jobs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Jobs.BanCheckResponses != DefaultBanCheckResponses {
		t.Errorf("default %d, want %d", c.Jobs.BanCheckResponses, DefaultBanCheckResponses)
	}
	c, err = Load(write(t, "[jobs]\nban_check_responses = 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Jobs.BanCheckResponses != 0 {
		t.Errorf("written as 0: %d", c.Jobs.BanCheckResponses)
	}
	wantLoadErrors(t, map[string]string{
		"[jobs]\nban_check_responses = -1\n":    "jobs.ban_check_responses",
		"[jobs]\nban_check_responses = 20000\n": "jobs.ban_check_responses",
	})
}

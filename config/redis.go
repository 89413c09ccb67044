package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the Redis connection, the embedded Redis and HA.
const (
	// DefaultMaxClockSkew: how far a node's clock may be from Redis's
	// TIME for it to lead (ha.max_clock_skew).
	DefaultMaxClockSkew = 5 * time.Second

	// DefaultPubSubMinBackoff and DefaultPubSubMaxBackoff bound the wait
	// between attempts to resubscribe to a pub/sub channel (`updates`,
	// job events).
	DefaultPubSubMinBackoff = 100 * time.Millisecond
	DefaultPubSubMaxBackoff = 10 * time.Second

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
	// IRCStandby keeps every node connected to IRC, the standbys silent
	// under irc.standby_nick, so a takeover answers on a connection that
	// is already up (doc/reliability.md, A hot standby on IRC).
	IRCStandby bool `toml:"irc_standby"`
	// IRCReplayWindow is how long a standby holds a command typed while
	// it did not lead, to run it if it leads next and no leader ran it.
	IRCReplayWindow Duration `toml:"irc_replay_window"`
	// IRCHandoverAfter is how long a leader without IRC keeps the lease
	// while another node reports a registered IRC connection.
	IRCHandoverAfter Duration `toml:"irc_handover_after"`
}

// Defaults of the hot standby on IRC (HA.IRCStandby).
const (
	DefaultIRCReplayWindow  = 2 * time.Minute
	DefaultIRCHandoverAfter = 10 * time.Second
	// MaxIRCReplayWindow bounds ha.irc_replay_window: a leader's record
	// that it ran a command that changes jobs lives as long as the
	// command's outcome record (store.DefaultCommandTTL, 10 minutes); a
	// command held longer than that would find no record at a takeover
	// and run again.
	MaxIRCReplayWindow = 10 * time.Minute
)

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

package config

import (
	"fmt"
	"net/url"
	"time"
)

// Defaults of dashboard sign-in and actions (doc/web.md, Signing in and
// acting).
const (
	DefaultSessionTTL = 12 * time.Hour
	// DefaultSessionsPerNick and DefaultSessionsTotal bound live sessions.
	DefaultSessionsPerNick = 5
	DefaultSessionsTotal   = 1000
	// DefaultActionsPerMinute bounds one session's actions;
	// DefaultAddressPerMinute one address's sign-ins and actions together.
	DefaultActionsPerMinute = 30
	DefaultAddressPerMinute = 60
	// DefaultSessionsRankless bounds the sessions of nicks without a rank
	// at sign-in: a tenth of the default total, so that 900 places stay
	// for those with one whatever strangers do (the default is a tenth
	// of sessions_total, at least 1).
	DefaultSessionsRankless = DefaultSessionsTotal / 10
	// WebSecretFile is the name of the dashboard's key in the data
	// directory when web.secret_file is not set.
	WebSecretFile = "web-secret"
)

// Web configures dashboard sign-in through IRC and the dashboard's
// actions. They are on when http.public_url is set.
type Web struct {
	// SessionTTL is how long a session lasts after sign-in (default 12h).
	SessionTTL Duration `toml:"session_ttl"`
	// SessionsPerNick and SessionsTotal bound live sessions (defaults 5
	// and 1000); a sign-in past either is refused, said and counted.
	SessionsPerNick int `toml:"sessions_per_nick"`
	SessionsTotal   int `toml:"sessions_total"`
	// SessionsRankless bounds, within SessionsTotal, the sessions of nicks
	// that had no rank in any of the bot's channels at !login (default a
	// tenth of SessionsTotal, 100; written as -1: no bound of its own). It must be below
	// SessionsTotal, so that ops can always sign in.
	SessionsRankless int `toml:"sessions_rankless"`
	// SecretFile holds the key of the sessions' ids, MACs and CSRF tokens
	// (at least 32 bytes; never in Redis). Default: web-secret in
	// redis.data_dir, made at the first start. The nodes of one HA
	// deployment must share it (doc/web.md, What a Redis writer can do).
	SecretFile string `toml:"secret_file"`
	// ActionsPerMinute bounds one session's actions (default 30);
	// AddressPerMinute one remote address's sign-ins and actions (60).
	ActionsPerMinute int `toml:"actions_per_minute"`
	AddressPerMinute int `toml:"address_per_minute"`
}

func (w *Web) setDefaults() {
	if w.SessionTTL.Duration == 0 {
		w.SessionTTL.Duration = DefaultSessionTTL
	}
	zero(&w.SessionsPerNick, DefaultSessionsPerNick)
	zero(&w.SessionsTotal, DefaultSessionsTotal)
	zero(&w.SessionsRankless, max(w.SessionsTotal/10, 1))
	zero(&w.ActionsPerMinute, DefaultActionsPerMinute)
	zero(&w.AddressPerMinute, DefaultAddressPerMinute)
}

// check reports what is wrong with the section.
func (w Web) check(bad func(key, format string, a ...any)) {
	if w.SessionTTL.Duration < time.Minute {
		bad("web.session_ttl", "must be at least 1m, got %v", w.SessionTTL.Duration)
	}
	if w.SessionsPerNick < 0 || w.SessionsTotal < 0 || w.ActionsPerMinute < 0 || w.AddressPerMinute < 0 {
		bad("web.sessions_per_nick", "sessions_per_nick, sessions_total, actions_per_minute and address_per_minute must not be negative")
	}
	if w.SessionsRankless < -1 || (w.SessionsTotal > 0 && w.SessionsRankless >= w.SessionsTotal) {
		bad("web.sessions_rankless", "must be below sessions_total (%d), so that those with a rank can always sign in, got %d (-1: no bound of its own)", w.SessionsTotal, w.SessionsRankless)
	}
}

// checkPublicURL says what is wrong with http.public_url ("" is fine: off).
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an http:// or https:// base URL (like https://archivebot.example/)", s)
	}
	return nil
}

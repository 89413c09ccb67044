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

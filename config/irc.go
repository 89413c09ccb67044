package config

import (
	"strings"
)

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
	// StandbyNick is the nick of a hot standby (ha.irc_standby) while it
	// does not lead; "" (the default): Nick followed by "-sb" and three
	// characters of the node id's hash, so that standbys do not collide
	// (derived where it is used, cmd/archivebot).
	StandbyNick string `toml:"standby_nick"`
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

package irc

import (
	"time"

	"github.com/archiveteam/archivebot-go/bot"
)

// Rank is nick's rank in channel as the bot sees it now (the dashboard's
// actions read it when they run, doc/web.md, Signing in and acting; the
// account is Account, membership.go).
func (c *Client) Rank(channel, nick string) bot.Rank { return c.state.Rank(channel, nick) }

// Presence names nick's present, unbroken stay in the bot's channels: the
// same id from the moment the bot sees it in one of them until it is in
// none (it parts, is kicked, quits, changes nick, or the bot reconnects);
// "" while it is in none. A dashboard session made without a services
// account is bound to it (doc/web.md, What is promised).
func (c *Client) Presence(nick string) string { return c.state.Presence(nick) }

// AllowCommand counts one command of nick against the per-user throttle
// its IRC commands use (privileged: voiced or op where it acts) and
// reports whether it may run: a dashboard action that the channel sees
// shares the nick's limit.
func (c *Client) AllowCommand(nick string, privileged bool) bool {
	return c.throttle.allow(c.state.Fold(nick), privileged, time.Now())
}

// CommandLimits are the throttle's limits per minute, without and with a
// rank, for the refusal's text.
func (c *Client) CommandLimits() (plain, privileged int) {
	return c.throttle.limitFor(false), c.throttle.limitFor(true)
}

// OnPresenceEnd makes f hear the folded nick of every presence that ends
// (a PART, KICK, QUIT or NICK that leaves a nick in none of the bot's
// channels, and every presence at a reconnect), so that the dashboard
// ends the sessions bound to it at once. f runs on the reader goroutine:
// it must not block.
func (c *Client) OnPresenceEnd(f func(nickKey string)) { c.presenceEnd.Store(&f) }

// tellPresenceEnded hands the presences that ended to OnPresenceEnd's f.
func (c *Client) tellPresenceEnded() {
	ended := c.state.takeEnded()
	f := c.presenceEnd.Load()
	if f == nil || *f == nil {
		return
	}
	for _, k := range ended {
		(*f)(k)
	}
}

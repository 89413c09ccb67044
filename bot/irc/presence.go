package irc

import "github.com/archiveteam/archivebot-go/bot"

// Rank is nick's rank in channel as the bot sees it now (the dashboard's
// actions read it when they run, doc/web.md, Signing in and acting; the
// account is Account, membership.go).
func (c *Client) Rank(channel, nick string) bot.Rank { return c.state.Rank(channel, nick) }

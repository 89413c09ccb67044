package irc

import "github.com/archiveteam/archivebot-go/bot"

// Rank is nick's rank in channel as the bot sees it now (the dashboard's
// actions read it when they run, doc/web.md, Signing in and acting).
func (c *Client) Rank(channel, nick string) bot.Rank { return c.state.Rank(channel, nick) }

// Account is the services account nick is logged into; known is false
// while the client tracks no accounts (account-tag and extended-join are
// not negotiated yet), and the dashboard then binds sessions to the nick
// alone.
func (c *Client) Account(nick string) (account string, known bool) { return "", false }

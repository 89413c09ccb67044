package irc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/ergochat/irc-go/ircmsg"
)

// onMessage is every callback: bookkeeping first, then commands. It runs
// on ircevent's reader goroutine and must never block.
func (c *Client) onMessage(msg ircmsg.Message) {
	gen := c.gen.Load()
	for _, ev := range c.state.handle(msg) {
		c.onEvent(ev, gen)
	}
	c.tellPresenceEnded()
	c.onNickFreed(msg)
	if msg.Command == "NICK" && len(msg.Params) > 0 {
		c.throttle.rename(c.state.Fold(msg.Nick()), c.state.Fold(msg.Params[0]))
	}
	if msg.Command == "PRIVMSG" {
		if req, ok := c.request(msg); ok {
			c.accept(req)
		}
	}
}

// request turns a PRIVMSG into a bot request, if it is one of our
// commands: in a configured channel, with the sender's rank there; or
// sent to us privately, with Channel "". Lines in any other channel are
// not commands: that channel's operators are not ours.
func (c *Client) request(msg ircmsg.Message) (bot.Request, bool) {
	if len(msg.Params) < 2 {
		return bot.Request{}, false
	}
	nuh, err := msg.NUH()
	if err != nil || nuh.Name == "" || (nuh.User == "" && nuh.Host == "" && strings.Contains(nuh.Name, ".")) {
		return bot.Request{}, false // from a server, not a user
	}
	nick, target, line := nuh.Name, msg.Params[0], msg.Params[1]
	if c.state.Fold(nick) == c.state.Fold(c.state.Me()) {
		return bot.Request{}, false
	}
	if strings.HasPrefix(line, "\x01") || !c.bot.IsCommand(line) {
		return bot.Request{}, false
	}
	req := bot.Request{Nick: nick, NickKey: c.state.Fold(nick), Text: line}
	if c.Standby != nil {
		req.Line = c.lineKey(msg, nuh, target, line)
	}
	// The account as the server told it: by this very line's tag
	// (account-tag; the tracker read it before this), else by
	// extended-join or account-notify. Tags are trusted only when the
	// capability was negotiated.
	req.Account, _ = c.state.Account(nick)
	switch {
	case c.state.IsChannel(target):
		if _, ok := c.configured(target); !ok {
			return bot.Request{}, false
		}
		req.Channel = target
		req.Rank = c.state.Rank(target, nick)
	case c.state.Fold(target) == c.state.Fold(c.state.Me()):
		// private message
	default:
		return bot.Request{}, false // e.g. "@#chan" (to ops only), "$mask"
	}
	return req, true
}

// accept applies the per-user throttle and hands the request to the
// user's worker. Every command is run or answered with the reason it was
// not.
func (c *Client) accept(req bot.Request) {
	if c.Standby != nil {
		c.see(req.Line)
		if c.silent() && c.hold(req) {
			return // a standby: held for the next leader (standby.go)
		}
	}
	c.run(req, false)
}

// run applies the per-user throttle and hands the request to the user's
// worker; held marks a command a hot standby held and runs at a takeover.
func (c *Client) run(req bot.Request, held bool) {
	key := c.state.Fold(req.Nick)
	r := c.newReplier(req)
	r.held = held
	privileged := !req.Private() && req.Rank >= bot.RankVoice
	if !c.throttle.allow(key, privileged, time.Now()) {
		c.log.Info("throttling user", "nick", req.Nick, "text", req.Text)
		msg := fmt.Sprintf("Sorry, slow down: at most %d commands a minute (%d for voiced users and operators); this one was not run: %s",
			c.throttle.limitFor(false), c.throttle.limitFor(true), text.Cut(req.Text, 100))
		// Queued behind the user's earlier commands, so it follows their
		// answers instead of overtaking them.
		if c.disp.submit(key, func() { r.Reply(msg) }) != nil {
			r.Reply(msg)
		}
		return
	}
	switch err := c.disp.submit(key, func() { c.handle(req, r) }); err {
	case nil:
	case errStopped:
		c.log.Warn("refused a command: shutting down", "nick", req.Nick, "text", req.Text)
		r.Reply("Sorry, I'm shutting down; this one was not run: " + text.Cut(req.Text, 100))
	default:
		c.log.Warn("refused a command: too many queued for this user", "nick", req.Nick, "text", req.Text)
		r.Reply("Sorry, too many of your commands are waiting to run; this one was not run: " + text.Cut(req.Text, 100))
	}
}

func (c *Client) handle(req bot.Request, r *replier) {
	ctx, cancel := context.WithTimeout(c.cmdCtx, c.commandTimeout)
	defer cancel()
	if c.Standby != nil && req.Line != "" && !c.bot.RecordsLine(req.Text) {
		// A command whose own script does not record its line: record it
		// first, so a node taking over does not answer it again (at most
		// once: lost if this node dies between the two).
		fresh, err := c.Standby.Ledger.MarkIRCRan(ctx, req.Line, 2*c.Standby.Window)
		switch {
		case err != nil:
			c.log.Warn("command not run: could not record it for a hot standby", "nick", req.Nick, "text", req.Text, "err", err)
			r.Reply("Sorry, backend unavailable: Redis cannot be reached right now. Please try again in a minute.")
			return
		case !fresh && r.held:
			c.log.Info("command not run: an earlier leader ran it", "nick", req.Nick, "text", req.Text)
			return
		}
		// A line typed anew while this node leads runs even when its key
		// was recorded before: the same text from the same user (the hash
		// key), not one this node held.
	}
	c.bot.Handle(ctx, req, r)
}

package bot

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LoginRefusal is a sign-in link the web server will not issue, and why
// (one sentence the user is told).
type LoginRefusal string

func (e LoginRefusal) Error() string { return string(e) }

// LoginLinkTTL is how long a !login link works: every text that says so
// (the bot's reply, the sign-in pages, the README) is made from it.
const LoginLinkTTL = 2 * time.Minute

// LoginLinkValidity is LoginLinkTTL in words: "2 minutes".
func LoginLinkValidity() string {
	if m := LoginLinkTTL / time.Minute; LoginLinkTTL%time.Minute == 0 {
		if m == 1 {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", m)
	}
	return LoginLinkTTL.String()
}

// !login (!web): a one-time dashboard sign-in link, always in private
// (doc/web.md, Signing in and acting). Rank is not judged here: the
// dashboard reads it from the channel when an action runs.
func runLogin(ctx context.Context, b *Bot, c *Call) error {
	if b.opts.Login == nil {
		c.Refuse("Sorry, signing in to the dashboard is off here (http.public_url is not set).")
		return nil
	}
	if c.Req.Where == WhereWeb {
		c.Refuse("Sorry, !login works only from IRC.")
		return nil
	}
	link, err := b.opts.Login(ctx, c.Req)
	var lr LoginRefusal
	if errors.As(err, &lr) {
		c.Refuse("Sorry, %s", string(lr))
		return nil
	}
	if err != nil {
		return err
	}
	c.Out.Private(fmt.Sprintf("Your dashboard sign-in link, for you alone, valid once within %s: %s", LoginLinkValidity(), link))
	if !c.Req.Private() {
		c.Reply("I sent you a sign-in link in private.")
	}
	return nil
}

// !logout: end the nick's dashboard sessions.
func runLogout(ctx context.Context, b *Bot, c *Call) error {
	if b.opts.Logout == nil {
		c.Refuse("Sorry, signing in to the dashboard is off here (http.public_url is not set).")
		return nil
	}
	n, err := b.opts.Logout(ctx, c.Req)
	if err != nil {
		return err
	}
	switch n {
	case 0:
		c.Reply("You had no dashboard sessions.")
	case 1:
		c.Reply("Ended your dashboard session.")
	default:
		c.Reply("Ended your %d dashboard sessions.", n)
	}
	return nil
}

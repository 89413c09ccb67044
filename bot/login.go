package bot

import (
	"context"
	"errors"
	"fmt"
)

// LoginRefusal is a sign-in link the web server will not issue, and why
// (one sentence the user is told).
type LoginRefusal string

func (e LoginRefusal) Error() string { return string(e) }

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
	c.Out.Private(fmt.Sprintf("Your dashboard sign-in link, for you alone, valid once within 2 minutes: %s", link))
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

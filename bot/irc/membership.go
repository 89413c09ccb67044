package irc

import (
	"context"
	"fmt"
	"github.com/archiveteam/archivebot-go/bot"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
)

// membership is the client's part that knows the channels: which are
// configured, which the bot is in or wants to be in, who is in them with
// which rank (the tracker, state.go), and who waits for a JOIN.
type membership struct {
	// state follows what the server says: the bot's nick, ISUPPORT, the
	// channels it is in and their members' ranks.
	state  *tracker
	config []chanSpec // configured channels, in order
	// report is the configured channel that takes reports meant for
	// other channels; "" when irc.report_channel is off.
	report string

	mu       sync.Mutex
	wanted   map[string]chanSpec     // channels to be in, by folded name
	joinWait map[string][]chan error // Announce waiting for a JOIN, by folded name
	rejoins  map[string]*time.Timer  // scheduled rejoins after KICK
	keys     map[string]string       // channel keys from the config, by folded name

	// Tunables; tests shorten them.
	rejoinEvery     time.Duration // retry channels we are not in
	kickRejoinDelay time.Duration
	joinTimeout     time.Duration // Announce waiting for a JOIN
}

type chanSpec struct{ name, key string }

// chanKey folds a channel name for the client's own maps. It does not
// follow the server's CASEMAPPING (which can change on reconnect): the
// rfc1459 folding is the widest, so a name never maps to two keys.
func chanKey(name string) string { return foldCase("rfc1459", name) }

// configured returns the configured channel that name is, compared under
// the server's CASEMAPPING.
func (c *Client) configured(name string) (chanSpec, bool) {
	if name == "" {
		return chanSpec{}, false
	}
	f := c.state.Fold(name)
	for _, s := range c.config {
		if c.state.Fold(s.name) == f {
			return s, true
		}
	}
	return chanSpec{}, false
}

// route says where a report meant for channel goes: the channel itself
// when it is one of ours; otherwise the report channel, with via naming
// the channel it was meant for (shortened: pipelines write it). Without a
// report channel it cannot be delivered.
func (c *Client) route(channel string) (dest, via string, err error) {
	if s, ok := c.configured(channel); ok {
		return s.name, "", nil
	}
	if channel != "" {
		via = text.Cut(cleanText(channel), 64)
	}
	if c.report == "" {
		return "", "", fmt.Errorf("%w: %q is not one of the configured channels and irc.report_channel is off", news.ErrCannotDeliver, via)
	}
	return c.report, via, nil
}

// Channels lists the configured channels (without keys).
func (c *Client) Channels() []string {
	out := make([]string, len(c.config))
	for i, s := range c.config {
		out[i] = s.name
	}
	return out
}

// joinWanted sends JOIN for every channel we should be in and are not.
func (c *Client) joinWanted(gen uint64) {
	c.mu.Lock()
	specs := make([]chanSpec, 0, len(c.wanted))
	// Configured channels first, in configured order.
	seen := map[string]bool{}
	for _, s := range c.config {
		k := chanKey(s.name)
		if _, ok := c.wanted[k]; ok && !seen[k] {
			specs = append(specs, s)
			seen[k] = true
		}
	}
	for k, s := range c.wanted {
		if !seen[k] {
			specs = append(specs, s)
		}
	}
	c.mu.Unlock()
	for _, s := range specs {
		if !c.state.Joined(s.name) {
			c.sendJoin(s, gen)
		}
	}
}

// sendJoin queues a JOIN (with the channel's key) ahead of messages.
func (c *Client) sendJoin(s chanSpec, gen uint64) {
	params := []string{s.name}
	if s.key != "" {
		params = append(params, s.key)
	}
	c.control(gen, "JOIN", params...)
}

func (c *Client) onEvent(ev event, gen uint64) {
	switch ev.kind {
	case evSelfJoin:
		if _, ok := c.configured(ev.channel); !ok {
			// Put there by the server or a services bot: its operators
			// are not ours.
			c.log.Warn("in a channel that is not configured; leaving it", "channel", ev.channel)
			c.control(gen, "PART", ev.channel, "not one of my channels")
			return
		}
		c.log.Info("joined channel", "channel", ev.channel)
		c.wakeJoin(ev.channel, nil)
		if c.state.AccountsByWho() {
			// Members already there are known only once they speak or
			// their account changes; WHOX tells them now.
			c.control(gen, "WHO", ev.channel, "%tna,"+whoxToken)
		}
	case evSelfPart:
		c.log.Warn("left channel", "channel", ev.channel)
	case evSelfKicked:
		c.log.Warn("kicked from channel; rejoining", "channel", ev.channel, "by", ev.nick, "reason", ev.reason)
		c.scheduleRejoin(ev.channel, gen)
	case evJoinFailed:
		c.log.Warn("cannot join channel", "channel", ev.channel, "reason", ev.reason)
		c.wakeJoin(ev.channel, fmt.Errorf("%w: %s: %s", news.ErrCannotDeliver, ev.channel, ev.reason))
	case evNickGone:
		if c.state.Fold(ev.nick) == c.state.Fold(c.cfg.Nick) {
			c.reclaimNick(gen)
		}
	case evSelfNick:
		c.log.Info("nick changed", "nick", ev.nick)
	case evNamesStale:
		c.control(gen, "NAMES", ev.channel)
	case evBotMode:
		// ISUPPORT came after the session started (else setBotMode ran
		// there already).
		if c.connected.Load() {
			c.setBotMode(gen)
		}
	}
}

// scheduleRejoin rejoins channel after a short delay (a kick is often a
// warning; rejoining in the same instant looks like a bot out of control).
func (c *Client) scheduleRejoin(channel string, gen uint64) {
	key := chanKey(channel)
	c.mu.Lock()
	defer c.mu.Unlock()
	spec, ok := c.wanted[key]
	if !ok {
		return
	}
	if t := c.rejoins[key]; t != nil {
		t.Stop()
	}
	c.rejoins[key] = time.AfterFunc(c.kickRejoinDelay, func() {
		run.Guard(c.log, "rejoin", func() {
			c.mu.Lock()
			delete(c.rejoins, key)
			c.mu.Unlock()
			if c.gen.Load() == gen && c.connected.Load() && !c.state.Joined(spec.name) {
				c.sendJoin(spec, gen)
			}
		})
	})
}

// join joins channel, a configured one, for an announcement and waits for
// the outcome.
func (c *Client) join(ctx context.Context, channel string, gen uint64) error {
	key := chanKey(channel)
	res := make(chan error, 1)
	c.mu.Lock()
	c.joinWait[key] = append(c.joinWait[key], res)
	spec := chanSpec{name: channel, key: c.keys[key]}
	c.mu.Unlock()
	c.sendJoin(spec, gen)
	t := time.NewTimer(c.joinTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("irc: no answer to JOIN %s", channel)
	}
	if err != nil {
		c.mu.Lock()
		ws := c.joinWait[key]
		for i, w := range ws {
			if w == res {
				c.joinWait[key] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return err
	}
	return nil
}

func (c *Client) wakeJoin(channel string, err error) {
	key := chanKey(channel)
	c.mu.Lock()
	ws := c.joinWait[key]
	delete(c.joinWait, key)
	c.mu.Unlock()
	for _, w := range ws {
		w <- err
	}
}

func (c *Client) failJoinWaiters(err error) {
	c.mu.Lock()
	all := c.joinWait
	c.joinWait = map[string][]chan error{}
	c.mu.Unlock()
	for _, ws := range all {
		for _, w := range ws {
			w <- err
		}
	}
}

// Account returns the services account nick is logged into ("" when it is
// logged into none) and whether the bot knows: known is false when the
// server gives no account information (it offers none of account-tag,
// extended-join and account-notify) or has not given it for this nick yet
// (a member present before the bot joined who has not spoken since).
// Nicks outside the bot's channels are not known.
func (c *Client) Account(nick string) (account string, known bool) {
	return c.state.Account(nick)
}

// NicksOf returns the nicks in the bot's channels logged into account,
// as far as the server told (web.AccountHolders: a dashboard session bound
// to an account acts through the account's holder, whatever its nick).
func (c *Client) NicksOf(account string) []string { return c.state.NicksOf(account) }

// Whois tells the bot's !whois what the membership part knows of nick:
// its rank in channel (one of ours) and its services account
// (bot.Directory).
func (c *Client) Whois(channel, nick string) bot.Whois {
	var w bot.Whois
	if _, ok := c.configured(channel); ok && c.state.In(channel, nick) {
		w.InChannel, w.Rank = true, c.state.Rank(channel, nick)
	}
	w.Account, w.AccountKnown = c.state.Account(nick)
	w.NickKey = c.state.Fold(nick)
	return w
}

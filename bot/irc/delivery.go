package irc

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/news"
)

// Replies and finish reports wait in queues of their own, not in the
// commands that produce them: a command's Reply returns at once, so its
// user's next command runs when it arrives, whatever the reply backlog.
// One sender goroutine per queue (per user, per report channel) hands the
// lines to the outbox one batch at a time; what piled up meanwhile is
// combined into fewer lines:
//
//   - a user's answers to several commands become one message,
//     "erin: 20 commands done, 2 refused: Added ignore pattern {a, b, …}
//     to job X. | Sorry, …", split over as many lines as it needs;
//   - finish reports for one nick become "NICK: N of your jobs finished:
//     URL (IDENT), …" lines, each within the IRC line limit.

// Thresholds for combining; tests shorten or lengthen them.
const (
	// defaultCombineReplies: answers to this many commands waiting for
	// one user are sent as one combined message.
	defaultCombineReplies = 3
	// defaultCombineFinish: more finish reports than this waiting for a
	// channel are combined per nick (about as many seconds of channel at
	// the default rate).
	defaultCombineFinish = 5
)

// delivery is the client's part that gets lines out: the outbox every
// line goes through (outbox.go) and the queues in front of it, one per
// user for answers (replies.go) and one per channel for finish reports
// (finish.go), with the acknowledgement of each report.
type delivery struct {
	out      *outbox
	replies  *keyedQueue[replyItem]   // answers waiting, by folded nick
	finishes *keyedQueue[*finishItem] // finish reports waiting, by folded channel

	cmdSeq atomic.Uint64 // numbers commands, for combining answers

	// Tunables; tests shorten or lengthen them.
	replyMaxAge    time.Duration // a reply not sent by then is dropped
	combineReplies int           // see defaultCombineReplies
	combineFinish  int           // see defaultCombineFinish
}

// nickLen is the longest nick the server may prefix our lines with.
func (c *Client) nickLen() int {
	n := c.state.NickLen()
	if n > 64 {
		n = 64
	}
	for _, s := range []string{c.state.Me(), c.cfg.Nick} {
		if len(s)+4 > n {
			n = len(s) + 4 // room for an alternate like "Nick_12"
		}
	}
	return n
}

// Announce posts text in channel and returns nil once every line of it
// was written to the socket (news.Announcer). Without a connection
// it fails at once so the caller keeps the notice for later. A channel
// that is not configured is never joined: the text goes to the report
// channel as "[for CHANNEL] text", or, without one, the error wraps
// news.ErrCannotDeliver, as it does when the server refuses to let
// the bot into a configured channel.
func (c *Client) Announce(ctx context.Context, channel, text string) error {
	if _, up := c.out.connected(); !up || !c.connected.Load() {
		return errNotConnected
	}
	dest, via, err := c.route(channel)
	if err != nil {
		return err
	}
	if via != "" {
		text = "[for " + via + "] " + text
	}
	lines, err := messageLines("PRIVMSG", dest, "", text, c.nickLen())
	if err != nil {
		return fmt.Errorf("%w: %v", news.ErrCannotDeliver, err)
	}
	if len(lines) == 0 {
		return nil
	}
	return c.postChannel(ctx, dest, lines)
}

// postChannel sends lines to channel, one of ours, joining it first when
// the bot is not in it, and returns once all were written and the server
// confirmed it read them (confirm.go): the caller acknowledges a report
// on nil, and a write is not a read (a TCP reset discards what the
// server had not read). Unconfirmed, the whole report is sent again
// later, never only a part: a line lost in a reset is sent again, and a
// line the server did read may then be repeated (at least once).
func (c *Client) postChannel(ctx context.Context, channel string, lines [][]byte) error {
	gen, up := c.out.connected()
	if !up || !c.connected.Load() {
		return errNotConnected
	}
	if !c.state.Joined(channel) {
		if err := c.join(ctx, channel, gen); err != nil {
			return err
		}
	}
	if _, err := c.out.sendN(ctx, "a:"+c.state.Fold(channel), gen, time.Time{}, false, lines...); err != nil {
		return err
	}
	return c.out.confirm(ctx, gen)
}

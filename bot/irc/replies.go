package irc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
)

// replier answers one request. Reply and Private queue the answer for the
// user's reply sender (below) and return at once, so a command takes
// effect when it arrives, whatever the reply backlog; one user's answers
// still go out in order.
type replier struct {
	c   *Client
	req bot.Request
	cmd uint64
	// held: a command a hot standby held, run at a takeover (standby.go).
	held bool
}

func (c *Client) newReplier(req bot.Request) *replier {
	return &replier{c: c, req: req, cmd: c.cmdSeq.Add(1)}
}

func (r *replier) replyTarget() string {
	if r.req.Private() {
		return r.req.Nick
	}
	return r.req.Channel
}

func (r *replier) prefix() string {
	if r.req.Private() {
		return ""
	}
	return r.req.Nick + ": "
}

func (r *replier) Reply(text string) { r.post(r.replyTarget(), r.prefix(), text) }

func (r *replier) Private(text string) { r.post(r.req.Nick, "", text) }

func (r *replier) post(target, prefix, text string) {
	c := r.c
	c.queueReply(c.state.Fold(r.req.Nick), r.req.Nick, replyItem{
		cmd: r.cmd, target: target, prefix: prefix, text: text,
		expires: time.Now().Add(c.replyMaxAge),
	})
}

// replyItem is one Reply or Private call.
type replyItem struct {
	cmd     uint64 // the command it answers
	target  string // channel or nick
	prefix  string // "nick: " in a channel
	text    string
	expires time.Time
}

// queueReply adds an answer for the user with folded nick key and starts
// the user's sender when none runs. It never blocks.
func (c *Client) queueReply(key, nick string, it replyItem) {
	// Never refused: the queue has no bound and is never stopped.
	_ = c.replies.push(key, nick, it)
}

// takeReplies is the size of a user's next batch of answers: one at a
// time while few wait, all at once, combined, when answers to
// combineReplies commands or more have piled up.
func (c *Client) takeReplies(waiting []replyItem) int {
	if commandsIn(waiting) >= c.combineReplies {
		return len(waiting)
	}
	return 1
}

// waitReplies waits until every queued answer was handed to the outbox
// and sent (or failed), or ctx ends.
func (c *Client) waitReplies(ctx context.Context) bool { return c.replies.wait(ctx) }

func commandsIn(items []replyItem) int {
	n := 0
	for i, it := range items {
		if i == 0 || it.cmd != items[i-1].cmd {
			n++
		}
	}
	return n
}

// sendReplyBatch sends one answer as it is, or several combined (one
// message per target, in order of first appearance).
func (c *Client) sendReplyBatch(key, nick string, batch []replyItem) {
	type group struct {
		target, prefix string
		items          []replyItem
	}
	var groups []*group
	for _, it := range batch {
		var g *group
		for _, x := range groups {
			if x.target == it.target && x.prefix == it.prefix {
				g = x
			}
		}
		if g == nil {
			g = &group{target: it.target, prefix: it.prefix}
			groups = append(groups, g)
		}
		g.items = append(g.items, it)
	}
	for _, g := range groups {
		var lines [][]byte
		var err error
		expires := g.items[0].expires
		if len(g.items) == 1 {
			lines, err = messageLines("PRIVMSG", g.target, g.prefix, g.items[0].text, c.nickLen())
		} else {
			for _, it := range g.items {
				if it.expires.After(expires) {
					expires = it.expires
				}
			}
			// As many lines as the answers could have taken alone.
			lines, err = messageLinesMax("PRIVMSG", g.target, g.prefix, combineReplies(g.items), c.nickLen(), maxReplyLines*len(g.items))
		}
		if err != nil {
			c.log.Error("cannot send reply", "target", g.target, "err", err)
			continue
		}
		if err := c.out.send(context.Background(), "u:"+key, 0, expires, false, lines...); err != nil {
			c.log.Warn("reply not delivered", "nick", nick, "target", g.target, "answers", len(g.items), "err", err)
		}
	}
}

// combineReplies renders answers to several commands as one message:
// a count, then the answers separated by " | ", runs of answers that
// differ in one word only written once with the words in braces.
func combineReplies(items []replyItem) string {
	cmds, refused := 0, 0
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.text
		if i == 0 || it.cmd != items[i-1].cmd {
			cmds++
			if strings.HasPrefix(it.text, "Sorry") {
				refused++
			}
		}
	}
	body := strings.Join(mergeRuns(texts), " | ")
	switch {
	case cmds < 2:
		return body
	case refused > 0:
		return fmt.Sprintf("%d commands done, %d refused: %s", cmds, refused, body)
	default:
		return fmt.Sprintf("%d commands done: %s", cmds, body)
	}
}

// mergeRuns merges consecutive texts: equal ones into "TEXT (×N)", ones
// with the same words but one, always at the same place, into one text
// with that place written "{w1, w2, …}". Nothing is lost.
func mergeRuns(texts []string) []string {
	var out []string
	var base []string // words of the run's first text
	var variants []string
	pos, same := -1, 0
	flush := func() {
		switch {
		case base == nil:
		case pos >= 0:
			w := append([]string(nil), base...)
			w[pos] = "{" + strings.Join(variants, ", ") + "}"
			out = append(out, strings.Join(w, " "))
		case same > 1:
			out = append(out, fmt.Sprintf("%s (×%d)", strings.Join(base, " "), same))
		default:
			out = append(out, strings.Join(base, " "))
		}
		base, variants, pos, same = nil, nil, -1, 0
	}
	for _, t := range texts {
		words := strings.Split(t, " ")
		if base != nil {
			if d := differsAt(base, words); d == -1 && pos < 0 {
				same++
				continue
			} else if d >= 0 && same <= 1 && (pos < 0 || pos == d) {
				if pos < 0 {
					pos, variants = d, []string{base[d]}
				}
				variants = append(variants, words[d])
				continue
			}
			flush()
		}
		base, same = words, 1
	}
	flush()
	return out
}

// differsAt is the one index where a and b differ: -1 when they are
// equal, -2 when they differ in length or in more than one place.
func differsAt(a, b []string) int {
	if len(a) != len(b) {
		return -2
	}
	at := -1
	for i := range a {
		if a[i] != b[i] {
			if at >= 0 {
				return -2
			}
			at = i
		}
	}
	return at
}

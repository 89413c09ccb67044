package irc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/run"
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

// ---------------------------------------------------------------------
// Replies.

// replyItem is one Reply or Private call.
type replyItem struct {
	cmd     uint64 // the command it answers
	target  string // channel or nick
	prefix  string // "nick: " in a channel
	text    string
	expires time.Time
}

// replyQueue is one user's answers not yet handed to the outbox.
type replyQueue struct {
	nick  string
	items []replyItem
}

// queueReply adds an answer for the user with folded nick key and starts
// the user's sender when none runs. It never blocks.
func (c *Client) queueReply(key, nick string, it replyItem) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.replies[key]
	if q == nil {
		q = &replyQueue{nick: nick}
		c.replies[key] = q
		go run.Guard(c.log, "replies", func() { c.sendReplies(key, q) })
	}
	q.items = append(q.items, it)
}

// sendReplies sends a user's queued answers until none are left: one at
// a time while few wait, all at once, combined, when answers to
// combineReplies commands or more have piled up.
func (c *Client) sendReplies(key string, q *replyQueue) {
	for {
		c.qmu.Lock()
		if len(q.items) == 0 {
			delete(c.replies, key)
			close(c.qwake)
			c.qwake = make(chan struct{})
			c.qmu.Unlock()
			return
		}
		var batch []replyItem
		if commandsIn(q.items) >= c.combineReplies {
			batch, q.items = q.items, nil
		} else {
			batch = []replyItem{q.items[0]}
			q.items = q.items[1:]
		}
		c.qmu.Unlock()
		c.sendReplyBatch(key, q.nick, batch)
	}
}

// waitReplies waits until every queued answer was handed to the outbox
// and sent (or failed), or ctx ends.
func (c *Client) waitReplies(ctx context.Context) bool {
	for {
		c.qmu.Lock()
		idle, wake := len(c.replies) == 0, c.qwake
		c.qmu.Unlock()
		if idle {
			return true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

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

// ---------------------------------------------------------------------
// Finish reports.

// finishItem is one finish report waiting for its channel.
type finishItem struct {
	r    coordinator.FinishReport
	via  string // the channel it was meant for, when redirected
	ctx  context.Context
	done func(error)
}

// finishQueue is the reports waiting for one channel.
type finishQueue struct {
	channel string
	items   []*finishItem
}

// AnnounceFinish queues a finish report (coordinator.FinishAnnouncer): in
// its channel when that is one of ours, else in the report channel saying
// where it was meant to go. done is called once its line was written, or
// with the reason it was not.
func (c *Client) AnnounceFinish(ctx context.Context, r coordinator.FinishReport, done func(error)) {
	if _, up := c.out.connected(); !up || !c.connected.Load() {
		done(errNotConnected)
		return
	}
	dest, via, err := c.route(r.Channel)
	if err != nil {
		done(err)
		return
	}
	key := chanKey(dest)
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.finishes[key]
	if q == nil {
		q = &finishQueue{channel: dest}
		c.finishes[key] = q
		go run.Guard(c.log, "finish reports", func() { c.sendFinishes(key, q) })
	}
	q.items = append(q.items, &finishItem{r: r, via: via, ctx: ctx, done: done})
}

// sendFinishes sends a channel's reports until none are left: one at a
// time while few wait, all at once, combined per nick, when more than
// combineFinish have piled up.
func (c *Client) sendFinishes(key string, q *finishQueue) {
	for {
		c.qmu.Lock()
		if len(q.items) == 0 {
			delete(c.finishes, key)
			c.qmu.Unlock()
			return
		}
		var batch []*finishItem
		if len(q.items) > c.combineFinish {
			batch, q.items = q.items, nil
		} else {
			batch = []*finishItem{q.items[0]}
			q.items = q.items[1:]
		}
		c.qmu.Unlock()
		live := batch[:0]
		for _, it := range batch {
			if err := it.ctx.Err(); err != nil {
				it.done(err)
				continue
			}
			live = append(live, it)
		}
		for _, u := range c.finishUnits(q.channel, live, len(batch) > 1) {
			err := c.postUnit(q.channel, u)
			for _, it := range u.items {
				it.done(err)
			}
		}
	}
}

// finishUnit is lines to send and the reports they carry.
type finishUnit struct {
	lines [][]byte
	items []*finishItem
	err   error
}

// maxFinishRest bounds the reports whose unsent lines are remembered;
// past it a report sent again is sent whole.
const maxFinishRest = 1024

// finishRestKey names one report in one channel for finishRest.
func (c *Client) finishRestKey(channel string, it *finishItem) string {
	return c.state.Fold(channel) + "\x00" + it.r.Ident + "\x00" + it.via + "\x00" + it.r.Line
}

// postUnit sends a unit's lines; it gives up when the context of any of
// its reports ends (they all come from the same notifier cycle). When a
// report of its own unit fails after some of its lines went out, the rest
// is remembered for its next delivery (finishRest).
func (c *Client) postUnit(channel string, u finishUnit) error {
	if u.err != nil {
		return u.err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, it := range u.items {
		stop := context.AfterFunc(it.ctx, cancel)
		defer stop()
	}
	n, err := c.postChannelN(ctx, channel, u.lines)
	c.qmu.Lock()
	defer c.qmu.Unlock()
	switch {
	case err == nil && len(c.finishRest) > 0:
		// Delivered, alone or in a combined line: nothing left of it.
		for _, it := range u.items {
			delete(c.finishRest, c.finishRestKey(channel, it))
		}
	case err != nil && n > 0 && len(u.items) == 1:
		key := c.finishRestKey(channel, u.items[0])
		if len(c.finishRest) < maxFinishRest || c.finishRest[key] != nil {
			c.finishRest[key] = u.lines[n:]
		}
	}
	return err
}

// finishUnits turns reports into units: one line each, or, combining,
// per nick (and intended channel) as many "NICK: N of your jobs
// finished: URL (IDENT), …" lines as they need.
func (c *Client) finishUnits(channel string, items []*finishItem, combine bool) []finishUnit {
	nickLen := c.nickLen()
	single := func(it *finishItem) finishUnit {
		c.qmu.Lock()
		rest := c.finishRest[c.finishRestKey(channel, it)]
		c.qmu.Unlock()
		if rest != nil {
			return finishUnit{lines: rest, items: []*finishItem{it}}
		}
		text := it.r.Line
		if it.via != "" {
			text = "[for " + it.via + "] " + text
		}
		lines, err := messageLines("PRIVMSG", channel, "", text, nickLen)
		if err != nil {
			err = fmt.Errorf("%w: %v", coordinator.ErrCannotDeliver, err)
		}
		return finishUnit{lines: lines, items: []*finishItem{it}, err: err}
	}
	if !combine {
		out := make([]finishUnit, len(items))
		for i, it := range items {
			out[i] = single(it)
		}
		return out
	}
	type group struct {
		nick, via string
		items     []*finishItem
	}
	var groups []*group
	index := map[string]*group{}
	for _, it := range items {
		k := c.state.Fold(it.r.Nick) + " " + it.via
		g := index[k]
		if g == nil {
			g = &group{nick: it.r.Nick, via: it.via}
			index[k] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, it)
	}
	budget := textBudget("PRIVMSG", channel, nickLen)
	var out []finishUnit
	for _, g := range groups {
		if len(g.items) == 1 {
			out = append(out, single(g.items[0]))
			continue
		}
		prefix := ""
		if g.via != "" {
			prefix = "[for " + g.via + "] "
		}
		header := "%d jobs finished: "
		if g.nick != "" {
			prefix += g.nick + ": "
			header = "%d of your jobs finished: "
		}
		prefix = cleanText(prefix)
		var entries []string
		var carried []*finishItem
		size := 0
		emit := func() {
			if len(entries) == 0 {
				return
			}
			text := prefix + fmt.Sprintf(header, len(entries)) + strings.Join(entries, ", ")
			line, err := buildLine("PRIVMSG", channel, text)
			if err != nil {
				err = fmt.Errorf("%w: %v", coordinator.ErrCannotDeliver, err)
			}
			out = append(out, finishUnit{lines: [][]byte{line}, items: carried, err: err})
			entries, carried, size = nil, nil, 0
		}
		fits := func(n, size int) bool {
			return len(prefix)+len(fmt.Sprintf(header, n))+size <= budget
		}
		for _, it := range g.items {
			e := cleanText(it.r.URL) + " (" + it.r.Ident + ")"
			if it.r.Aborted {
				e = cleanText(it.r.URL) + " (" + it.r.Ident + ", aborted)"
			}
			if !fits(1, len(e)) {
				// Too long to share a line: on its own, split as
				// any long line is.
				emit()
				out = append(out, single(it))
				continue
			}
			grown := size + len(e)
			if len(entries) > 0 {
				grown += 2 // ", "
			}
			if !fits(len(entries)+1, grown) {
				emit()
				grown = len(e)
			}
			entries = append(entries, e)
			carried = append(carried, it)
			size = grown
		}
		emit()
	}
	return out
}

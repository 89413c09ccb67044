package irc

import (
	"context"
	"fmt"
	"strings"

	"github.com/archiveteam/archivebot-go/news"
)

// Finish reports, one of the delivery queues (delivery.go).

// finishItem is one finish report waiting for its channel.
type finishItem struct {
	r    news.FinishReport
	via  string // the channel it was meant for, when redirected
	ctx  context.Context
	done func(error)
}

// AnnounceFinish queues a finish report (news.FinishAnnouncer): in
// its channel when that is one of ours, else in the report channel saying
// where it was meant to go. done is called once its line was written, or
// with the reason it was not.
func (c *Client) AnnounceFinish(ctx context.Context, r news.FinishReport, done func(error)) {
	if _, up := c.out.connected(); !up || !c.connected.Load() {
		done(errNotConnected)
		return
	}
	dest, via, err := c.route(r.Channel)
	if err != nil {
		done(err)
		return
	}
	// Never refused: the queue has no bound and is never stopped.
	_ = c.finishes.push(chanKey(dest), dest, &finishItem{r: r, via: via, ctx: ctx, done: done})
}

// takeFinishes is the size of a channel's next batch of reports: one at
// a time while few wait, all at once, combined per nick, when more than
// combineFinish have piled up.
func (c *Client) takeFinishes(waiting []*finishItem) int {
	if len(waiting) > c.combineFinish {
		return len(waiting)
	}
	return 1
}

// sendFinishBatch sends one batch of a channel's reports (finishes' work).
func (c *Client) sendFinishBatch(_, channel string, batch []*finishItem) {
	live := batch[:0]
	for _, it := range batch {
		if err := it.ctx.Err(); err != nil {
			it.done(err)
			continue
		}
		live = append(live, it)
	}
	for _, u := range c.finishUnits(channel, live, len(batch) > 1) {
		err := c.postUnit(channel, u)
		for _, it := range u.items {
			it.done(err)
		}
	}
}

// finishUnit is lines to send and the reports they carry.
type finishUnit struct {
	lines [][]byte
	items []*finishItem
	err   error
}

// postUnit sends a unit's lines; it gives up when the context of any of
// its reports ends (they all come from the same notifier cycle).
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
	return c.postChannel(ctx, channel, u.lines)
}

// finishUnits turns reports into units: one line each, or, combining,
// per nick (and intended channel) as many "NICK: N of your jobs
// finished: URL (IDENT), …" lines as they need.
func (c *Client) finishUnits(channel string, items []*finishItem, combine bool) []finishUnit {
	nickLen := c.nickLen()
	single := func(it *finishItem) finishUnit {
		text := it.r.Line
		if it.via != "" {
			text = "[for " + it.via + "] " + text
		}
		lines, err := messageLines("PRIVMSG", channel, "", text, nickLen)
		if err != nil {
			err = fmt.Errorf("%w: %v", news.ErrCannotDeliver, err)
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
				err = fmt.Errorf("%w: %v", news.ErrCannotDeliver, err)
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

package bot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// !history IDENT
func runHistory(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	n := historyInChannel
	if c.Req.Private() {
		n = historyInPrivate
	}
	entries, err := b.store.History(ctx, id, n)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		c.Refuse("Sorry, I have no history of %s (it is kept 48 hours after a job finishes, 7 days after it fails or is aborted).", id)
		return nil
	}
	if c.Req.Private() {
		c.Reply("History of %s, oldest first (%d entries):", id, len(entries))
	} else {
		c.Reply("History of %s, %s (ask in private for up to %d):", id, lastSteps(len(entries)), historyInPrivate)
	}
	for _, e := range entries {
		c.Reply("%s", historyLine(e))
	}
	return nil
}

// lastSteps is "the last step" or "the last N steps".
func lastSteps(n int) string { return plural(n, "the last step", fmt.Sprintf("the last %d steps", n)) }

// How many history entries !history shows.
const (
	historyInChannel = 5
	historyInPrivate = 30
)

// historyLine is one entry as !history shows it: when, what, by whom, and
// the details.
func historyLine(e store.HistoryEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s by %s", e.Time().UTC().Format(time.DateTime+"Z"), e.Event, e.By)
	switch e.Event {
	case store.EventQueued:
		fmt.Fprintf(&b, " in %v (%v)", e.Detail["channel"], e.Detail["queue"])
	case store.EventSettings, store.EventUserAgent:
		if set, ok := e.Detail["set"].(map[string]any); ok {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(set)) {
				parts = append(parts, fmt.Sprintf("%s=%v", k, set[k]))
			}
			b.WriteString(": " + strings.Join(parts, ", "))
		}
		if del, ok := e.Detail["del"].([]any); ok && len(del) > 0 {
			fmt.Fprintf(&b, "; cleared %v", del)
		}
	case store.EventIgnoreAdded, store.EventIgnoreRemoved:
		if ps, ok := e.Detail["patterns"].([]any); ok {
			if len(ps) == 1 {
				fmt.Fprintf(&b, ": %v", ps[0])
			} else {
				fmt.Fprintf(&b, ": %d patterns", len(ps))
			}
		}
	case store.EventStarted:
		if p, ok := e.Detail["pipeline"].(string); ok && p != "" {
			fmt.Fprintf(&b, " (pipeline %q)", p)
		}
	case store.EventAborted:
		if e.Detail["queued"] == true {
			b.WriteString(" (still queued)")
		}
		if e.Detail["requested"] == true {
			b.WriteString(" (requested)")
		}
	case store.EventFailed:
		fmt.Fprintf(&b, ": %v", e.Detail["reason"])
	case store.EventMoved:
		fmt.Fprintf(&b, ": %v -> %v", e.Detail["from"], e.Detail["to"])
	}
	return b.String()
}

// !ignoresets    (!igsets)
func runIgnoreSets(ctx context.Context, b *Bot, c *Call) error {
	names := b.opts.Catalog.SetNames()
	if len(names) == 0 {
		c.Reply("No ignore sets are known.")
		return nil
	}
	// Which catalog: the built-in sets are not upstream's (its global
	// set alone has hundreds of patterns); a channel should not take one
	// for the other.
	from := "built into the node, not upstream's"
	if src := b.opts.Catalog.Source(); src != "built-in" {
		from = "from " + src
	}
	c.Reply("Known ignore sets (%s): %s. Add them with !ignoreset IDENT NAME[,NAME...] or --ignore-sets=NAME,...", from, strings.Join(names, ", "))
	return nil
}

// !jobs PIPELINE
func runJobs(ctx context.Context, b *Bot, c *Call) error {
	want := c.Args[0]
	pipes, err := b.store.Pipelines(ctx)
	if err != nil {
		return err
	}
	// A pipeline is named by its id (pipeline:HEX, or just HEX) or its
	// nickname; an id wins over a nickname.
	var match []*store.Pipeline
	for _, p := range pipes {
		if p.Key == want || p.Key == store.PipelinePrefix+want {
			match = []*store.Pipeline{p}
			break
		}
		if p.Nickname() == want {
			match = append(match, p)
		}
	}
	switch len(match) {
	case 0:
		c.Refuse("Sorry, no pipeline is called %s. (Its nickname or its id, as !whereis shows them.)", want)
		return nil
	case 1:
	default:
		ids := make([]string, len(match))
		for i, p := range match {
			ids[i] = p.Key
		}
		c.Reply("%d pipelines are called %s: %s. Ask for one by its id.", len(match), want, strings.Join(ids, ", "))
		return nil
	}
	p := match[0]
	running, err := b.store.RunningJobs(ctx)
	if err != nil {
		return err
	}
	var jobs []string
	for _, j := range running {
		if j.PipelineID == p.Key {
			jobs = append(jobs, fmt.Sprintf("%s (%s)", j.URL, j.Ident))
		}
	}
	if len(jobs) == 0 {
		c.Reply("Pipeline \"%s\" (%s) is working on no job.", p.Nickname(), p.Key)
		return nil
	}
	c.Reply("Pipeline \"%s\" (%s) is working on %d %s: %s", p.Nickname(), p.Key, len(jobs), plural(len(jobs), "job", "jobs"), strings.Join(jobs, ", "))
	return nil
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// !useragent IDENT ALIAS    (!ua)
func runUserAgent(ctx context.Context, b *Bot, c *Call) error {
	id, alias := c.Args[0], c.Args[1]
	ua, ok := b.opts.Catalog.UserAgent(alias)
	if !ok {
		c.unknownUserAgent(alias)
		return nil
	}
	ch := store.Change{QueuedOnly: true, Event: store.EventUserAgent,
		Set: map[string]string{"user_agent": ua}}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	c.Reply("Job %s will use user-agent %s.", id, ua)
	return nil
}

// !move IDENT front|back|QUEUE
func runMove(ctx context.Context, b *Bot, c *Call) error {
	id, where := c.Args[0], c.Args[1]
	if where != store.MoveFront && where != store.MoveBack && !store.IsQueueKey(where) {
		c.Usage()
		return nil
	}
	if name, ok := strings.CutPrefix(where, store.PendingNamedPrefix); ok {
		if err := checkPipelineName(name); err != nil {
			c.Refuse("Sorry, %v.", err)
			return nil
		}
	}
	from, err := b.store.Move(ctx, id, where, c.Req.by())
	switch {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
	case errors.Is(err, store.ErrJobFinished):
		c.Refuse("Job %s has already finished; there is nothing to move.", id)
	case errors.Is(err, store.ErrJobStarted):
		c.Refuse("Sorry, job %s has already started on a pipeline; only queued jobs can be moved.", id)
	case errors.Is(err, store.ErrWrongQueueKind):
		c.Refuse("Sorry, job %s cannot go to %s: recursive jobs stay in pending, pending-large or pending:NAME, !ao jobs in pending-ao or pending:NAME.", id, where)
	case errors.Is(err, store.ErrSameQueue):
		c.Refuse("Job %s is already in %s.", id, from)
	case errors.Is(err, store.ErrNotQueued):
		c.Refuse("Sorry, job %s is in no queue.", id)
	case err != nil:
		return err
	case where == store.MoveFront:
		c.Reply("Moved job %s to the front of %s: it runs next.", id, from)
	case where == store.MoveBack:
		c.Reply("Moved job %s to the back of %s: it runs last.", id, from)
	default:
		c.Reply("Moved job %s from %s to the back of %s.", id, from, where)
	}
	return nil
}

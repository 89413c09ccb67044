package check

// The paused state (doc/protocol.md, Paused queues): while a queue (or
// every queue) is paused, no pipeline gets a job from it, and a job that
// waits in it is never running, so the reaper cannot fail it. Part of
// invariant 2.

import (
	"fmt"
	"sort"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// pauseSpan is a time the model is sure a target (a queue, or "all") was
// paused: from a !pause's acknowledgement (the pause was made before it)
// to the send of the first !resume of the same target that may have
// ended it (open: none did).
type pauseSpan struct {
	target           string
	from, to         time.Time
	fromLine, toLine int
	open             bool
}

// pauseSpans works the spans out once the whole history is read. A
// !resume may have ended a pause when it was not refused and its reply
// (a timeout: any time later) came after the pause's acknowledgement;
// the span ends at the earliest such resume's send (or at the
// acknowledgement, when the resume was sent before it): the shortest
// span the history allows.
func (c *checker) pauseSpans() []pauseSpan {
	var out []pauseSpan
	for _, a := range c.pauseAcks {
		sp := pauseSpan{target: a.Target, from: a.T, fromLine: a.line, open: true}
		for id, r := range c.resumeSends {
			target := parseCommand(r.Text).ident
			if target == "" {
				target = "all"
			}
			if target != a.Target {
				continue
			}
			if replied, ok := c.resumeReply[id]; ok && !replied.After(a.T) {
				continue // answered before this pause was made
			}
			end := maxTime(r.T, a.T)
			if sp.open || end.Before(sp.to) {
				sp.to, sp.toLine, sp.open = end, r.line, false
			}
		}
		out = append(out, sp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from.Before(out[j].from) })
	return out
}

// registeredAt is the send of the !a that registered l: a bound below
// its registration. Zero when unknown (a job no one was seen to queue).
// Dups of a job are sent only after its acknowledgement was seen, so the
// latest !a sent before the job's first sign is the one that queued it.
func (c *checker) registeredAt(l *life) time.Time {
	if !l.sendT.IsZero() {
		return l.sendT
	}
	if !l.acked {
		return time.Time{}
	}
	t, _ := c.lastSend(l.ident, time.Time{}, l.start)
	return t
}

// pauseTakeSlack: a take first recorded this long after a pause's
// acknowledgement was made after the pause (the proxy and the bridges
// record the node's answer within milliseconds; the acknowledgement
// reaches IRC after the pause's write).
const pauseTakeSlack = time.Second

// judgePaused holds takes and reaper failures against the pauses. A
// paused queue gives no job to anyone, whether the job was queued before
// or during the pause: a take first recorded more than pauseTakeSlack
// after the pause's acknowledgement, and before the !resume that could
// end it was sent, fails. A job whose !a was sent after the pause was
// acknowledged was registered into the paused queue, so it may not be
// failed by the reaper in that time either (one queued before may have
// been taken before the pause, and reaped in it, rightly).
func (c *checker) judgePaused() {
	spans := c.pauseSpans()
	before := 0
	defer func() {
		c.inv[2].count("pauses", "%d acknowledged; %d takes and reaper failures judged against a pause of their queue (%d of jobs queued before it)",
			len(spans), c.pausedJudged, before)
	}()
	if len(spans) == 0 {
		return
	}
	judge := func(e lifeEvent, what string, take bool) {
		l := e.life
		if l == nil || !l.acked {
			return
		}
		reg := c.registeredAt(l)
		if reg.IsZero() {
			return
		}
		if take && !e.first.IsZero() {
			// A hold passed on (the pipeline's record of a take the
			// proxy or a bridge recorded first): that first record is
			// judged, once.
			return
		}
		at := e.T
		// A take printed just after the soak thawed its pipeline may
		// have been made as early as the stop (history.TakeUnsureMS):
		// it is judged at the earliest time it may have been made.
		earliest := at
		if take {
			if u := e.Num[history.TakeUnsureMS]; u > 0 {
				earliest = at.Add(-time.Duration(u * float64(time.Millisecond)))
			}
		}
		counted := false
		for _, sp := range spans {
			if sp.target != "all" && sp.target != l.queue {
				continue
			}
			if !sp.open && !reg.Before(sp.to) {
				continue // queued after the pause ended
			}
			queuedBefore := reg.Before(sp.from)
			if queuedBefore && (!take || !earliest.After(sp.from.Add(pauseTakeSlack))) {
				// Taken (or reaped) at a time the pause may not yet
				// have held, or reaped after a take before it.
				continue
			}
			if !counted {
				c.pausedJudged++
				if queuedBefore {
					before++
				}
				counted = true
			}
			if !sp.open && !at.Before(sp.to) {
				continue
			}
			queue := "every queue"
			if sp.target != "all" {
				queue = "queue " + sp.target
			}
			resumed := "never resumed"
			lines := []int{sp.fromLine, e.line}
			if !sp.open {
				resumed = "its !resume sent at " + sp.to.UTC().Format("15:04:05.000")
				lines = append(lines, sp.toLine)
			}
			c.inv[2].violate(Violation{Ident: l.ident, T: sp.from, T2: at, Lines: lines,
				Detail: fmt.Sprintf("%s while paused: %s was paused (acknowledged at the first time), the job queued in %s by an !a sent at %s (%s the pause), %s",
					what, queue, firstNonEmpty(l.queue, "its queue"), reg.UTC().Format("15:04:05.000"), map[bool]string{true: "before", false: "during"}[queuedBefore], resumed)})
			return
		}
	}
	for _, t := range c.lifeTakes {
		judge(t, fmt.Sprintf("taken by %s (%s)", t.Actor, t.Via), true)
	}
	for _, r := range c.reaps {
		judge(r, "failed by the reaper", false)
	}
}

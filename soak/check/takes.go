package check

// Takes and ends of jobs: who holds what, a take after the end, the
// handoff of a relayed take (invariant 2's model).

import (
	"fmt"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// take applies a pipeline's take (or a bridge's own, for a pipeline
// behind it: history.ViaBridgeSelf).
func (c *checker) take(e ev) {
	self := history.Relayed(e.Via)
	if self {
		c.bridgeTakes++
	} else {
		c.res.series.count("takes", e.T)
		c.takesByVia[e.Via]++
	}
	// Invariant 3.
	if r, ok := c.revoke[e.Target]; ok && e.Target != "" && e.T.Sub(r.T) > c.opts.RevokeGrace {
		c.inv[3].violate(Violation{Ident: e.Ident, T: r.T, T2: e.T, Lines: []int{r.line, e.line},
			Detail: fmt.Sprintf("key %s took a job %s after its revocation", e.Target, e.T.Sub(r.T).Round(time.Millisecond))})
	}
	// A take the node answered again (its retry after a lost answer,
	// doc/pipeline-api.md): the same key, the same take_id, a job the
	// key holds under it. Its hold stays as it is; one key taking one
	// job twice under two take_ids is judged below.
	if id := takeIDOf(e); id != "" {
		for _, h := range c.holds[e.Ident] {
			if h.target == e.Target && h.takeID == id {
				c.takesAnsweredAgain++
				return
			}
		}
	}
	var kept []hold
	var passed *hold
	var passedFrom time.Time
	for _, h := range c.holds[e.Ident] {
		switch {
		case self && passed == nil && h.target == e.Target && relayOrder(e.Via, h.via) && !h.t.Before(e.T.Add(-relaySlack)):
			// The same take, recorded by the next in line first (the
			// processes' stamps are in milliseconds, the logs read
			// apart): the hold stays the pipeline's.
			c.handoffs++
			return
		case passed == nil && history.Relayed(h.via) && e.Target != "" && h.target == e.Target && relayOrder(h.via, e.Via) && c.handoff(h, e):
			// A pipeline (or a bridge) takes what the node handed its
			// key (seen by the API proxy), a pipeline behind a bridge
			// what the bridge took for it: the same hold, passed on
			// (the life is running since the first).
			c.handoffs++
			passed = &hold{e.Actor, e.Via, e.Target, e.T, e.line, h.life, h.takeID}
			passedFrom = h.t
			continue
		case h.via == viaDirect && h.life.outcome == "failed" && h.life.outcomeT.Before(e.T):
			// A direct-Redis pipeline crawling a job failed under it (by
			// !fail, or by the reaper while it was frozen): nothing the
			// node writes stops it, and the job's URL may be queued again
			// at once (doc/reliability.md, A failed job's direct
			// pipeline). Its hold is not the new life's; counted.
			c.directFailedStillHeld++
			continue
		case history.Relayed(h.via) && h.life.outcome != "" && h.life.outcomeT.Before(e.T):
			// A take no pipeline got (an orphan): the node failed (or
			// ended) the job since; the key holds nothing.
			c.orphansEnded++
			continue
		}
		kept = append(kept, h)
	}
	c.holds[e.Ident] = kept
	// Invariant 2: held by another?
	for _, h := range kept {
		d := fmt.Sprintf("held by %s (%s) since the first time, taken by %s (%s) at the second", h.actor, h.via, e.Actor, e.Via)
		if end, over := h.life.ended(); over && end.Before(e.T) {
			d += fmt.Sprintf(" (the holder's life of the job ended %s at %s, the holder never ended it)",
				firstNonEmpty(h.life.outcome, h.life.pipeEnd), end.UTC().Format("15:04:05.000"))
		}
		c.inv[2].violate(Violation{Ident: e.Ident, T: h.t, T2: e.T, Lines: []int{h.line, e.line}, Detail: d})
	}
	if passed != nil {
		c.holds[e.Ident] = append(c.holds[e.Ident], *passed)
		c.lifeTakes = append(c.lifeTakes, lifeEvent{e, passed.life, passedFrom})
		return
	}
	l := c.take2(e)
	c.lifeTakes = append(c.lifeTakes, lifeEvent{e, l, time.Time{}})
	c.holds[e.Ident] = append(c.holds[e.Ident], hold{e.Actor, e.Via, e.Target, e.T, e.line, l, takeIDOf(e)})
}

// viaDirect is a direct-Redis pipeline's Via.
const viaDirect = "direct"

// takeIDOf is the take_id of a take the API proxy saw answered.
func takeIDOf(e ev) string {
	if e.Via == history.ViaProxy {
		return e.Text
	}
	return ""
}

// relaySlack is how far apart the records of one take may be.
const relaySlack = time.Second

// relayOrder reports whether a take by via may take over a hold by
// relay: the proxy's to the bridge or the pipeline, the bridge's to its
// pipeline.
func relayOrder(relay, via string) bool {
	return relay == history.ViaProxy && via != history.ViaProxy || relay == history.ViaBridgeSelf && !history.Relayed(via)
}

// handoff reports whether a pipeline's take e, behind the bridge whose
// own take is h, is that take passed on: the bridge's life of the job has
// not ended before it.
//
// The pipeline's own record of the take may come seconds after the
// node's (the proxy's, the bridge's): a simulator on a loaded machine
// prints it late. When the node's take came before the job's end, the
// pipeline's record within handoffLag of it is still that take, passed
// on, even if the end came in between (a !fail 1.4 s after the take,
// the pipeline's record 3.2 s after it: a 10-minute run at load 20); the
// pipeline then holds an ended job until its next write is refused.
func (c *checker) handoff(h hold, e ev) bool {
	end, over := h.life.ended()
	return !over || end.After(e.T) || end.After(h.t) && e.T.Sub(h.t) <= handoffLag
}

// handoffLag is how late a pipeline's record of a take the node made
// may come.
const handoffLag = 10 * time.Second

// take2 finds the life a take belongs to, judging a take after the end.
func (c *checker) take2(e ev) *life {
	l := c.cur[e.Ident]
	switch {
	case l == nil:
		if _, ok := c.lastSend(e.Ident, time.Time{}, e.T); !ok {
			c.unknownTakes++
		}
		l = c.newLife(e.Ident, e.T)
		l.url = e.URL
	default:
		if end, over := l.ended(); over && !end.After(e.T) {
			if send, ok := c.lastSend(e.Ident, maxTime(end.Add(-c.opts.ProbeSlack), l.sendT), e.T); ok && send.After(l.sendT) && c.ackedBetween(e.Ident, send, e.T.Add(reackWindow)) {
				l = c.newLife(e.Ident, send)
				l.sendT = send
				l.to(send, "queued")
				break
			}
			line := l.outcomeLine
			if l.pipeEnd != "" && (line == 0 || l.pipeEndT.Before(l.outcomeT)) {
				line = l.pipeEndLine
			}
			c.inv[2].violate(Violation{Ident: e.Ident, T: end, T2: e.T, Lines: []int{line, e.line},
				Detail: fmt.Sprintf("taken by %s (%s) after it ended (%s)", e.Actor, e.Via, firstNonEmpty(l.outcome, l.pipeEnd))})
			return l // the model keeps the job ended
		}
	}
	l.to(e.T, "running")
	return l
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// jobEnd applies a pipeline's end of a job.
func (c *checker) jobEnd(e ev) {
	hs := c.holds[e.Ident]
	found := false
	for i, h := range hs {
		if h.actor == e.Actor {
			c.holds[e.Ident] = append(hs[:i:i], hs[i+1:]...)
			found = true
			break
		}
	}
	if !found {
		c.endsWithoutTake++
	}
	if e.Outcome != "done" && e.Outcome != "aborted" {
		return // abandoned: the job stays running until the reaper fails it
	}
	c.res.series.count("job ends", e.T)
	c.pendingFinish[e.Ident] = e
	l := c.cur[e.Ident]
	if l == nil {
		l = c.newLife(e.Ident, e.T)
	}
	if l.pipeEnd == "" {
		l.pipeEnd, l.pipeEndT, l.pipeEndLine = e.Outcome, e.T, e.line
		state := "finished"
		if e.Outcome == "aborted" {
			state = "aborted"
		}
		if l.outcome == "" {
			l.to(e.T, state)
		}
	}
}

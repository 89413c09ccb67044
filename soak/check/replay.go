package check

// Replaying the history: each event applied to the model in time order.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// Check decides every invariant over events and the final dump.
func Check(events []history.Event, dump Dump, opts Options) *Result {
	evs := make([]ev, len(events))
	for i, e := range events {
		evs[i] = ev{e, i + 1}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].T.Before(evs[j].T) })
	c := &checker{
		opts: opts, res: &Result{Events: len(evs), series: newSeriesSet(), opts: opts},
		lives: map[string][]*life{}, cur: map[string]*life{}, sends: map[string][]time.Time{}, acks: map[string][]time.Time{},
		sendBy: map[int64]ev{}, users: map[string]bool{}, holds: map[string][]hold{}, revoke: map[string]ev{},
		pendingFinish: map[string]ev{}, openFault: map[string]ev{}, apiKeys: map[string]bool{},
		resumeSends: map[int64]ev{}, resumeReply: map[int64]time.Time{}, takesByVia: map[string]int{},
	}
	names := [...]string{"",
		"every acknowledged !a/!ao reaches exactly one reported outcome, or is queued or running at the end",
		"no job is held by two pipelines at once, or taken after it ended",
		"a revoked key takes nothing later than " + opts.RevokeGrace.String() + " after its revocation",
		"every acknowledged change is in the job's record while the job lives",
		"probes (/jobs/IDENT, !status, dashboard) and the final state agree with the model; no ghost speaks",
		"node RSS, goroutines, fds and Redis memory are flat after warm-up",
		fmt.Sprintf("outside faults, reply p99 < %s and finish report p99 < %s", opts.ReplyP99, opts.FinishP99),
		"the dashboard stream loses no log entry without saying so",
	}
	for n := 1; n <= 8; n++ {
		c.inv[n] = &Invariant{N: n, Name: names[n]}
		c.res.Invariants = append(c.res.Invariants, c.inv[n])
	}
	if len(evs) > 0 {
		c.res.Start, c.res.End = evs[0].T, evs[len(evs)-1].T
	}
	// The sends first: a pipeline may take a job before the reply that
	// acknowledges it is seen, and the send tells a re-registration from
	// a take after the end.
	for _, e := range evs {
		if e.Kind == history.Send {
			c.sendBy[e.ID] = e
			c.users[strings.ToLower(e.Actor)] = true
			cmd := parseCommand(e.Text)
			if (cmd.name == "a" || cmd.name == "ao") && cmd.ident != "" {
				c.sends[cmd.ident] = append(c.sends[cmd.ident], e.T)
			}
			if cmd.name == "resume" {
				c.resumeSends[e.ID] = e
			}
			if e.Fault != "" {
				c.heldSends = append(c.heldSends, e)
			}
		}
	}
	for _, e := range evs {
		if e.Kind == history.Line && !c.users[strings.ToLower(e.Actor)] || e.Kind == history.Reply && e.Outcome != "timeout" {
			for _, s := range parseLine(e.Text) {
				if s.kind == sayQueued && s.ident != "" {
					c.acks[s.ident] = append(c.acks[s.ident], e.T)
				}
				// "I don't know yet whether the job … was queued": the
				// write may have happened, so a take of the job after
				// its earlier life ended may be this !a's new life.
				if s.kind == sayUnknownYet && e.Kind == history.Reply {
					if send, ok := c.sendBy[e.ID]; ok {
						if cmd := parseCommand(send.Text); (cmd.name == "a" || cmd.name == "ao") && cmd.ident != "" {
							c.acks[cmd.ident] = append(c.acks[cmd.ident], e.T)
						}
					}
				}
			}
		}
	}
	for _, e := range evs {
		c.event(e)
	}
	c.closeFaults()
	c.judge1(dump)
	c.judge2and3(dump)
	c.judgeLostWrites(evs)
	c.judge4(dump)
	c.judge5(dump)
	c.judgeLoseWindows(evs)
	c.judge6()
	c.judge7()
	c.judge8()
	c.judgeSkips()
	c.judgeFloors()
	c.res.Load = c.load()
	return c.res
}

func (c *checker) event(e ev) {
	switch e.Kind {
	case history.Reply:
		s, ok := c.sendBy[e.ID]
		if !ok {
			s = e
		}
		l := latency{start: s.T, end: e.T, id: e.ID, lines: []int{s.line, e.line}, text: s.Text}
		if e.Outcome != "timeout" && reNotice.MatchString(e.Text) {
			// The first line addressed to the user was a notice about
			// one of their jobs, not the answer to this command.
			c.noticeReplies++
		} else if e.Outcome == "timeout" {
			l.ms = math.Inf(1)
		} else if v, ok := e.Num["latency_ms"]; ok {
			l.ms = v
		} else {
			l.ms = float64(e.T.Sub(s.T)) / 1e6
		}
		if !reNotice.MatchString(e.Text) || e.Outcome == "timeout" {
			c.replies = append(c.replies, l)
		}
		if !math.IsInf(l.ms, 1) && !reNotice.MatchString(e.Text) {
			c.res.series.add("reply latency", "ms", e.T, l.ms)
		}
		if _, ok := c.resumeSends[e.ID]; ok && e.Outcome != "timeout" {
			c.resumeReply[e.ID] = e.T
		}
		if e.Outcome != "timeout" {
			if u := unreadAnswer(e.Text); u != "" {
				c.unread(e, "answer to "+s.Actor+"'s "+cut(s.Text, 80), u)
			}
			for _, s := range parseLine(e.Text) {
				c.say(e, s, true)
				if s.kind == sayRefused {
					// A refused !resume changed nothing: the pause
					// goes on.
					delete(c.resumeSends, e.ID)
				}
			}
		}
	case history.Line:
		if c.users[strings.ToLower(e.Actor)] {
			return
		}
		for _, s := range parseLine(e.Text) {
			c.say(e, s, false)
		}
	case history.Take:
		if e.Target != "" {
			c.apiKeys[e.Target] = true
		}
		if history.Refused(e.Event) {
			c.refusedTakes = append(c.refusedTakes, e)
			return
		}
		c.take(e)
	case history.JobEnd:
		c.jobEnd(e)
	case history.Pipe:
		if e.Outcome == "died" || e.Outcome == "restarted" {
			for id, hs := range c.holds {
				kept := hs[:0]
				for _, h := range hs {
					if h.actor == e.Actor {
						c.releasedByDeath++
						continue
					}
					kept = append(kept, h)
				}
				c.holds[id] = kept
			}
		}
	case history.Revoke:
		c.apiKeys[e.Target] = true
		if _, ok := c.revoke[e.Target]; !ok {
			c.revoke[e.Target] = e
			if e.Num["takes_waiting"] > 0 {
				c.revokesWaiting++
			}
		}
	case history.Fault:
		k := e.Fault + "\x00" + e.Target
		switch e.Outcome {
		case "start":
			c.openFault[k] = e
		case "end":
			s, ok := c.openFault[k]
			if !ok {
				s = e
			}
			delete(c.openFault, k)
			c.res.Faults = append(c.res.Faults, Window{e.Fault, e.Target, s.T, e.T, [2]int{s.line, e.line}})
		}
	case history.Sample:
		for k, v := range e.Num {
			c.res.series.sample(e.Actor, k, e.T, v, e.line)
		}
	case history.Probe:
		st := normState(e.Outcome)
		if e.Via == "status" && e.Text != "" {
			// The checker reads the answer itself: the runner's reading
			// once classed upstream's plain "In queue." as "other".
			st = StatusState(e.Text)
		}
		switch {
		case st == "timeout" || st == "error":
			c.unanswered++
			if len(c.unansweredExamples) < 10 {
				c.unansweredExamples = append(c.unansweredExamples, fmt.Sprintf("%s probe of %s, history line %d: %s %q", e.Via, e.Ident, e.line, st, cut(e.Text, 120)))
			}
		case !knownStates[st]:
			c.unread(e, e.Via+" probe of "+e.Ident, firstNonEmpty(e.Text, e.Outcome))
		default:
			c.probes = append(c.probes, probe{e, st})
		}
	case history.Quiet:
		if e.Outcome == "start" {
			c.quiet = append(c.quiet, [2]time.Time{e.T, {}})
		} else if n := len(c.quiet); n > 0 && c.quiet[n-1][1].IsZero() {
			c.quiet[n-1][1] = e.T
		}
	case history.Stream:
		c.res.series.stream(e.Event)
	case history.Final:
		c.dumpTo = e.T
		if v, ok := e.Num["dump_started"]; ok && v > 0 {
			c.dumpFrom = time.Unix(0, int64(v*1e9))
		}
	case history.Leader:
		c.leaders = append(c.leaders, e)
		c.res.leaders = append(c.res.leaders, e.Event)
	}
}

// closeFaults ends the windows still open at the end of the run.
func (c *checker) closeFaults() {
	for _, s := range c.openFault {
		c.res.Faults = append(c.res.Faults, Window{s.Fault, s.Target, s.T, c.res.End, [2]int{s.line, 0}})
	}
	sort.Slice(c.res.Faults, func(i, j int) bool { return c.res.Faults[i].Start.Before(c.res.Faults[j].Start) })
}

// reackWindow: how long after a take the acknowledgement of the !a
// that re-registered the job may come (the runner waits 10 s for a
// reply).
const reackWindow = 30 * time.Second

// ackedBetween reports whether ident was acknowledged in [from, to].
func (c *checker) ackedBetween(ident string, from, to time.Time) bool {
	for _, t := range c.acks[ident] {
		if !t.Before(from) && !t.After(to) {
			return true
		}
	}
	return false
}

// requeuedSince reports whether l ended and an !a for its job was sent
// after its end, by t.
func (c *checker) requeuedSince(l *life, t time.Time) bool {
	end, over := l.ended()
	if !over {
		return false
	}
	_, ok := c.lastSend(l.ident, end, t)
	return ok
}

// lastSend is the latest !a send for ident in (after, upTo].
func (c *checker) lastSend(ident string, after, upTo time.Time) (time.Time, bool) {
	var best time.Time
	for _, t := range c.sends[ident] {
		if t.After(after) && !t.After(upTo) {
			best = t
		}
	}
	return best, !best.IsZero()
}

func (c *checker) newLife(ident string, t time.Time) *life {
	l := &life{ident: ident, start: t}
	c.lives[ident] = append(c.lives[ident], l)
	c.cur[ident] = l
	return l
}

// say applies what a bot line said at e.
func (c *checker) say(e ev, s saying, fromReply bool) {
	switch s.kind {
	case sayQueued:
		if s.ident == "" {
			return
		}
		l := c.cur[s.ident]
		switch {
		case l != nil && !l.acked && !c.requeuedSince(l, e.T):
			// Taken (or reported) before the acknowledgement was seen.
			// The !a that queued it is the latest sent so far (a dup is
			// sent only after an acknowledgement): a later line of the
			// same answer ("Use !status …", seen after the job ended)
			// is then no new !a.
			if l.sendT.IsZero() {
				if send, ok := c.lastSend(s.ident, time.Time{}, e.T); ok {
					l.sendT = send
				}
			}
		case l != nil && !l.acked:
			// A life no one was seen to queue ended, and a new !a
			// registered the job again.
			send, _ := c.lastSend(s.ident, l.start, e.T)
			l = c.newLife(s.ident, send)
			l.sendT = send
			l.to(send, "queued")
		case l != nil:
			// Seen already (the reply and the observer's copy, or
			// "Queued" and "Use !status"), unless a newer !a was sent
			// after the life ended.
			end, over := l.ended()
			if !over {
				return
			}
			send, ok := c.lastSend(s.ident, maxTime(end.Add(-c.opts.ProbeSlack), l.sendT), e.T)
			if !ok || !send.After(l.sendT) {
				return
			}
			l = c.newLife(s.ident, send)
			l.sendT = send
			l.to(send, "queued")
		default:
			send, ok := c.lastSend(s.ident, time.Time{}, e.T)
			start := e.T
			if ok {
				start = send
			}
			l = c.newLife(s.ident, start)
			l.sendT = send
			l.to(start, "queued")
		}
		l.acked, l.ackT, l.ackLine = true, e.T, e.line
		if s.queue != "" {
			l.queue = s.queue
		}
		if s.url != "" {
			l.url = s.url
		}
		if n, _ := nickOf(e.Text); n != "" {
			l.nick = n
		} else if e.Kind == history.Reply {
			l.nick = e.Actor
		}
	case sayPause:
		for _, a := range c.pauseAcks {
			if a.Target == s.queue && e.T.Sub(a.T) <= c.opts.ProbeSlack {
				return // the reply and the observer's copy of it
			}
		}
		c.pauseAcks = append(c.pauseAcks, e)
		c.pauseAcks[len(c.pauseAcks)-1].Target = s.queue
	case sayResume:
		// The end of a pause is its !resume's send (resumeSends): the
		// acknowledgement comes after the change.
	case sayExists:
		if !fromReply {
			c.exists++
		}
	case sayRefused:
		if !fromReply {
			c.refused++
		}
	case sayUnknownYet:
		if !fromReply {
			c.unknownYet++
		}
	case sayIgnore, sayUnignore, sayDelay, sayConc, sayAbort:
		l := c.cur[s.ident]
		if l == nil {
			return
		}
		// The reply and the observer's copy of it are one change,
		// whichever is seen first; two replies are two commands.
		last := len(l.changes) - 1
		if last >= 0 && sameChange(l.changes[last], s, e.T, c.opts.ProbeSlack) && !(fromReply && l.changes[last].fromReply) {
			return
		}
		l.changes = append(l.changes, change{t: e.T, line: e.line, kind: s.kind, pattern: s.pattern, lo: s.lo, hi: s.hi, n: s.n, fromReply: fromReply})
	case sayReport:
		if fromReply {
			return // the observer's Line of it counts, once
		}
		c.report(e, s)
	}
}

func sameChange(c change, s saying, t time.Time, slack time.Duration) bool {
	return c.kind == s.kind && c.pattern == s.pattern && c.lo == s.lo && c.hi == s.hi && c.n == s.n && t.Sub(c.t) <= slack
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// report applies an outcome report seen in the channel.
func (c *checker) report(e ev, s saying) {
	c.reportsTotal++
	if p, ok := c.pendingFinish[s.ident]; ok && !e.T.Before(p.T) {
		c.finishes = append(c.finishes, latency{start: p.T, end: e.T, ms: float64(e.T.Sub(p.T)) / 1e6, ident: s.ident, lines: []int{p.line, e.line}})
		c.res.series.add("finish latency", "ms", e.T, float64(e.T.Sub(p.T))/1e6)
		delete(c.pendingFinish, s.ident)
	}
	c.res.series.count("reports", e.T)
	l := c.cur[s.ident]
	if l == nil {
		c.unackedReports++
		l = c.newLife(s.ident, e.T)
		l.url = s.url
	}
	l.reports++
	if s.reaped {
		c.reaps = append(c.reaps, lifeEvent{e, l, time.Time{}})
	}
	switch {
	case l.outcome == "":
		l.outcome, l.outcomeT, l.outcomeLine = s.outcome, e.T, e.line
		l.to(e.T, s.outcome)
	case l.outcome == s.outcome:
		l.dups++
		c.dupsTotal++
	default:
		c.inv[1].violate(Violation{Ident: s.ident, T: l.outcomeT, T2: e.T, Lines: []int{l.outcomeLine, e.line},
			Detail: fmt.Sprintf("two outcomes: %s, then %s", l.outcome, s.outcome)})
	}
}

// knownStates are the states a probe may say.
var knownStates = map[string]bool{"queued": true, "running": true, "finished": true, "aborted": true, "failed": true, "absent": true}

// normState reads a probe's state.
func normState(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "completed", "done", "finished":
		return "finished"
	case "in progress", "in_progress", "working", "running", "started":
		return "running"
	case "pending", "queued", "in queue", "paused":
		return "queued"
	case "absent", "", "none", "not found", "unknown":
		return "absent"
	}
	return s
}

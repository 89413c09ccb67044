package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// ev is an event with its line in the history file.
type ev struct {
	history.Event
	line int
}

// life is one life of a job: from the !a that registered it to its
// outcome. An ident may live several times in a run (an aborted or
// failed job's URL can be queued again at once).
type life struct {
	ident, url, nick string
	queue            string    // pending or pending-ao, as its acknowledgement said ("" unknown)
	start            time.Time // the !a's send, else the first sign of the job
	sendT            time.Time
	acked            bool
	ackT             time.Time
	ackLine          int

	outcome     string // finished, aborted, failed: from a report in the channel
	outcomeT    time.Time
	outcomeLine int
	reports     int
	dups        int

	pipeEnd     string // done, aborted: the pipeline's JobEnd
	pipeEndT    time.Time
	pipeEndLine int

	trans   []stateAt
	changes []change
}

type stateAt struct {
	t     time.Time
	state string
}

type change struct {
	t       time.Time
	line    int
	kind    sayKind
	pattern string
	lo, hi  int64
	n       int64
}

// ended reports whether the job's life is over, and since when.
func (l *life) ended() (time.Time, bool) {
	var t time.Time
	if l.outcome != "" {
		t = l.outcomeT
	}
	if l.pipeEnd != "" && (t.IsZero() || l.pipeEndT.Before(t)) {
		t = l.pipeEndT
	}
	return t, !t.IsZero()
}

func (l *life) to(t time.Time, state string) { l.trans = append(l.trans, stateAt{t, state}) }

// stateAt is the model's state of the life at t ("" before it began).
func (l *life) stateAt(t time.Time) string {
	s := ""
	for _, x := range l.trans {
		if x.t.After(t) {
			break
		}
		s = x.state
	}
	return s
}

// statesIn are the states the life was in at some moment of [from, to].
func (l *life) statesIn(from, to time.Time) map[string]bool {
	out := map[string]bool{}
	if s := l.stateAt(from); s != "" {
		out[s] = true
	}
	for _, x := range l.trans {
		if x.t.After(from) && !x.t.After(to) {
			out[x.state] = true
		}
	}
	return out
}

// expected is what the acknowledged changes up to t say the job's record
// holds.
type expected struct {
	ignores     map[string]bool
	delay       *[2]int64
	concurrency int64
	abort       bool
}

func (l *life) expectedAt(t time.Time) expected {
	x := expected{ignores: map[string]bool{}}
	for _, c := range l.changes {
		if c.t.After(t) {
			break
		}
		switch c.kind {
		case sayIgnore:
			x.ignores[c.pattern] = true
		case sayUnignore:
			delete(x.ignores, c.pattern)
		case sayDelay:
			x.delay = &[2]int64{c.lo, c.hi}
		case sayConc:
			x.concurrency = c.n
		case sayAbort:
			x.abort = true
		}
	}
	return x
}

type hold struct {
	actor, via, target string
	t                  time.Time
	line               int
	life               *life
	// takeID is the take_id of the take the node answered (the API
	// proxy's record), kept when the hold is passed on.
	takeID string
}

type latency struct {
	start, end time.Time
	ms         float64 // +Inf: never answered
	ident      string
	id         int64
	lines      []int
	text       string
}

type probe struct {
	ev
	state string
}

// checker holds the model while the history is replayed.
type checker struct {
	opts   Options
	res    *Result
	inv    [9]*Invariant
	lives  map[string][]*life
	cur    map[string]*life
	sends  map[string][]time.Time // !a / !ao sends per ident
	acks   map[string][]time.Time // acknowledgements seen per ident
	sendBy map[int64]ev
	users  map[string]bool   // the scripted users' nicks: their lines are not the bot's
	holds  map[string][]hold // ident → pipelines holding it
	revoke map[string]ev     // key → its revocation

	replies, finishes []latency
	pendingFinish     map[string]ev // ident → its JobEnd awaiting a report
	probes            []probe
	quiet             [][2]time.Time
	openFault         map[string]ev

	exists, refused, unknownYet, unackedReports, unknownTakes, endsWithoutTake, releasedByDeath int
	// directFailedStillHeld counts holds of a direct pipeline on a job
	// failed under it that another take of a new life met.
	directFailedStillHeld int
	// takesAnsweredAgain counts takes the node answered again under
	// their take_id (a retry after a lost answer).
	takesAnsweredAgain int
	// apiKeys: every key name the history shows (takes' and
	// revocations' targets), for telling a job held by a key.
	apiKeys map[string]bool
	// bridgeTakes: takes recorded between the node and the pipeline
	// (the API proxy's, the bridges' own); handoffs: those then taken
	// by the next in line; orphansEnded: those no pipeline got, found
	// ended (by the reaper) when the job was taken again.
	bridgeTakes, handoffs, orphansEnded int
	reportsTotal, dupsTotal             int

	leaders []ev
	// When Redis was read at the end (zero: unknown).
	dumpFrom, dumpTo time.Time
	// The final dump's states, worked out once.
	ends            map[string]string
	queued, working map[string]bool
	// noticeReplies: replies that were a job's notice, not an answer.
	noticeReplies int
	unanswered    int // probes without a state (timeout, error, unreadable)

	// evidence: per invariant, how many things it checked.
	evidence [9]int

	// The paused state (doc/protocol.md, Paused queues): pauseAcks, each
	// acknowledged !pause (target, when seen); resumeSends, the !resume
	// commands by their send's ID (refused ones are dropped when their
	// reply says so); lifeTakes and reaps, the takes and reaper failures
	// to hold against the paused spans once the history is read.
	pauseAcks   []ev
	resumeSends map[int64]ev
	resumeReply map[int64]time.Time
	lifeTakes   []lifeEvent
	reaps       []lifeEvent
	// pausedJudged: takes and reaper failures of jobs queued while their
	// queue was paused, judged against the pause.
	pausedJudged int
}

// lifeEvent is a take or a report, with the life it belongs to.
type lifeEvent struct {
	ev
	life *life
}

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
		resumeSends: map[int64]ev{}, resumeReply: map[int64]time.Time{},
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
		}
	}
	for _, e := range evs {
		if e.Kind == history.Line && !c.users[strings.ToLower(e.Actor)] || e.Kind == history.Reply && e.Outcome != "timeout" {
			for _, s := range parseLine(e.Text) {
				if s.kind == sayQueued && s.ident != "" {
					c.acks[s.ident] = append(c.acks[s.ident], e.T)
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
	c.judgeEmpty()
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
		switch st := normState(e.Outcome); st {
		case "timeout", "error", "other":
			c.unanswered++
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
		if fromReply || len(l.changes) == 0 || !sameChange(l.changes[len(l.changes)-1], s, e.T, c.opts.ProbeSlack) {
			l.changes = append(l.changes, change{t: e.T, line: e.line, kind: s.kind, pattern: s.pattern, lo: s.lo, hi: s.hi, n: s.n})
		}
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
		c.reaps = append(c.reaps, lifeEvent{e, l})
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

// take applies a pipeline's take (or a bridge's own, for a pipeline
// behind it: history.ViaBridgeSelf).
func (c *checker) take(e ev) {
	self := history.Relayed(e.Via)
	if self {
		c.bridgeTakes++
	} else {
		c.res.series.count("takes", e.T)
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
		c.lifeTakes = append(c.lifeTakes, lifeEvent{e, passed.life})
		return
	}
	l := c.take2(e)
	c.lifeTakes = append(c.lifeTakes, lifeEvent{e, l})
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

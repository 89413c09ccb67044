package check

// The checker's model: a job's lives, its acknowledged changes, the holds
// of pipelines, and the checker's state while the history is replayed
// (replay.go replays it, takes.go applies the takes and ends).

import (
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
	// fromReply: seen in the user's reply (else in the observer's copy).
	fromReply bool
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
	// revokesWaiting: revocations with a take of the key waiting in
	// its long-poll as the revocation began (the Revoke event's
	// Num["takes_waiting"], the API proxy's view).
	revokesWaiting int

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

	// evidence: per invariant, how many things it checked; short: the
	// evidence floors (floors.go) each invariant fell below.
	evidence [9]int
	short    [9][]string
	// refusedTakes: takes the node refused (history.TakeRefused);
	// takesByVia: the takes pipelines recorded, by kind of pipeline.
	refusedTakes []ev
	// What was left out (skips.go): answers not read, probes without a
	// state, registrations near a clock skew.
	others                            int
	otherExamples, unansweredExamples []string
	nearSkew, fenceChecked            int
	// heldSends: the commands typed while the leader was frozen, for it
	// to hold (a Send with Fault set; judge_fence.go counts them).
	heldSends []ev
	// shortSegments: invariant 6's segments too short to judge after
	// their warm-up (judge_measures.go).
	shortSegments Skip
	takesByVia    map[string]int

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
	// first: for a take, its first record (a hold passed on from the
	// proxy's or a bridge's record of the same take); zero otherwise.
	first time.Time
}

package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/soak/history"
)

const urlD = "http://d.example/"

// fenced is clean() with node-a leading from the start (node-b takes
// over at 11) and an !a of D sent at 7, while node-a led, that got no
// answer; D's queued entry in Redis is stamped at reg.
func fenced(reg float64) (*run, string) {
	r := clean()
	r.add(0, history.Event{Kind: history.Leader, Actor: "node-a"})
	r.id++
	r.add(7, history.Event{Kind: history.Send, Actor: "gina", Text: "!a " + urlD, ID: r.id})
	r.add(17, history.Event{Kind: history.Reply, Actor: "gina", ID: r.id, Outcome: "timeout"})
	d := identOf(urlD)
	ts := float64(r.at(reg).UnixMilli()) / 1000
	r.set("archivebot:history:"+d, "list", []string{fmt.Sprintf(`{"ts":%.3f,"ident":%q,"event":"queued","by":"gina","detail":{}}`, ts, d)})
	r.set(d, "hash", registeredJob(urlD, "gina"))
	r.set("pending", "list", []string{idB, d})
	return r, d
}

// A frozen leader that wakes after the other took the lease registers
// an !a it had received while frozen: the fence must have refused it.
func TestRegistrationPastTheFenceFails(t *testing.T) {
	r, d := fenced(16)
	failsOnly(t, r.check(t), 5, d, "registered past the lease fence", "node-b took the lease")
}

func TestRegistrationBeforeTheChangePasses(t *testing.T) {
	r, _ := fenced(7.5)
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a registration by the leader fails:\n%s", res.Summary())
	}
	found := false
	for _, c := range res.Invariant(5).Counts {
		if c.Name == "registrations held against the lease" && c.Value[:1] == "1" {
			found = true
		}
	}
	if !found {
		t.Errorf("the registration was not held against the lease: %+v", res.Invariant(5).Counts)
	}
}

// A skewed node's stamps are 30 s off: not judged near a clock skew,
// but counted, and bounded: a run whose every registration was stamped
// near a skew judged none, and fails on the bound.
func TestRegistrationNearClockSkewIsNotJudged(t *testing.T) {
	r, _ := fenced(16)
	r.add(30, history.Event{Kind: history.Fault, Fault: "clock-skew", Target: "node-a +30s", Outcome: "start"})
	r.add(40, history.Event{Kind: history.Fault, Fault: "clock-skew", Target: "node-a +30s", Outcome: "end"})
	opts := DefaultOptions()
	opts.Skips.NearSkew = 1
	if res := Check(r.events, r.dump, opts); res.Failed() {
		t.Fatalf("a stamp near a clock skew fails:\n%s", res.Summary())
	}
	res := r.check(t)
	if !res.Failed() || !strings.Contains(res.Summary(), `FAIL skipped "near a clock skew": 1 of 1 (bound 50 %)`) {
		t.Fatalf("every registration near a clock skew, not judged, passes:\n%s", res.Summary())
	}
}

// The node that had the command leads again: it may register it.
func TestRegistrationByTheLeaderAgainPasses(t *testing.T) {
	r, _ := fenced(16)
	r.add(14, history.Event{Kind: history.Leader, Actor: "node-a"})
	if res := r.check(t); res.Failed() {
		t.Fatalf("a registration by a node leading again fails:\n%s", res.Summary())
	}
}

package check

import (
	"fmt"
	"sort"
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

// held is fenced with the !a typed by the runner while node-a was frozen
// (the Send's Fault, soak/hold_test.go), inside the freeze's window;
// registered says whether D's queued entry is in Redis (stamped at 16,
// when node-a woke) or the woken node refused it.
func held(registered bool) (*run, string) {
	r, d := fenced(16)
	for i := range r.events {
		if e := &r.events[i]; e.Kind == history.Send && e.Text == "!a "+urlD {
			e.Fault, e.Target, e.Actor = "freeze-leader", "node-a", "prober"
		} else if e.Kind == history.Reply && e.Actor == "gina" && e.Outcome == "timeout" {
			e.Actor = "prober"
		}
	}
	r.add(6.9, history.Event{Kind: history.Fault, Fault: "freeze-leader", Target: "node-a", Outcome: "start"})
	r.add(16.5, history.Event{Kind: history.Fault, Fault: "freeze-leader", Target: "node-a", Outcome: "end"})
	if !registered {
		delete(r.dump, "archivebot:history:"+d)
		delete(r.dump, d)
		r.set("pending", "list", []string{idB})
	}
	return r, d
}

func heldCount(t *testing.T, res *Result) string {
	t.Helper()
	for _, c := range res.Invariant(5).Counts {
		if c.Name == "commands held by a frozen leader" {
			return c.Value
		}
	}
	t.Fatalf("no count of the held commands: %+v", res.Invariant(5).Counts)
	return ""
}

// The command a frozen leader held, registered when it woke past its
// lease: invariant 5 fails, and the count says it was registered.
func TestHeldCommandRegisteredPastTheFenceFails(t *testing.T) {
	r, d := held(true)
	res := r.check(t)
	failsOnly(t, res, 5, d, "registered past the lease fence", "node-b took the lease")
	if got := heldCount(t, res); got != "1 (1 of them registered)" {
		t.Errorf("held commands: %q", got)
	}
}

// The woken node's fence refused it: nothing registered, the prober's
// wait timed out inside the freeze; the run passes and counts it.
func TestHeldCommandRefusedPasses(t *testing.T) {
	r, _ := held(false)
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a held command the fence refused fails:\n%s", res.Summary())
	}
	if got := heldCount(t, res); got != "1 (0 of them registered)" {
		t.Errorf("held commands: %q", got)
	}
}

// The woken node's refusal of the command it held is not the service
// coming back: the fault's recovery is measured by the other commands.
// (The refusal is put first, at 7.05, before any other answer after the
// fault's start: a real one comes after the wake.)
func TestHeldCommandAnswerIsNotRecovery(t *testing.T) {
	r, _ := held(false)
	for i := range r.events {
		if e := &r.events[i]; e.Kind == history.Reply && e.Actor == "prober" {
			e.Outcome, e.Text, e.T = "", "prober: Sorry, something went wrong running that command; the operators can find the details in the log.", r.at(7.05)
			e.Num = map[string]float64{"latency_ms": 50}
		}
	}
	sort.SliceStable(r.events, func(i, j int) bool { return r.events[i].T.Before(r.events[j].T) })
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a held command refused fails:\n%s", res.Summary())
	}
	for _, rc := range res.Recoveries {
		if rc.Fault == "freeze-leader" && rc.Commands == r.at(7.05).Sub(r.at(6.9)) {
			t.Errorf("the freeze's recovery is the held command's refusal: %+v", rc)
		}
	}
}

package check

import (
	"slices"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// Each evidence floor fails a run that lacks the evidence, naming the
// floor; clean() meets them all (TestCleanRunPasses).

// without is r with the events keep refuses dropped.
func (r *run) without(drop func(e history.Event) bool) *run {
	r.events = slices.DeleteFunc(r.events, drop)
	return r
}

// Invariant 3 needs the revoked key to have asked again and been
// refused: one revocation event alone once passed.
func TestRevocationWithoutRefusedTakeFails(t *testing.T) {
	r := clean().without(history.Refused)
	failsOnly(t, r.check(t), 3, "evidence floor: key key3, revoked at 05:00:12.000", "attempted no take after its revocation that the node refused")
	// A refusal that is not of the key (no node led: the proxy's 503)
	// shows nothing about the revocation.
	r.add(13, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key3", Outcome: history.TakeRefused, Text: "no_leader", Num: map[string]float64{"status": 503}})
	failsOnly(t, r.check(t), 3, "evidence floor: key key3")
	// A refused take is no take: it holds nothing.
	if res := clean().check(t); !strings.Contains(res.Summary(), "takes attempted by revoked keys and refused 1") {
		t.Errorf("the refusal is not counted:\n%s", res.Summary())
	}
}

// Invariant 2 needs takes by every kind of pipeline (API, bridged,
// direct): a run whose direct pipelines took nothing says nothing about
// take.lua's own path.
func TestTakesByEveryKindOfPipeline(t *testing.T) {
	r := clean().without(func(e history.Event) bool { return e.Kind == history.Take && e.Via == "direct" })
	failsOnly(t, r.check(t), 2, "evidence floor: no take by a direct pipeline")
	r = clean().without(func(e history.Event) bool { return e.Kind == history.Take && e.Via == "bridge" })
	failsOnly(t, r.check(t), 2, "evidence floor: no take by a bridge pipeline")
}

// Invariant 4 needs every kind of change acknowledged and judged.
func TestEveryKindOfChangeIsNeeded(t *testing.T) {
	r := clean().without(func(e history.Event) bool {
		return strings.Contains(e.Text, "!con ") || strings.Contains(e.Text, "set to use 4 workers")
	})
	failsOnly(t, r.check(t), 4, "evidence floor: no concurrency change was acknowledged and judged")
	r = clean().without(func(e history.Event) bool {
		return strings.Contains(e.Text, "!unig ") || strings.Contains(e.Text, "Removed ignore pattern")
	})
	failsOnly(t, r.check(t), 4, "evidence floor: no unignore change")
}

// Invariant 8 counts only intervals that carried entries, and needs
// each v2 viewer to have received MinViewerEntries outside faults: a
// viewer connected to a stream that sent nothing once counted as
// evidence, interval by interval.
func TestViewerWithoutEntriesFails(t *testing.T) {
	r := clean()
	for s := 20.0; s <= 60; s += 5 {
		r.add(s+0.7, history.Event{Kind: history.Stream, Actor: "viewer-2", Via: "v2", Num: map[string]float64{"frames": 0, "entries": 0, "gaps": 0}})
	}
	failsOnly(t, r.check(t), 8, "evidence floor: viewer viewer-2 carried 0 entries in the intervals judged (outside faults), fewer than the 100 needed")
	res := r.check(t)
	if !strings.Contains(res.Summary(), "v2 viewer intervals outside faults 9,") {
		t.Errorf("the empty intervals are counted as judged:\n%s", res.Summary())
	}
}

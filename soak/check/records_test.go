package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/soak/history"
)

func TestIgnoreMissingFromRecordFails(t *testing.T) {
	r := clean()
	r.set(idC+"_ignores", "set", []string{"global-pattern"})
	failsOnly(t, r.check(t), 4, idC, `ignore ^https?://c\.example/x not in `+idC+"_ignores")
}

func TestDelayNotInRecordFails(t *testing.T) {
	r := clean()
	r.set(idC, "hash", registeredJob(urlC, "carol", "started_at", "1764650006.0"))
	failsOnly(t, r.check(t), 4, idC, "delay [500, 700] acknowledged, record has [250, 375]")
}

func TestAbortMissingFromStatusProbeFails(t *testing.T) {
	r := clean()
	r.command(30, 0.2, "bob", "!abort "+idB, "Job "+idB+" for "+urlB+" was aborted before it started.")
	// The reply acknowledged the abort; the job stays queued and the
	// status says nothing of it.
	r.probe(50, "status", idB, "queued", "Job "+idB+" <"+urlB+">. Started by bob. In queue.")
	r.set(idB, "hash", registeredJob(urlB, "bob", "abort_requested", "true"))
	failsOnly(t, r.check(t), 4, idB, "status probe: abort acknowledged")
}

func TestProbeThatDisagreesFails(t *testing.T) {
	r := clean()
	r.probe(50, "status", idA, "running", "Job "+idA+" <"+urlA+">. Started by alice. In progress.")
	failsOnly(t, r.check(t), 5, idA, "stale: status says running, the model says finished")
}

func TestGhostProbeFails(t *testing.T) {
	r := clean()
	ghost := ident.Of("http://never.example/")
	r.probe(50, "dashboard", ghost, "running", "")
	failsOnly(t, r.check(t), 5, ghost, "ghost: dashboard says running, the model says absent")
}

func TestFinalStateThatDisagreesFails(t *testing.T) {
	r := clean()
	// B was queued; at the end its record says finished, and no
	// pipeline ever took it.
	r.set(idB, "hash", registeredJob(urlB, "bob", "finished_at", "1764650059.0"))
	r.set("pending", "list", []string{})
	res := r.check(t)
	if res.Invariant(5).Pass {
		t.Fatalf("invariant 5 passed:\n%s", res.Summary())
	}
	if !strings.Contains(fmt.Sprint(res.Invariant(5).Violations), "model says queued, Redis says finished") {
		t.Errorf("violations: %v", res.Invariant(5).Violations)
	}
}

// The runner's probes: /jobs (the dashboard's list) holds only queued
// and running jobs, so "absent" there is right for an ended job; a
// status probe that got no answer says nothing either way.
func TestProbesAsTheRunnerRecordsThem(t *testing.T) {
	r := clean()
	r.probe(50, "dashboard", idA, "absent", "")
	r.probe(50, "status", idB, "timeout", "")
	r.probe(50, "jobs_api", idB, "error", "dial tcp: connection refused")
	r.probe(50, "status", idB, "other", "Sorry, something went wrong running that command; the operators can find the details in the log.")
	opts := DefaultOptions()
	opts.Skips.NotJudged = 0.5
	res := Check(r.events, r.dump, opts)
	if res.Failed() {
		t.Fatalf("runner-style probes fail:\n%s", res.Summary())
	}
	// Three of eight probes without a state is past the default bound
	// (a tenth): counted, and the run fails on it.
	if res := r.check(t); !res.Failed() || !strings.Contains(res.Summary(), `FAIL skipped "not judged": 3 of 8 (bound 10 %)`) {
		t.Errorf("probes without a state not counted or not bounded:\n%s", res.Summary())
	}
	// But the dashboard may not list an ended job as running.
	r.probe(51, "dashboard", idA, "running", "")
	r.events = slices.DeleteFunc(r.events, func(e history.Event) bool {
		return e.Kind == history.Probe && (e.Outcome == "timeout" || e.Outcome == "error" || e.Outcome == "other")
	})
	failsOnly(t, r.check(t), 5, idA, "dashboard says running, the model says finished")
}

// Found on the runner's fifth run: Redis is read key by key, for
// seconds, while pipelines still end jobs; a job that ended after its
// key was read is "running" in the dump. The Final event says when the
// dump began; the dump is compared with the model over the time it took.
func TestJobEndingWhileRedisIsReadPasses(t *testing.T) {
	r := clean()
	d := r.queue(30, "gina", "http://d.example/")
	r.take(31, "p1", "key1", d)
	r.end(57, "p1", d, "done")
	r.line(57.2, "gina: Your job for http://d.example/ has finished. ("+d+")")
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1"))
	r.set("working", "list", []string{idC, d})
	res := r.check(t)
	if res.Invariant(5).Pass {
		t.Fatalf("without the dump's start, the dump is taken as read at the end, and must disagree:\n%s", res.Summary())
	}
	for i := range r.events {
		if r.events[i].Kind == history.Final {
			r.events[i].Num = map[string]float64{"dump_started": float64(r.at(55).UnixNano()) / 1e9}
		}
	}
	if res := r.check(t); res.Failed() {
		t.Fatalf("a job that ended while Redis was read fails:\n%s", res.Summary())
	}
}

// A failed job's hash expires 5 s after the failure; when that happens
// between the dump's listing of the keys and its reading of this one,
// the dump holds it as type "none" (and may not list the failure
// record, written after the listing).
func TestJobVanishingWhileRedisIsReadPasses(t *testing.T) {
	r := clean()
	r.command(50, 0.1, "hank", "!fail "+idB, "Job "+idB+" for "+urlB+" failed: removed from its queue, it will not run any more.")
	r.dump[idB] = Entry{Type: "none", Value: []byte("null"), TTL: -1}
	r.set("pending", "list", []string{})
	for i := range r.events {
		if r.events[i].Kind == history.Final {
			r.events[i].Num = map[string]float64{"dump_started": float64(r.at(49).UnixNano()) / 1e9}
		}
	}
	if res := r.check(t); res.Failed() {
		t.Fatalf("a record that expired while Redis was read fails:\n%s", res.Summary())
	}
}

package check

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// run is a synthetic soak: a history and the final dump, built step by
// step. clean() is a run that keeps every promise; each test below
// breaks one.
type run struct {
	t0     time.Time
	events []history.Event
	dump   Dump
	id     int64
}

func (r *run) at(sec float64) time.Time {
	return r.t0.Add(time.Duration(sec * float64(time.Second)))
}

func (r *run) add(sec float64, e history.Event) {
	e.T = r.at(sec)
	r.events = append(r.events, e)
}

// command is a user's command at sec answered after latency seconds
// with answer (the observer sees the answer in the channel too).
func (r *run) command(sec, latency float64, nick, text, answer string) {
	r.id++
	r.add(sec, history.Event{Kind: history.Send, Actor: nick, Channel: "#ab", Text: text, ID: r.id})
	line := nick + ": " + answer
	r.add(sec+latency, history.Event{Kind: history.Reply, Actor: nick, Channel: "#ab", Text: line, ID: r.id, Num: map[string]float64{"latency_ms": latency * 1000}})
	r.add(sec+latency, history.Event{Kind: history.Line, Actor: "ArchiveBot", Channel: "#ab", Text: line})
}

// queue is an !a acknowledged at sec; it returns the job's ident.
func (r *run) queue(sec float64, nick, url string) string {
	n, id, err := ident.FromURL(url)
	if err != nil {
		panic(err)
	}
	r.command(sec, 0.2, nick, "!a "+url, "Queued "+n+".")
	r.add(sec+0.21, history.Event{Kind: history.Line, Actor: "ArchiveBot", Channel: "#ab", Text: nick + ": Use !status " + id + " for updates, !abort " + id + " to abort."})
	return id
}

func (r *run) take(sec float64, pipeline, key, id string) {
	r.add(sec, history.Event{Kind: history.Take, Actor: pipeline, Via: "api", Target: key, Ident: id})
}

func (r *run) end(sec float64, pipeline, id, outcome string) {
	r.add(sec, history.Event{Kind: history.JobEnd, Actor: pipeline, Via: "api", Ident: id, Outcome: outcome})
}

func (r *run) line(sec float64, text string) {
	r.add(sec, history.Event{Kind: history.Line, Actor: "ArchiveBot", Channel: "#ab", Text: text})
}

func (r *run) probe(sec float64, via, id, state, text string) {
	r.add(sec, history.Event{Kind: history.Probe, Via: via, Ident: id, Outcome: state, Text: text})
}

func (r *run) set(key, typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	r.dump[key] = Entry{Type: typ, Value: b, TTL: -1}
}

func registeredJob(url, nick string, extra ...string) map[string]string {
	h := map[string]string{"url": url, "started_by": nick, "started_in": "#ab", "queued_at": "1764650000", "delay_min": "250", "delay_max": "375", "concurrency": "3"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

const (
	urlA = "http://a.example/"
	urlB = "http://b.example/"
	urlC = "http://c.example/"
	urlE = "http://e.example/"
	urlK = "http://k.example/"
	urlL = "http://l.example/"
	urlN = "http://n.example/"
)

var (
	idA = ident.Of(urlA)
	idB = ident.Of(urlB)
	idC = ident.Of(urlC)
	idE = ident.Of(urlE)
)

// clean is a run that keeps every promise: A finishes and is reported,
// B is still queued at the end, C runs with an ignore added and a delay
// set, E is taken by a key before that key is revoked; the leader is
// killed once (a slow reply in its window is excused), resources are
// flat, probes agree.
func clean() *run {
	r := &run{t0: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC), dump: Dump{}}
	for s := 0.0; s <= 60; s += 5 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-a", Num: map[string]float64{"rss_bytes": 40e6 + float64(int(s)%10)*1e5, "goroutines": 80, "fds": 30}})
		r.add(s+0.5, history.Event{Kind: history.Stream, Actor: "viewer-1", Via: "v2", Num: map[string]float64{"frames": 100, "entries": 1000, "gaps": 0, "lag_p99_ms": 40}})
	}
	// Redis every 2.5 s: a kill-redis-master or lose-redis-write in
	// the middle of the minute leaves each of its two segments the
	// samples invariant 6 needs after their warm-up.
	for s := 0.0; s <= 60; s += 2.5 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "redis", Num: map[string]float64{"redis_used_memory": 3e6, "redis_live_memory": 2e6}})
	}
	a := r.queue(1, "alice", urlA)
	r.take(2, "p1", "key1", a)
	r.end(5, "p1", a, "done")
	r.line(5.4, "alice: Your job for "+urlA+" has finished. ("+a+")")
	b := r.queue(3, "bob", urlB)
	c := r.queue(4, "carol", urlC)
	r.take(6, "p2", "key2", c)
	r.command(6.5, 0.3, "carol", "!ig "+c+" ^https?://c\\.example/x", "Added ignore pattern ^https?://c\\.example/x to job "+c+".")
	r.command(7, 0.3, "carol", "!d "+c+" 500 700", "Inter-request delay for job "+c+" set to [500, 700] ms.")
	r.command(7.2, 0.1, "carol", "!ig "+c+" ^y", "Added ignore pattern ^y to job "+c+".")
	r.command(7.4, 0.1, "carol", "!unig "+c+" ^y", "Removed ignore pattern ^y from job "+c+".")
	r.command(7.6, 0.1, "carol", "!con "+c+" 4", "Job "+c+" set to use 4 workers.")
	// The leader dies: a command sent in the window waits 5 s.
	r.add(8, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-a", Outcome: "start"})
	r.command(8.5, 5, "dave", "!status", "Job status: 1 completed, 0 aborted, 0 failed, 1 in progress, 1 pending, 0 pending-ao, 0 pending-others")
	r.add(10, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-a", Outcome: "end"})
	r.add(11, history.Event{Kind: history.Leader, Actor: "node-b"})
	e := r.queue(11, "erin", urlE)
	r.take(11.5, "p3", "key3", e)
	r.end(11.8, "p3", e, "done")
	r.line(12.1, "erin: Your job for "+urlE+" has finished. ("+e+")")
	r.add(12, history.Event{Kind: history.Revoke, Target: "key3"})
	// key3's pipeline asks again and is refused (invariant 3's floor).
	r.add(13, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key3", Outcome: history.TakeRefused, Text: "revoked_key", Num: map[string]float64{"status": 401}})
	// A direct pipeline and one behind a bridge take a job each
	// (invariant 2's floor: every kind of pipeline).
	k := r.queue(13, "kate", urlK)
	r.add(14, history.Event{Kind: history.Take, Actor: "direct01", Via: "direct", Ident: k})
	r.add(16, history.Event{Kind: history.JobEnd, Actor: "direct01", Via: "direct", Ident: k, Outcome: "done"})
	r.line(16.3, "kate: Your job for "+urlK+" has finished. ("+k+")")
	l := r.queue(13.5, "kate", urlL)
	r.add(14.5, history.Event{Kind: history.Take, Actor: "bp1", Via: "bridge", Target: "bridge-key", Ident: l})
	r.add(17, history.Event{Kind: history.JobEnd, Actor: "bp1", Via: "bridge", Ident: l, Outcome: "done"})
	r.line(17.3, "kate: Your job for "+urlL+" has finished. ("+l+")")
	// A queued job aborted (invariant 4's floor: every kind of change).
	n := r.queue(15, "nina", urlN)
	r.command(15.5, 0.2, "nina", "!abort "+n, "Job "+n+" for "+urlN+" was aborted before it started.")
	r.line(15.9, "nina: Your job for "+urlN+" was aborted. ("+n+")")
	for i := 0; i < 20; i++ {
		r.command(20+float64(i), 0.1, "frank", "!status", "Job status: 2 completed, 0 aborted, 0 failed, 1 in progress, 1 pending, 0 pending-ao, 0 pending in other queues")
	}
	r.add(45, history.Event{Kind: history.Quiet, Outcome: "start"})
	r.probe(46, "jobs_api", a, "finished", "")
	r.probe(46, "status", b, "queued", "Job "+b+" <"+urlB+">. Started by bob. In queue.")
	r.probe(46, "dashboard", c, "running", "")
	r.probe(46, "jobs_api", c, "running", `{"ident":"`+c+`","state":"running","abort_requested":false,"ignore_patterns":["^https?://c\\.example/x"],"settings":{"delay_min":500,"delay_max":700,"concurrency":4}}`)
	r.add(47, history.Event{Kind: history.Quiet, Outcome: "end"})
	r.add(60, history.Event{Kind: history.Final, Text: "final_redis.json"})

	r.set(a, "hash", registeredJob(urlA, "alice", "started_at", "1764650002.0", "pipeline_id", "archivebot:key1", "finished_at", "1764650005.0"))
	r.set(b, "hash", registeredJob(urlB, "bob"))
	r.set("pending", "list", []string{b})
	r.set(c, "hash", registeredJob(urlC, "carol", "started_at", "1764650006.0", "pipeline_id", "archivebot:key2", "delay_min", "500", "delay_max", "700", "concurrency", "4"))
	r.set("archivebot:history:"+c, "list", []string{
		historyEntry(c, "ignore_added", `{"patterns":["^https?://c\\.example/x"]}`),
		historyEntry(c, "settings", `{"set":{"delay_max":"700","delay_min":"500"}}`),
		historyEntry(c, "ignore_added", `{"patterns":["^y"]}`),
		historyEntry(c, "ignore_removed", `{"patterns":["^y"]}`),
		historyEntry(c, "settings", `{"set":{"concurrency":"4"}}`),
	})
	r.set("archivebot:history:"+n, "list", []string{historyEntry(n, "aborted", `{"queued":true}`)})
	r.set(k, "hash", registeredJob(urlK, "kate", "started_at", "1764650014.0", "finished_at", "1764650016.0"))
	r.set(l, "hash", registeredJob(urlL, "kate", "started_at", "1764650014.5", "finished_at", "1764650017.0"))
	r.set(c+"_ignores", "set", []string{"^https?://c\\.example/x", "global-pattern"})
	r.set("working", "list", []string{c})
	r.set(e, "hash", registeredJob(urlE, "erin", "started_at", "1764650011.5", "finished_at", "1764650011.8"))
	return r
}

// longer extends clean()'s flat samples (node-a, Redis) to until
// seconds, every 30 s: a run longer than clean()'s minute judges its
// series after a warm-up that clean()'s own samples do not reach.
func (r *run) longer(until float64, redis bool) *run {
	for s := 90.0; s <= until; s += 30 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-a", Num: map[string]float64{"rss_bytes": 40e6, "goroutines": 80, "fds": 30}})
		if redis {
			r.add(s, history.Event{Kind: history.Sample, Actor: "redis", Num: map[string]float64{"redis_used_memory": 3e6, "redis_live_memory": 2e6}})
		}
		r.add(s+0.5, history.Event{Kind: history.Stream, Actor: "viewer-1", Via: "v2", Num: map[string]float64{"frames": 100, "entries": 1000, "gaps": 0, "lag_p99_ms": 40}})
	}
	return r
}

// historyEntry is one entry of a job's history (archivebot:history:IDENT)
// with its detail as JSON.
func historyEntry(id, event, detail string) string {
	return `{"ts":1764650000,"ident":"` + id + `","event":"` + event + `","by":"someone","detail":` + detail + `}`
}

func (r *run) check(t *testing.T) *Result {
	t.Helper()
	res := Check(r.events, r.dump, DefaultOptions())
	if testing.Verbose() {
		t.Log("\n" + res.Summary())
	}
	return res
}

// failsOnly asserts that invariant n, and only it, fails, with a
// violation whose text contains every want.
func failsOnly(t *testing.T, res *Result, n int, want ...string) {
	t.Helper()
	for _, inv := range res.Invariants {
		if inv.N != n && !inv.Pass {
			t.Errorf("invariant %d (%s) failed too: %v", inv.N, inv.Name, inv.Violations)
		}
	}
	inv := res.Invariant(n)
	if inv.Pass {
		t.Fatalf("invariant %d (%s) passed; want it to fail\n%s", n, inv.Name, res.Summary())
	}
	if !res.Failed() {
		t.Fatal("the result does not say it failed")
	}
	var all []string
	for _, v := range inv.Violations {
		all = append(all, v.String())
	}
	text := strings.Join(all, "\n")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("invariant %d's violations do not name %q:\n%s", n, w, text)
		}
	}
	if !strings.Contains(res.Summary(), fmt.Sprintf("FAIL %d. ", n)) {
		t.Errorf("summary does not name invariant %d as failed:\n%s", n, res.Summary())
	}
}

package check

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
		r.add(s, history.Event{Kind: history.Sample, Actor: "redis", Num: map[string]float64{"redis_used_memory": 3e6}})
		r.add(s+0.5, history.Event{Kind: history.Stream, Actor: "viewer-1", Via: "v2", Num: map[string]float64{"frames": 100, "entries": 1000, "gaps": 0, "lag_p99_ms": 40}})
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
	for i := 0; i < 20; i++ {
		r.command(20+float64(i), 0.1, "frank", "!status", "Job status: …")
	}
	r.add(45, history.Event{Kind: history.Quiet, Outcome: "start"})
	r.probe(46, "jobs_api", a, "finished", "")
	r.probe(46, "status", b, "queued", "Job "+b+" <"+urlB+">. Started by bob. In queue.")
	r.probe(46, "dashboard", c, "running", "")
	r.probe(46, "jobs_api", c, "running", `{"ident":"`+c+`","state":"running","abort_requested":false,"ignore_patterns":["^https?://c\\.example/x"],"settings":{"delay_min":500,"delay_max":700,"concurrency":3}}`)
	r.add(47, history.Event{Kind: history.Quiet, Outcome: "end"})
	r.add(60, history.Event{Kind: history.Final, Text: "final_redis.json"})

	r.set(a, "hash", registeredJob(urlA, "alice", "started_at", "1764650002.0", "pipeline_id", "archivebot:key1", "finished_at", "1764650005.0"))
	r.set(b, "hash", registeredJob(urlB, "bob"))
	r.set("pending", "list", []string{b})
	r.set(c, "hash", registeredJob(urlC, "carol", "started_at", "1764650006.0", "pipeline_id", "archivebot:key2", "delay_min", "500", "delay_max", "700"))
	r.set(c+"_ignores", "set", []string{"^https?://c\\.example/x", "global-pattern"})
	r.set("working", "list", []string{c})
	r.set(e, "hash", registeredJob(urlE, "erin", "started_at", "1764650011.5", "finished_at", "1764650011.8"))
	return r
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

func TestCleanRunPasses(t *testing.T) {
	res := clean().check(t)
	if res.Failed() {
		t.Fatalf("a clean run fails:\n%s", res.Summary())
	}
	inv1 := res.Invariant(1)
	want := map[string]string{"acknowledged": "4", "finished": "2", "queued or running at the end": "2", "duplicate reports": "0 (0.00 %)"}
	for _, c := range inv1.Counts {
		if w, ok := want[c.Name]; ok && c.Value != w {
			t.Errorf("invariant 1 %s = %s, want %s", c.Name, c.Value, w)
		}
	}
	if got := res.Invariant(5).Counts[1].Value; got != "4" {
		t.Errorf("probes agreeing = %s, want 4", got)
	}
	if len(res.Recoveries) != 1 || res.Recoveries[0].Commands <= 0 {
		t.Errorf("recoveries = %+v, want one with commands answered again", res.Recoveries)
	}
}

func TestAcknowledgedJobWithoutOutcomeFails(t *testing.T) {
	r := clean()
	d := r.queue(30, "gina", "http://d.example/")
	res := r.check(t)
	failsOnly(t, res, 1, d, "no outcome reported", "final state: absent")
}

func TestPipelineEndWithoutReportFails(t *testing.T) {
	r := clean()
	d := r.queue(30, "gina", "http://d.example/")
	r.take(31, "p1", "key1", d)
	r.end(32, "p1", d, "done")
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1", "finished_at", "2"))
	failsOnly(t, r.check(t), 1, d, "no report reached the channel")
}

func TestTwoOutcomesFail(t *testing.T) {
	r := clean()
	r.line(30, "alice: Your job for "+urlA+" was aborted. ("+idA+")")
	failsOnly(t, r.check(t), 1, idA, "two outcomes: finished, then aborted")
}

func TestDuplicateReportsAreCounted(t *testing.T) {
	r := clean()
	// The same report again, and once more inside a combined line.
	r.line(30, "alice: Your job for "+urlA+" has finished. ("+idA+")")
	r.line(31, "alice: 2 of your jobs finished: "+urlA+" ("+idA+"), "+urlE+" ("+idE+")")
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("duplicates alone fail the run:\n%s", res.Summary())
	}
	for _, c := range res.Invariant(1).Counts {
		if c.Name == "duplicate reports" && c.Value != "3 (60.00 %)" {
			t.Errorf("duplicate reports = %s, want 3 (60.00 %%)", c.Value)
		}
	}
}

func TestOverlappingTakesFail(t *testing.T) {
	r := clean()
	r.take(7, "p9", "key9", idC)
	failsOnly(t, r.check(t), 2, idC, "held by p2", "taken by p9")
}

func TestTakeAfterEndFails(t *testing.T) {
	r := clean()
	r.take(8, "p9", "key9", idA)
	r.end(9, "p9", idA, "done")
	failsOnly(t, r.check(t), 2, idA, "taken by p9 (api) after it ended")
}

func TestRequeuedJobMayBeTakenAgain(t *testing.T) {
	r := clean()
	// E finished; an op expires it and queues it again: a new life.
	r.queue(30, "erin", urlE)
	r.take(31, "p1", "key1", idE)
	r.end(32, "p1", idE, "done")
	r.line(32.3, "erin: Your job for "+urlE+" has finished. ("+idE+")")
	if res := r.check(t); res.Failed() {
		t.Fatalf("a re-registered job's take fails:\n%s", res.Summary())
	}
}

func TestTakeAfterRevocationFails(t *testing.T) {
	r := clean()
	// key3 was revoked at 12; it takes D at 14.
	d := r.queue(13, "gina", "http://d.example/")
	r.take(14, "p3", "key3", d)
	r.end(14.5, "p3", d, "done")
	r.line(14.8, "gina: Your job for http://d.example/ has finished. ("+d+")")
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1", "finished_at", "2"))
	failsOnly(t, r.check(t), 3, "key key3 took a job 2s after its revocation", d)
}

func TestTakeJustAfterRevocationPasses(t *testing.T) {
	r := clean()
	d := r.queue(11.9, "gina", "http://d.example/")
	r.take(12.5, "p3", "key3", d) // 0.5 s: a take already under way
	r.end(12.7, "p3", d, "done")
	r.line(12.9, "gina: Your job for http://d.example/ has finished. ("+d+")")
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1", "finished_at", "2"))
	if res := r.check(t); res.Failed() {
		t.Fatalf("a take within the grace fails:\n%s", res.Summary())
	}
}

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

func TestGrowingRSSFails(t *testing.T) {
	r := clean()
	// An hour's run: node-b grows 100 MB an hour, twice the limit.
	for s := 0.0; s <= 3600; s += 30 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"rss_bytes": 40e6 + s/3600*100e6}})
	}
	failsOnly(t, r.check(t), 6, "node-b/rss_bytes grows +100.0 MB per hour after warm-up (limit +50.0 MB, judged against +50.0 MB")
}

func TestShortRunGrowingMoreThanAnHourAllowsFails(t *testing.T) {
	r := clean()
	// A minute's run: node-b grows 2 MB a second, more in the window
	// than an hour may add.
	for s := 0.0; s <= 60; s += 5 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"rss_bytes": 40e6 + s*2e6}})
	}
	failsOnly(t, r.check(t), 6, "node-b/rss_bytes grows +7200.0 MB per hour")
	// 0.5 MB a second is 24 MB over the window: noted, not failed.
	r = clean()
	for s := 0.0; s <= 60; s += 5 {
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"rss_bytes": 40e6 + s*0.5e6}})
	}
	if res := r.check(t); !res.Invariant(6).Pass {
		t.Fatalf("a short run's warm-up fails:\n%s", res.Summary())
	}
}

func TestLeaderChangeIsNotGrowth(t *testing.T) {
	r := clean()
	// node-b is a flat standby, then the leader at a higher flat level.
	for s := 0.0; s <= 3600; s += 30 {
		v, g := 20e6, 20.0
		if s >= 1800 {
			v, g = 200e6, 900
		}
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"rss_bytes": v, "goroutines": g}})
	}
	r.add(1790, history.Event{Kind: history.Leader, Actor: ""})
	r.add(1795, history.Event{Kind: history.Leader, Actor: "node-b"})
	res := r.check(t)
	if !res.Invariant(6).Pass {
		t.Fatalf("a standby becoming leader counts as growth:\n%s", res.Summary())
	}
}

func TestRestartIsNotGrowth(t *testing.T) {
	r := clean()
	// node-b is flat in each life; a kill restarts it lower, then it
	// is flat again at a higher level than the first start would give.
	r.add(30, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "start"})
	r.add(31, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "end"})
	for s := 0.0; s <= 60; s += 2 {
		v := 30e6
		if s >= 30 {
			v = 90e6
		}
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"rss_bytes": v}})
	}
	res := r.check(t)
	if !res.Invariant(6).Pass {
		t.Fatalf("a restart counts as growth:\n%s", res.Summary())
	}
}

func TestSlowRepliesOutsideFaultsFail(t *testing.T) {
	r := clean()
	for i := 0; i < 5; i++ {
		r.command(48+float64(i), 1.5, "hank", "!pending", "No jobs are pending.")
	}
	failsOnly(t, r.check(t), 7, "replies p99 1500 ms", "!pending")
}

func TestSlowFinishReportFails(t *testing.T) {
	r := clean()
	d := r.queue(30, "gina", "http://d.example/")
	r.take(31, "p1", "key1", d)
	r.end(32, "p1", d, "done")
	r.line(36, "gina: Your job for http://d.example/ has finished. ("+d+")")
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1", "finished_at", "2"))
	failsOnly(t, r.check(t), 7, "finish reports p99 4000 ms", d)
}

func TestUnansweredCommandOutsideFaultsFails(t *testing.T) {
	r := clean()
	r.id++
	r.add(50, history.Event{Kind: history.Send, Actor: "ivy", Channel: "#ab", Text: "!status", ID: r.id})
	r.add(80, history.Event{Kind: history.Reply, Actor: "ivy", Channel: "#ab", ID: r.id, Outcome: "timeout"})
	failsOnly(t, r.check(t), 7, "replies p99 ∞")
}

func TestParseCombinedLines(t *testing.T) {
	got := parseLine("erin: 3 commands done, 1 refused: Added ignore pattern {^a, ^b} to job abc. | Sorry, min delay must be less than or equal to max delay.")
	if len(got) != 3 || got[0].kind != sayIgnore || got[0].pattern != "^a" || got[1].pattern != "^b" || got[1].ident != "abc" || got[2].kind != sayRefused {
		t.Errorf("combined reply: %+v", got)
	}
	got = parseLine("[for #other] erin: 2 of your jobs finished: http://x.example/ (id1), http://y.example/ (id2, aborted)")
	if len(got) != 2 || got[0].ident != "id1" || got[0].outcome != "finished" || got[1].ident != "id2" || got[1].outcome != "aborted" {
		t.Errorf("combined finish: %+v", got)
	}
	got = parseLine(`erin: Redis has answered about "!a http://x.example/": Queued http://x.example/.`)
	if len(got) != 1 || got[0].kind != sayQueued || got[0].ident != ident.Of("http://x.example/") {
		t.Errorf("late answer: %+v", got)
	}
	got = parseLine("erin: Added ignore pattern ^x\\d{2,4}$ to job abc.")
	if len(got) != 1 || got[0].pattern != `^x\d{2,4}$` {
		t.Errorf("pattern with braces: %+v", got)
	}
	got = parseLine("erin: Job abc <http://x.example/> has had no heartbeat for 2h0m on pipeline \"p\"; it has been marked as failed.")
	if len(got) != 1 || got[0].outcome != "failed" || got[0].ident != "abc" {
		t.Errorf("reaper line: %+v", got)
	}
	// A fail's report is the admin notice queued with it (bot/settings.go's
	// failNotice, the admin CLI's lines); !fail's reply only acknowledges.
	for _, line := range []string{
		"erin: Job abc for http://x.example/ failed: removed from its queue, it will not run any more (failed by hank).",
		"Job abc for http://x.example/ was failed by root (operator): removed from its queue, it will not run any more.",
		"Job abc for http://x.example/ was failed by root (operator): its pipeline 0123abcd is gone.",
	} {
		got = parseLine(line)
		if len(got) != 1 || got[0].kind != sayReport || got[0].outcome != "failed" || got[0].ident != "abc" || got[0].url != "http://x.example/" {
			t.Errorf("fail notice %q: %+v", line, got)
		}
	}
	if got = parseLine("hank: OK, job abc for http://x.example/ is failed; its report goes to #ab."); len(got) != 0 {
		t.Errorf("!fail's acknowledgement read as %+v", got)
	}
}

// TestRunWritesReport checks a run kept on disk, as the command does.
func TestRunWritesReport(t *testing.T) {
	r := clean()
	dir := t.TempDir()
	f, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.events {
		f.Add(e)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.dump)
	if err := os.WriteFile(filepath.Join(dir, "final_redis.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.PNG = false
	res, err := RunWith(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("kept clean run fails:\n%s", res.Summary())
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<svg", "kill-leader", "Resident memory", "PASS", "Command reply latency"} {
		if !strings.Contains(string(html), w) {
			t.Errorf("report lacks %q", w)
		}
	}
}

func TestInvariantWithNothingToCheckFails(t *testing.T) {
	r := clean()
	kept := r.events[:0]
	for _, e := range r.events {
		if e.Kind != history.Revoke {
			kept = append(kept, e)
		}
	}
	r.events = kept
	failsOnly(t, r.check(t), 3, "nothing to check: the run recorded no key revocations")
	opts := DefaultOptions()
	opts.AllowEmpty = true
	if res := Check(r.events, r.dump, opts); res.Failed() {
		t.Fatalf("AllowEmpty still fails:\n%s", res.Summary())
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
	r.probe(50, "status", idB, "other", "Sorry, something")
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("runner-style probes fail:\n%s", res.Summary())
	}
	// But the dashboard may not list an ended job as running.
	r.probe(51, "dashboard", idA, "running", "")
	failsOnly(t, r.check(t), 5, idA, "dashboard says running, the model says finished")
}

// A scripted user who types a bot's words acknowledges nothing.
func TestUsersLinesAreNotTheBots(t *testing.T) {
	r := clean()
	r.id++
	r.add(30, history.Event{Kind: history.Send, Actor: "mallory", Channel: "#ab", Text: "Queued http://m.example/.", ID: r.id})
	r.add(30, history.Event{Kind: history.Line, Actor: "mallory", Channel: "#ab", Text: "Queued http://m.example/."})
	r.add(30.5, history.Event{Kind: history.Reply, Actor: "mallory", Channel: "#ab", ID: r.id, Outcome: "timeout"})
	res := r.check(t)
	if got := res.Invariant(1).Counts[0].Value; got != "4" {
		t.Errorf("acknowledged = %s, want 4 (mallory's line is not an acknowledgement)", got)
	}
}

// Found on the runner's first run: a job failed while a pipeline held
// it was taken by another pipeline. A duplicate !a after the failure
// that the bot refused is no re-registration.
func TestTakeOfFailedJobFails(t *testing.T) {
	r := clean()
	r.command(30, 0.1, "hank", "!fail "+idC, "Job "+idC+" for "+urlC+" failed: removed from its queue, it will not run any more.")
	r.command(31, 0.1, "ivy", "!a "+urlC, "Job for "+urlC+" already exists.")
	r.take(32, "p9", "key9", idC)
	r.set(idC, "hash", registeredJob(urlC, "carol", "started_at", "1", "failed", "true"))
	res := r.check(t)
	inv := res.Invariant(2)
	if inv.Pass || !strings.Contains(fmt.Sprint(inv.Violations), "taken by p9 (api) after it ended (failed)") {
		t.Fatalf("a take of a failed job passes:\n%s", res.Summary())
	}
}

// The run stops: a job that ended in its last seconds may not have been
// reported yet, and a report still queued in Redis is still owed, not
// lost.
func TestReportsStillOwedAtTheEndPass(t *testing.T) {
	r := clean()
	d := r.queue(30, "gina", "http://d.example/")
	r.take(31, "p1", "key1", d)
	r.end(55, "p1", d, "done") // 5.5 s before the end
	r.set(d, "hash", registeredJob("http://d.example/", "gina", "started_at", "1", "finished_at", "2"))
	f := r.queue(32, "gina", "http://f.example/")
	r.take(33, "p1", "key1", f)
	r.end(34, "p1", f, "done")
	r.set(f, "hash", registeredJob("http://f.example/", "gina", "started_at", "1", "finished_at", "2"))
	r.set("finish_notifications", "list", []string{`{"aborted":false,"started_by":"gina","started_in":"#ab","url":"http://f.example/"}`})
	// A reaper's failure in the last seconds: its failed_at says when.
	g := r.queue(35, "gina", "http://g.example/")
	r.take(36, "p1", "key1", g)
	r.set(g, "hash", registeredJob("http://g.example/", "gina", "started_at", "1", "failed", "true"))
	r.set("archivebot:failed:"+g, "hash", map[string]string{"failed_at": fmt.Sprint(r.at(57).Unix()), "failed_by": "reaper"})
	res := r.check(t)
	if !res.Invariant(1).Pass {
		t.Fatalf("owed reports count as lost:\n%s", res.Summary())
	}
	if s := fmt.Sprint(res.Invariant(1).Counts); !strings.Contains(s, "ended in the last 10s, report not awaited 2") || !strings.Contains(s, "report still queued in Redis 1") {
		t.Errorf("counts: %s", s)
	}
}

// The runner takes the first line addressed to a user as the reply to
// their command; a finish report addressed to them is not that answer,
// and its delay is not a reply latency.
func TestFinishReportTakenForAReplyIsNoLatency(t *testing.T) {
	r := clean()
	for i := 0; i < 3; i++ {
		r.id++
		r.add(48+float64(i), history.Event{Kind: history.Send, Actor: "alice", Channel: "#ab", Text: "!status", ID: r.id})
		r.add(53+float64(i), history.Event{Kind: history.Reply, Actor: "alice", Channel: "#ab", ID: r.id,
			Text: "Your job for " + urlA + " has finished. (" + idA + ")", Num: map[string]float64{"latency_ms": 5000}})
	}
	res := r.check(t)
	if !res.Invariant(7).Pass {
		t.Fatalf("finish reports count as slow replies:\n%s", res.Summary())
	}
	if !strings.Contains(fmt.Sprint(res.Invariant(7).Notes), "3 replies were finish reports") {
		t.Errorf("notes: %v", res.Invariant(7).Notes)
	}
}

func TestSilentStreamLossFails(t *testing.T) {
	r := clean()
	// A viewer misses 10 entries of 1,000 and is told of 4.
	r.add(50.5, history.Event{Kind: history.Stream, Actor: "viewer-2", Via: "v2", Num: map[string]float64{"frames": 99, "entries": 990, "gaps": 10, "dropped_reported": 4}})
	failsOnly(t, r.check(t), 8, "viewer viewer-2 lost 6 of 1000 entries without saying so")
}

func TestReportedStreamLossPasses(t *testing.T) {
	r := clean()
	r.add(50.5, history.Event{Kind: history.Stream, Actor: "viewer-2", Via: "v2", Num: map[string]float64{"frames": 99, "entries": 990, "gaps": 10, "dropped_reported": 10}})
	// In a fault window, losses are not judged.
	r.add(9.5, history.Event{Kind: history.Stream, Actor: "viewer-3", Via: "v2", Num: map[string]float64{"frames": 50, "entries": 500, "gaps": 500}})
	if res := r.check(t); res.Failed() {
		t.Fatalf("reported or fault-time losses fail:\n%s", res.Summary())
	}
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

// A report of a job no scripted user was seen to queue (queued before
// the observer joined, say) ends that life; a later !a of the same URL
// is a new life, not the acknowledgement of the old one.
func TestRequeueAfterUnacknowledgedLife(t *testing.T) {
	r := clean()
	const url = "http://z.example/"
	z := ident.Of(url)
	r.line(30, "zed: Your job for "+url+" has finished. ("+z+")")
	// The acknowledgement, seen once (the observer missed its copy).
	r.id++
	r.add(32, history.Event{Kind: history.Send, Actor: "zed", Channel: "#ab", Text: "!a " + url, ID: r.id})
	r.add(32.1, history.Event{Kind: history.Reply, Actor: "zed", Channel: "#ab", Text: "Queued " + url + ".", ID: r.id, Num: map[string]float64{"latency_ms": 100}})
	r.command(33, 0.1, "zed", "!abort "+z, "Job "+z+" for "+url+" was aborted before it started.")
	r.line(33.2, "zed: Your job for "+url+" was aborted. ("+z+")")
	if res := r.check(t); res.Failed() {
		t.Fatalf("a new life after an unacknowledged one fails:\n%s", res.Summary())
	}
}

// A bridge's own take (its log, history.ViaBridgeSelf) for a pipeline
// behind it that never got the answer: the job is held by the bridge's
// key and by no pipeline, and the node rightly says "running" until the
// reaper fails it. Found by the short run on most seeds: without the
// bridge's take the model says "queued".
func TestBridgeOrphanTakeIsRunning(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.add(31, history.Event{Kind: history.Take, Actor: "bridge-0", Via: history.ViaBridgeSelf, Target: "bridge-0", Ident: f})
	// The quiet point at 45–47 probes it.
	r.probe(46, "jobs_api", f, "running", "")
	r.probe(46, "dashboard", f, "running", "")
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "pipeline_id", "archivebot:bridge-0"))
	r.set("working", "list", []string{idC, f})
	if res := r.check(t); res.Failed() {
		t.Fatalf("an orphan of the bridge's take fails:\n%s", res.Summary())
	}
	// Without the bridge's take the probes are stale: the model says queued.
	var without []history.Event
	for _, e := range r.events {
		if e.Via != history.ViaBridgeSelf {
			without = append(without, e)
		}
	}
	r.events = without
	failsOnly(t, r.check(t), 5, f, "stale: jobs_api says running, the model says queued")
}

// The bridge takes a job and a pipeline behind it takes it from the
// bridge: one hold passed on, not two pipelines holding the job; the
// orphan the reaper failed does not hold a job queued again.
func TestBridgeTakePassedToItsPipeline(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.add(31, history.Event{Kind: history.Take, Actor: "bridge-0", Via: history.ViaBridgeSelf, Target: "bridge-0", Ident: f})
	r.add(31.1, history.Event{Kind: history.Take, Actor: "bridged0-1", Via: "bridge", Target: "bridge-0", Ident: f})
	r.add(33, history.Event{Kind: history.JobEnd, Actor: "bridged0-1", Via: "bridge", Ident: f, Outcome: "done"})
	r.line(33.2, "gina: Your job for "+url+" has finished. ("+f+")")
	// G: the bridge's take no pipeline got; the reaper fails it, a user
	// queues it again, an API pipeline takes it.
	const urlG = "http://g.example/"
	g := r.queue(32, "gina", urlG)
	r.add(32.5, history.Event{Kind: history.Take, Actor: "bridge-0", Via: history.ViaBridgeSelf, Target: "bridge-0", Ident: g})
	r.line(40, "Job "+g+" <"+urlG+"> has had no heartbeat for 30 seconds; it has been marked as failed.")
	r.queue(41, "gina", urlG)
	r.take(42, "p1", "key1", g)
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "finished_at", "1764650033.0"))
	r.set(g, "hash", registeredJob(urlG, "gina", "started_at", "1764650042.0", "pipeline_id", "archivebot:key1"))
	r.set("working", "list", []string{idC, g})
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a take passed from the bridge to its pipeline fails:\n%s", res.Summary())
	}
	found := false
	for _, c := range res.Invariant(2).Counts {
		found = found || c.Name == "relayed takes" && c.Value == "2 (1 passed on, 1 orphans, 1 of them found ended)"
	}
	if !found {
		t.Errorf("the bridge's takes are not counted: %+v", res.Invariant(2).Counts)
	}
	// Another bridge's pipeline taking F while bridged0-1 holds it is
	// two holders.
	r.add(32, history.Event{Kind: history.Take, Actor: "bridged1-0", Via: "bridge", Target: "bridge-1", Ident: f})
	failsOnly(t, r.check(t), 2, f, "held by bridged0-1", "taken by bridged1-0")
}

// The node's answer to a take, seen by the API proxy, that the pipeline
// never got (partitioned, killed): held by the key, "running" at the
// node, until the reaper fails it; failed while Redis was read at the
// end, it is "running" in the dump and failed in the model, its death
// line still in the admin notices. Found by the short run (the second
// modelling gap of doc/soak.md).
func TestLostTakeAnswerFailedWhileRedisIsRead(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.add(31, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key9", Ident: f})
	r.probe(46, "jobs_api", f, "running", "")
	death := "gina: Job " + f + " <" + url + "> has had no heartbeat for 30 seconds; it has been marked as failed."
	r.line(59.5, death)
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "pipeline_id", "archivebot:key9"))
	r.set("working", "list", []string{idC, f})
	for i := range r.events {
		if r.events[i].Kind == history.Final {
			r.events[i].Num = map[string]float64{"dump_started": float64(r.at(58).UnixNano()) / 1e9}
		}
	}
	if res := r.check(t); res.Failed() {
		t.Fatalf("a take whose answer was lost, failed while Redis was read, fails:\n%s", res.Summary())
	}
	// The death line not yet said: it waits in the admin notices, owed.
	var kept []history.Event
	for _, e := range r.events {
		if e.Text != death {
			kept = append(kept, e)
		}
	}
	r.events = kept
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "failed", "true"))
	r.set("working", "list", []string{idC})
	r.set("archivebot:admin_notices", "list", []string{`{"channel":"#ab","text":"` + death + `"}`})
	if res := r.check(t); res.Failed() {
		t.Fatalf("a death line still queued in Redis fails:\n%s", res.Summary())
	}
	// Neither said nor queued: lost (invariant 1; invariant 5 sees
	// Redis's failed against the model's running too).
	r.set("archivebot:admin_notices", "list", []string{})
	res := r.check(t)
	if inv := res.Invariant(1); inv.Pass || !strings.Contains(fmt.Sprint(inv.Violations), "no outcome reported in the channel, and not queued or running at the end (final state: failed)") {
		t.Fatalf("a death line neither said nor queued passes invariant 1:\n%s", res.Summary())
	}
}

// The records of one take may come in any order within a second (the
// simulator stamps its lines in milliseconds, the proxy in nanoseconds,
// the bridge's log is read apart from its pipeline's): found by the
// first run with the proxy's records, every take looked held twice.
func TestRelayedTakeRecordedAfterThePipelines(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.add(31, history.Event{Kind: history.Take, Actor: "api9", Via: "api", Target: "key9", Ident: f})
	r.add(31.0004, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key9", Ident: f})
	r.add(33, history.Event{Kind: history.JobEnd, Actor: "api9", Via: "api", Ident: f, Outcome: "done"})
	r.line(33.2, "gina: Your job for "+url+" has finished. ("+f+")")
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "finished_at", "1764650033.0"))
	if res := r.check(t); res.Failed() {
		t.Fatalf("a take recorded by the pipeline before the proxy fails:\n%s", res.Summary())
	}
	// Another key's proxy record of the job at that moment is a second holder.
	r.add(31.0005, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key8", Ident: f})
	failsOnly(t, r.check(t), 2, f, "held by api9", "taken by api-proxy")
}

// A pipeline's record of a take comes late (3.2 s on a loaded machine)
// and the job was failed in between, 1.4 s after the node's take that
// the proxy saw: the same take, passed on, not a take after the end. A
// pipeline's take after the end that no earlier take of the node's
// explains is still a violation.
func TestLateRecordOfATakeBeforeTheEnd(t *testing.T) {
	build := func(proxy bool) *run {
		r := clean()
		const url = "http://f.example/"
		f := r.queue(30, "gina", url)
		if proxy {
			r.add(31, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key1", Ident: f})
		}
		r.line(32.4, "gina: Job "+f+" <"+url+"> has had no heartbeat for 30 seconds; it has been marked as failed.")
		r.take(34.2, "api1", "key1", f)
		r.end(41, "api1", f, "abandoned")
		job := `{"url":"` + url + `","started_at":"` + fmt.Sprint(float64(r.at(31).UnixMilli())/1000) + `","pipeline_id":"pipeline:` + md5hex("api:key1") + `"}`
		r.set("archivebot:failed:"+f, "hash", map[string]string{"url": url, "failed_by": "reaper", "failed_at": "1764650032", "job": job})
		r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "failed", "true"))
		return r
	}
	if res := build(true).check(t); res.Failed() {
		t.Fatalf("a pipeline's late record of a take made before the fail fails:\n%s", res.Summary())
	}
	res := build(false).check(t)
	if inv := res.Invariant(2); inv.Pass || !strings.Contains(fmt.Sprint(inv.Violations), "after it ended") {
		t.Fatalf("a take after the end with no earlier take of the node's passes invariant 2:\n%s", res.Summary())
	}
}

// A job the node says a key held that no take handed it: a deposed
// leader's take that Redis ran after the lease moved on (the planted
// "fence skipped in the take script" shows it after a partition of the
// leader from Redis). Every API take is recorded as the proxy saw the
// node's answer, so a hold without one is a write no take asked of the
// leader.
func TestHoldWithoutTakeFails(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.line(45, "gina: Job "+f+" <"+url+"> has had no heartbeat for 30 seconds; it has been marked as failed.")
	job := `{"url":"` + url + `","started_at":"` + fmt.Sprint(float64(r.at(32).UnixMilli())/1000) + `","pipeline_id":"pipeline:` + md5hex("api:key1") + `"}`
	r.set("archivebot:failed:"+f, "hash", map[string]string{"url": url, "failed_by": "reaper", "failed_at": "1764650045", "job": job})
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650032.0", "failed", "true"))
	failsOnly(t, r.check(t), 2, f, "held by key key1", "no take of it was seen")
	// Seen by the proxy: a take whose pipeline never got the answer.
	r.add(32, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key1", Ident: f})
	if res := r.check(t); res.Failed() {
		t.Fatalf("a recorded take whose answer was lost fails:\n%s", res.Summary())
	}
}

// A take that ran as the Redis master was killed: its answer died with
// the master's connection (the node answered "store failed; retry").
// The second long soak saw one, 76 ms after a kill, and the reaper failed
// the job 30 s later; the checker excused it then. A take now carries a
// take_id, and the pipeline's retry with it is answered the job the lost
// take took (doc/pipeline-api.md, Takes), so the retry's answer is seen
// and a hold no take saw fails at a master kill too.
func TestTakeAnswerLostWithTheMasterFails(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.add(31.9, history.Event{Kind: history.Fault, Fault: "kill-redis-master", Target: "127.0.0.1:1", Outcome: "start"})
	r.add(39.9, history.Event{Kind: history.Fault, Fault: "kill-redis-master", Target: "127.0.0.1:1", Outcome: "end"})
	r.line(45, "gina: Job "+f+" <"+url+"> has had no heartbeat for 30 seconds; it has been marked as failed.")
	job := `{"url":"` + url + `","started_at":"` + fmt.Sprint(float64(r.at(32).UnixMilli())/1000) + `","pipeline_id":"pipeline:` + md5hex("api:key1") + `"}`
	r.set("archivebot:failed:"+f, "hash", map[string]string{"url": url, "failed_by": "reaper", "failed_at": "1764650045", "job": job})
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650032.0", "failed", "true"))
	failsOnly(t, r.check(t), 2, f, "held by key key1", "no take of it was seen")
	// The retry's answer, seen by the proxy: the pipeline held it.
	r.add(33.5, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key1", Ident: f})
	if res := r.check(t); res.Failed() {
		t.Fatalf("a take answered again after a master kill fails:\n%s", res.Summary())
	}
}

// The load figures: log entries/s from the v2 viewers, the leader's CPU
// from its samples while it led, and CPU per 1,000 entries/s.
func TestLoadFigures(t *testing.T) {
	r := clean()
	// node-a leads until 11 s, node-b after (clean's Leader event);
	// node-b spends 0.3 CPU s per 5 s, node-a ten times as much (not
	// counted: it does not lead after warm-up).
	r.add(0, history.Event{Kind: history.Leader, Actor: "node-a"})
	for s := 0.0; s <= 60; s += 5 {
		r.add(s+0.1, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"cpu_seconds": 10 + s/5*0.3}})
		r.add(s+0.1, history.Event{Kind: history.Sample, Actor: "node-a", Num: map[string]float64{"cpu_seconds": 10 + s/5*3}})
		// The machine: 1.9 of 2 cores busy, most of it the pipelines.
		r.add(s+0.2, history.Event{Kind: history.Sample, Actor: "machine", Num: map[string]float64{"cores": 2, "cpu_busy": 1.9, "cpu_pipelines": 1.1, "cpu_nodes": 0.3, "cpu_harness": 0.5}})
	}
	res := r.check(t)
	l := res.Load
	if l.Cores != 2 || l.MachineBusy < 1.89 || l.MachineBusy > 1.91 || l.CPU["pipelines"] < 1.09 || l.CPU["pipelines"] > 1.11 {
		t.Errorf("machine figures: busy %.2f of %.0f, by class %v", l.MachineBusy, l.Cores, l.CPU)
	}
	if !strings.Contains(res.Summary(), "machine busy 1.90 of 2 cores (nodes 0.30, redis 0.00, pipelines 1.10") {
		t.Errorf("summary lacks where the CPU went:\n%s", res.Summary())
	}
	for _, sl := range res.Slopes {
		if strings.Contains(sl.Series, "machine") {
			t.Errorf("the machine's CPU is judged as a process's resource: %+v", sl)
		}
	}
	// 1,000 entries per 5 s: 200/s.
	if l.EntriesPerSec < 190 || l.EntriesPerSec > 210 {
		t.Errorf("entries/s %.1f, want 200", l.EntriesPerSec)
	}
	// 0.3 s per 5 s: 0.06 cores.
	if l.LeaderCPU < 0.05 || l.LeaderCPU > 0.07 {
		t.Errorf("leader CPU %.3f, want 0.06", l.LeaderCPU)
	}
	if want := l.LeaderCPU / 0.2; l.CPUPer1000 < want*0.99 || l.CPUPer1000 > want*1.01 {
		t.Errorf("CPU per 1,000 entries/s %.3f, want %.3f", l.CPUPer1000, want)
	}
	if !strings.Contains(res.Summary(), "cores per 1,000 log entries/s") || !strings.Contains(res.Summary(), "faults by kind: kill-leader 1;") {
		t.Errorf("summary lacks the load or fault figures:\n%s", res.Summary())
	}
}

// A reset breaking the leader's IRC connection used to lose the line
// written in the instant before (seed 2's short run: a report written
// 10 ms before the reset; TCP discards what the server had not read),
// and the checker excused it. The node now acknowledges a report only
// once the server answered a PING sent after it (bot/irc/confirm.go), so
// a report lost at a reset, however close to it, is a violation.
func TestReportLostAtAResetFails(t *testing.T) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.take(31, "p1", "key1", f)
	r.end(39.99, "p1", f, "done")
	r.add(40, history.Event{Kind: history.Fault, Fault: "partition-leader-irc", Target: "node-a reset", Outcome: "start"})
	r.add(50, history.Event{Kind: history.Fault, Fault: "partition-leader-irc", Target: "node-a reset", Outcome: "end"})
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1", "finished_at", "2"))
	res := r.check(t)
	if inv := res.Invariant(1); inv.Pass || !strings.Contains(fmt.Sprint(inv.Violations), "no report reached the channel") {
		t.Fatalf("a report lost 10 ms before a reset passes:\n%s", res.Summary())
	}
}

// The stream's recovery is per viewer: a viewer whose interval in the
// fault carried no frame stopped, and flowed again at its next interval
// with frames; the figure is the last viewer's, from the fault's start.
// A viewer idle long after the fault is not this fault's.
func TestStreamRecoveryPerViewer(t *testing.T) {
	r := clean()
	// clean's leader kill is at 8–10 s; viewer-1 (clean's) never stops.
	// viewer-2 has no frame in the intervals ending at 10.5 and 15.5,
	// viewer-3 from 10.5 to 25.5 (flowing again at 30.5); viewer-4 only
	// at 50.5, more than 30 s after the fault ended.
	for s := 0.0; s <= 60; s += 5 {
		f := map[string]float64{"viewer-2": 100, "viewer-3": 100, "viewer-4": 100}
		if s == 10 || s == 15 {
			f["viewer-2"] = 0
		}
		if s >= 10 && s <= 25 {
			f["viewer-3"] = 0
		}
		if s == 50 {
			f["viewer-4"] = 0
		}
		for _, v := range []string{"viewer-2", "viewer-3", "viewer-4"} {
			r.add(s+0.5, history.Event{Kind: history.Stream, Actor: v, Via: "upstream", Num: map[string]float64{"frames": f[v], "entries": 10 * f[v]}})
		}
	}
	res := r.check(t)
	if len(res.Recoveries) != 1 {
		t.Fatalf("recoveries %+v", res.Recoveries)
	}
	rc := res.Recoveries[0]
	if want := r.at(30.5).Sub(rc.Start); rc.StreamStopped != 2 || rc.StreamViewers != 4 || rc.Stream != want {
		t.Errorf("stream recovery: %d of %d viewers stopped, the last flowing again after %v; want 2 of 4, %v", rc.StreamStopped, rc.StreamViewers, rc.Stream, want)
	}
	if !strings.Contains(res.Summary(), "stopped for 2 of 4 viewers, flowing again for all within 23s") {
		t.Errorf("summary:\n%s", res.Summary())
	}
}

// noisyLives is node-b over a 30-minute run as the first long soak had
// it: a life of about a minute between kills, its goroutines flat but
// noisy (a leader's goroutines follow its backlog of requests waiting
// for a Redis connection: 150–550 within a minute in the soak), plus
// perHour of growth.
func noisyLives(seed uint64, lifetime float64, perHour float64) *run {
	r := clean()
	rng := rand.New(rand.NewPCG(seed, 1))
	for s := lifetime; s < 1800; s += lifetime {
		r.add(s, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "start"})
		r.add(s+1, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "end"})
	}
	for s := 0.0; s <= 1800; s += 5 {
		g := 300 + rng.NormFloat64()*150 + perHour*s/3600
		r.add(s, history.Event{Kind: history.Sample, Actor: "node-b", Num: map[string]float64{"goroutines": g}})
	}
	return r
}

func slopeOf(res *Result, series string) Slope {
	for _, s := range res.Slopes {
		if s.Series == series {
			return s
		}
	}
	return Slope{}
}

// TestNoisyShortLivesAreNotGrowth: pure noise over many short lives fits
// a slope far from zero; the seed is one whose slope is above the limit
// (about 4 seeds in 10 are), as the first long soak's node-b was
// (+993/h over 26 lives). That is not growth the samples show: its
// standard error is several times the limit.
func TestNoisyShortLivesAreNotGrowth(t *testing.T) {
	res := noisyLives(3, 65, 0).check(t)
	sl := slopeOf(res, "node-b/goroutines")
	if sl.PerHour <= 200 {
		t.Fatalf("the seed's fitted slope is %+.1f/h, within the limit: not the case this test is about", sl.PerHour)
	}
	t.Logf("fitted slope: %+v", sl)
	if !res.Invariant(6).Pass {
		t.Fatalf("noise over short lives counts as growth (%+v):\n%s", sl, res.Invariant(6).Violations)
	}
}

// TestNoisyGrowthFails: the same noise does not hide real growth that the
// samples show: 600 goroutines an hour in one life of 30 minutes.
func TestNoisyGrowthFails(t *testing.T) {
	res := noisyLives(3, 3600, 600).check(t)
	failsOnly(t, res, 6, "node-b/goroutines grows")
}

// A take the node answered again under its take_id (the pipeline's
// retry after the answer was lost between the proxy and the pipeline):
// the proxy records the job twice for one key and one take_id, then the
// pipeline's own take. One hold, counted; the same job answered to the
// same key under another take_id is two takes of one job and fails.
func TestTakeAnsweredAgainPasses(t *testing.T) {
	build := func(second string) *run {
		r := clean()
		const url = "http://f.example/"
		f := r.queue(30, "gina", url)
		r.add(31, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key1", Ident: f, Text: "take-aaaaaaaa"})
		r.add(33, history.Event{Kind: history.Take, Actor: "api-proxy", Via: history.ViaProxy, Target: "key1", Ident: f, Text: second})
		r.take(33.1, "p1", "key1", f)
		r.end(35, "p1", f, "done")
		r.line(35.2, "gina: Your job for "+url+" has finished. ("+f+")")
		r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "finished_at", "1764650035.0"))
		return r
	}
	res := build("take-aaaaaaaa").check(t)
	if res.Failed() {
		t.Fatalf("a take answered again under its take_id fails:\n%s", res.Summary())
	}
	if !strings.Contains(res.Summary(), "takes answered again under their take_id 1") {
		t.Errorf("not counted:\n%s", res.Summary())
	}
	failsOnly(t, build("take-bbbbbbbb").check(t), 2, "held by api-proxy", "taken by api-proxy")
}

// A direct-Redis pipeline goes on crawling a job !failed under it (the
// node cannot stop it), and the job's URL may be queued again at once:
// another pipeline taking the new life is not two holders of one life.
// Found by a load run at 719 entries/s. Before the fail, the same take
// is two holders.
func TestDirectPipelineStillCrawlingAFailedJob(t *testing.T) {
	build := func(failAt float64) *run {
		r := clean()
		const url = "http://f.example/"
		f := r.queue(30, "gina", url)
		r.add(31, history.Event{Kind: history.Take, Actor: "direct08", Via: "direct", Ident: f})
		r.line(failAt, "gina: Job "+f+" for "+url+" failed: removed from its queue, it will not run any more (failed by hank).")
		r.queue(40, "gina", url)
		r.take(41, "p1", "key1", f)
		r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650041.0", "pipeline_id", "pipeline:"+md5hex("api:key1")))
		r.set("working", "list", []string{idC, f})
		return r
	}
	res := build(35).check(t)
	if inv := res.Invariant(2); !inv.Pass {
		t.Fatalf("a new life taken while a direct pipeline crawls the failed one fails invariant 2:\n%s", res.Summary())
	}
	if !strings.Contains(res.Summary(), "new lives taken while a direct pipeline still crawled the failed one 1") {
		t.Errorf("not counted:\n%s", res.Summary())
	}
	// The fail reported only after the second take: two holders.
	if inv := build(42).check(t).Invariant(2); inv.Pass {
		t.Errorf("a take while the direct pipeline's life had not ended passes invariant 2")
	}
}

// Redis keeps an ended job's record, log and history until they expire
// (48 h, 7 days), so its used memory grows with the jobs ended: the
// raw figure is reported, and what is judged is Redis less the keys with
// a TTL. A live part that grows still fails.
func TestRedisRetentionIsNotGrowth(t *testing.T) {
	build := func(liveGrows bool) *run {
		r := clean()
		for s := 0.0; s <= 60; s += 5 {
			kept := s / 60 * 200e6 // 200 MB kept by TTL over the run
			live := 3e6
			if liveGrows {
				live += s / 60 * 200e6
			}
			r.add(s+0.1, history.Event{Kind: history.Sample, Actor: "redis", Num: map[string]float64{
				"redis_used_memory": live + kept, "redis_expiring_memory": kept, "redis_live_memory": live}})
		}
		return r
	}
	res := build(false).check(t)
	if res.Failed() {
		t.Fatalf("memory kept by TTL fails invariant 6:\n%s", res.Summary())
	}
	if !strings.Contains(res.Summary(), "redis/redis_live_memory") {
		t.Errorf("the live memory is not judged:\n%s", res.Summary())
	}
	failsOnly(t, build(true).check(t), 6, "redis/redis_live_memory grows")
}

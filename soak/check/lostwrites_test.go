package check

import (
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// lostTake is the clean run with a take lost by a Redis failover: key1's
// pipeline takes f at 31, the master is killed at 32, and the new master
// never had the take: the job, queued again there, is taken by key2 at
// 34.5 while p1 still holds it.
func lostTake() (*run, string) {
	r := clean()
	const url = "http://f.example/"
	f := r.queue(30, "gina", url)
	r.take(31, "p1", "key1", f)
	r.add(32, history.Event{Kind: history.Fault, Fault: "kill-redis-master", Target: "127.0.0.1:1", Outcome: "start"})
	r.add(34, history.Event{Kind: history.Fault, Fault: "kill-redis-master", Target: "127.0.0.1:1", Outcome: "end"})
	r.take(34.5, "p2", "key2", f)
	r.end(35.2, "p1", f, "abandoned")
	r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650034.5", "pipeline_id", "archivebot:key2"))
	r.set("working", "list", []string{idC, f})
	return r, f
}

func counted(res *Result, n int, name string) string {
	for _, c := range res.Invariant(n).Counts {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// TestLostTakeNoticedPasses: the node said it in the channel, naming the
// job: Sentinel's limit, noticed, counted.
func TestLostTakeNoticedPasses(t *testing.T) {
	r, f := lostTake()
	r.line(35, "Redis failover lost writes: 1 takes lost; their pipelines were told to let go: "+f+".")
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a lost take the node noticed fails:\n%s", res.Summary())
	}
	if got := counted(res, 2, "takes lost by a Redis failover"); got != "1 (1 noticed in the channel, 0 not)" {
		t.Errorf("takes lost = %q, want 1, noticed", got)
	}
}

// TestLostTakeUnnoticedFails: the same loss, and the node never said it
// (its failover check off: soak/plants/failover-check-off.patch).
func TestLostTakeUnnoticedFails(t *testing.T) {
	r, f := lostTake()
	failsOnly(t, r.check(t), 2, f, "a Redis failover lost a take and the node never said so", "held by p1", "taken by p2")
}

// TestLostTakeNoticeNamingAnotherJobFails: a line that names other jobs
// (and not "N more") does not excuse this one; nor does one long after.
func TestLostTakeNoticeNamingAnotherJobFails(t *testing.T) {
	r, f := lostTake()
	r.line(35, "Redis failover lost writes: 1 takes lost; their pipelines were told to let go: "+idC+".")
	r.line(80, "Redis failover lost writes: 1 takes lost; their pipelines were told to let go: "+f+".")
	res := r.check(t)
	failsOnly(t, res, 2, f, "never said so")
	if got := counted(res, 2, "lost-writes lines"); !strings.HasPrefix(got, "2 (2 naming no lost take seen") {
		t.Errorf("lost-writes lines = %q, want 2, neither matched", got)
	}
}

// TestLostTakeNoticeOfManyPasses: "and N more" covers a job not named.
func TestLostTakeNoticeOfManyPasses(t *testing.T) {
	r, _ := lostTake()
	r.line(36, "Redis failover lost writes: the new master is 2258 bytes short of this node's last confirmed write (register job x, 05:00:31 UTC); commands acknowledged just before it may be undone. 7 takes lost; their pipelines were told to let go: a, b, c, d, e and 2 more.")
	if res := r.check(t); res.Failed() {
		t.Fatalf("a notice of 7 lost takes naming 5 fails:\n%s", res.Summary())
	}
}

// TestOverlapAwayFromAMasterKillStillFails: a notice does not excuse two
// holders when no master was killed around them.
func TestOverlapAwayFromAMasterKillStillFails(t *testing.T) {
	r := clean()
	r.take(7, "p9", "key9", idC)
	r.line(7.5, "Redis failover lost writes: 1 takes lost; their pipelines were told to let go: "+idC+".")
	failsOnly(t, r.check(t), 2, idC, "held by p2", "taken by p9")
}

func TestParseLostNotice(t *testing.T) {
	ids, more := parseLostNotice("Redis failover lost writes: 2 takes lost; their pipelines were told to let go: abc, def.")
	if !ids["abc"] || !ids["def"] || len(ids) != 2 || more {
		t.Errorf("got %v %v", ids, more)
	}
	ids, more = parseLostNotice("Redis failover lost writes: the new master lacks this node's last confirmed write (x, 05:00:00 UTC); commands acknowledged just before it may be undone.")
	if len(ids) != 0 || more {
		t.Errorf("a notice of a lost command write names %v %v", ids, more)
	}
}

// TestLostDirectTakeIsCounted: a direct-Redis pipeline's take is its own
// write, which the node never saw: lost with the master, counted.
func TestLostDirectTakeIsCounted(t *testing.T) {
	r, f := lostTake()
	for i := range r.events {
		if e := &r.events[i]; e.Kind == history.Take && e.Actor == "p1" {
			e.Via, e.Target = viaDirect, ""
		}
	}
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a direct pipeline's lost take fails:\n%s", res.Summary())
	}
	if got := counted(res, 2, "direct pipelines' own takes lost by a Redis failover"); got != "1" {
		t.Errorf("direct takes lost = %q, want 1 (%s)", got, f)
	}
}

// loseWindow is the clean run with a lose-redis-write fault at 30–36 in
// which gina's !a was acknowledged and then lost with the master: the
// job is gone from the final dump.
func loseWindow() (*run, string) {
	r := clean()
	r.add(30, history.Event{Kind: history.Fault, Fault: "lose-redis-write", Target: "127.0.0.1:1", Outcome: "start"})
	g := r.queue(31, "gina", "http://g.example/")
	r.add(36, history.Event{Kind: history.Fault, Fault: "lose-redis-write", Target: "127.0.0.1:1", Outcome: "end"})
	return r, g
}

// TestLoseRedisWriteUnnoticedFails: the fault lost writes (on purpose)
// and the node never said so: its failover check off
// (soak/plants/failover-check-off.patch). What the failover undid is not
// excused either.
func TestLoseRedisWriteUnnoticedFails(t *testing.T) {
	r, g := loseWindow()
	res := r.check(t)
	if inv := res.Invariant(2); inv.Pass || !strings.Contains(inv.Violations[0].Detail, "lose-redis-write) and the node never said so") {
		t.Errorf("invariant 2 = %v %v, want a violation for the unnoticed lose-redis-write", inv.Pass, inv.Violations)
	}
	if inv := res.Invariant(1); inv.Pass || !strings.Contains(inv.Violations[0].String(), g) {
		t.Errorf("invariant 1 = %v %v, want %s's loss unexcused", inv.Pass, inv.Violations, g)
	}
}

// TestLoseRedisWriteNoticedPasses: the node said it; the job whose !a the
// failover undid is Redis's doing, noticed, counted.
func TestLoseRedisWriteNoticedPasses(t *testing.T) {
	r, _ := loseWindow()
	r.line(37.5, "Redis failover lost writes: the new master is 3212 bytes short of this node's last confirmed write (register job x, 05:00:31 UTC); commands acknowledged just before it may be undone.")
	res := r.check(t)
	if res.Failed() {
		t.Fatalf("a noticed lose-redis-write fails:\n%s", res.Summary())
	}
	if got := counted(res, 1, "undone by a noticed lose-redis-write failover"); got != "1" {
		t.Errorf("invariant 1 excused %q, want 1", got)
	}
	if got := counted(res, 2, "lose-redis-write faults noticed"); got != "1 of 1" {
		t.Errorf("lose-redis-write faults noticed = %q, want 1 of 1", got)
	}
}

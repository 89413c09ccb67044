package check

import (
	"strings"
	"testing"
)

// TestStatusStateEveryShape reads every answer bot/status.go can give to
// !status IDENT (jobStatus, WaitingLine, failureStatus, the refusals)
// and the error answers of bot/command.go and bot/outcome.go.
func TestStatusStateEveryShape(t *testing.T) {
	const j = "Job abc123 <http://a.example/>. Started by alice."
	for _, c := range []struct{ text, want string }{
		// Queued: upstream's plain line, ours with what holds it.
		{j + " In queue.", "queued"},
		{"prober: " + j + " In queue.", "queued"},
		{j + " In queue. Abort requested.", "queued"},
		{j + " In queue. Note: slow site", "queued"},
		{j + " In queue pending, 4th. Queue pending is paused by gina since 05:00 UTC (soak).", "queued"},
		{j + " In queue pending-ao. Every queue is paused by gina since 2026-12-01 05:00 UTC.", "queued"},
		{j + " In queue pending, 1st. Waiting: erin has 3 jobs running (limit 3).", "queued"},
		{j + " In queue pending. Waiting: every pipeline avoids a.example (p1, p2).", "queued"},
		{j + " In queue pending, 2nd. 1 pipeline takes directly from Redis: limits not enforced for it.", "queued"},
		// Running: the progress line, the responses, an abort.
		{j + " In progress. 12 URLs, 3 queued, 1.2 MiB.", "running"},
		{j + " In progress. 12 URLs. Responses: 10 2xx, 1 3xx, 1 4xx, 0 5xx, 0 other. Abort requested.", "running"},
		// Ended.
		{j + " Completed.", "finished"},
		{j + " Aborted.", "aborted"},
		{j + " Failed.", "failed"},
		{j + " Failed (no heartbeat).", "failed"},
		{"Job abc123 <http://a.example/>. Started by alice. Failed: no heartbeat for 30s (reaped by the death timer with its pipeline \"p1\", api:key1), at 2026-12-02 05:00:00Z, while in pending.", "failed"},
		{"Job abc123 <http://a.example/>. Failed: removed from its queue.", "failed"},
		{j + " Completed. Note: a Failed word in a note", "finished"},
		// No such job.
		{"Sorry, I don't know anything about abc123.", "absent"},
		{"Sorry, that URL has not been archived recently: no job for http://a.example/ in the last 48 hours.", "absent"},
		// No answer from Redis: not judged.
		{"Redis did not answer in time; I don't know yet whether the job's status was read — I'll tell you when I know.", "error"},
		{"Sorry, backend unavailable: Redis cannot be reached right now. Please try again in a minute.", "error"},
		{"Sorry, something went wrong running that command; the operators can find the details in the log.", "error"},
		// Anything else is unread: counted, bounded, named.
		{"In queue.", "other"},
		{j + " Frobnicating.", "other"},
		{"Job status: 1 completed, 0 aborted, 0 failed, 1 in progress, 1 pending, 0 pending-ao, 0 pending in other queues", "other"},
	} {
		if got := StatusState(c.text); got != c.want {
			t.Errorf("StatusState(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestInQueueForATakenJobIsALie: a !status that says "In queue." for a
// job a pipeline took seconds before contradicts the model. The runner
// recorded its Outcome as "other" (its reader knew no "In queue"), and
// the old checker left every "other" unjudged: a node that answered
// "In queue." for running jobs passed.
func TestInQueueForATakenJobIsALie(t *testing.T) {
	r := clean()
	r.probe(46.5, "status", idC, "other", "Job "+idC+" <"+urlC+">. Started by carol. In queue.")
	failsOnly(t, r.check(t), 5, idC, "stale: status says queued, the model says running")
}

// TestUnreadAnswerFails: an answer to a user the checker cannot read
// fails the run, naming it; so does a probe's.
func TestUnreadAnswerFails(t *testing.T) {
	r := clean()
	r.command(30, 0.1, "frank", "!status "+idB, "Your job is fine, probably.")
	res := r.check(t)
	if !res.Failed() || !strings.Contains(res.Summary(), `FAIL skipped "other": 1 of`) || !strings.Contains(res.Summary(), `"Your job is fine, probably."`) {
		t.Fatalf("an unread answer passes, or is not named:\n%s", res.Summary())
	}
	for _, inv := range res.Invariants {
		if !inv.Pass {
			t.Errorf("invariant %d fails too: %v", inv.N, inv.Violations)
		}
	}
	r = clean()
	r.probe(46.5, "jobs_api", idB, "limbo", `{"state":"limbo"}`)
	if res := r.check(t); !res.Failed() || !strings.Contains(res.Summary(), `jobs_api probe of `+idB) {
		t.Fatalf("an unread probe passes, or is not named:\n%s", res.Summary())
	}
}

// TestEveryAnswerOfTheMixIsRead: the answers the soak's users get to each
// command of their mix (doc/soak.md, The load) are all read.
func TestEveryAnswerOfTheMixIsRead(t *testing.T) {
	for _, a := range []string{
		"alice: Queued http://a.example/.",
		"alice: Queued http://a.example/ for archival without recursion.",
		"alice: Use !status abc for updates, !abort abc to abort.",
		"alice: Job for http://a.example/ already exists.",
		"alice: Sorry, I don't understand the URL you provided.",
		"alice: Usage: !archive URL [--ignore-sets=NAME,...]",
		"alice: Initiated abort for http://a.example/.",
		"alice: Job abc for http://a.example/ was aborted before it started.",
		"alice: Job abc has already finished; there is nothing to abort.",
		"alice: Added ignore pattern ^x to job abc.",
		"alice: Removed ignore pattern ^x from job abc.",
		"alice: Warning: ^(a+)+$ repeats a group that itself repeats (nested quantifiers); on some URLs Python's re can backtrack for minutes and stall the pipeline. Consider a simpler pattern.",
		"alice: Inter-request delay for job abc set to [250, 375] ms.",
		"alice: Job abc set to use 1 worker.",
		"alice: Job abc set to use 4 workers.",
		"alice: Job abc <http://a.example/>. Started by alice. In queue.",
		"alice: Job status: 1 completed, 0 aborted, 0 failed, 1 in progress, 1 pending, 0 pending-ao, 0 pending in other queues",
		"alice: Queue pending is paused by gina since 05:00 UTC (soak).",
		"No jobs are pending.",
		"3 pending jobs in 2 queues, next to run first:",
		"1. http://a.example/ (abc)",
		"pending (2, paused):",
		"... and 3 more in pending.",
		"alice: OK, job abc for http://a.example/ is failed; its report goes to #ab.",
		"alice: Job abc is already in pending.",
		"alice: Moved job abc to the front of pending: it runs next.",
		"alice: Moved job abc to the back of pending: it runs last.",
		"alice: Sorry, job abc has already started on a pipeline; only queued jobs can be moved.",
		"alice: Paused queue pending: no pipeline gets a job from it, not even one taking straight from Redis, until !resume pending. New jobs still queue and wait.",
		"alice: Resumed queue pending: its jobs are handed out again, in the order they were queued.",
		"alice: Sorry, queue pending is not paused. Nothing was changed.",
		"alice: Queue pending is paused by gina since 05:00 UTC (soak). Nothing was changed.",
		"alice: Redis did not answer in time; I don't know yet whether the job was queued — I'll tell you when I know.",
		"alice: Redis has answered about \"!a http://a.example/\": Queued http://a.example/.",
		"alice: 2 commands done: Added ignore pattern {^x, ^y} to job abc. | Job abc set to use 2 workers.",
		"alice: Your job for http://a.example/ has finished. (abc)",
	} {
		if u := unreadAnswer(a); u != "" {
			t.Errorf("unread: %q (in %q)", u, a)
		}
	}
}

// TestChangeMissingFromEndedJobFails: an acknowledged change of a job
// that then ended is judged against the job's history, which outlives
// the job. The old checker judged only the jobs live at the end: a
// node that said "Added ignore pattern" and skipped the write for a job
// that finished passed.
func TestChangeMissingFromEndedJobFails(t *testing.T) {
	build := func(written bool) (*run, string) {
		r := clean()
		const url = "http://f.example/"
		f := r.queue(30, "gina", url)
		r.take(31, "p1", "key1", f)
		r.command(32, 0.2, "gina", "!ig "+f+" ^z", "Added ignore pattern ^z to job "+f+".")
		r.end(35, "p1", f, "done")
		r.line(35.2, "gina: Your job for "+url+" has finished. ("+f+")")
		r.set(f, "hash", registeredJob(url, "gina", "started_at", "1764650031.0", "finished_at", "1764650035.0"))
		h := []string{historyEntry(f, "queued", `{}`), historyEntry(f, "started", `{}`)}
		if written {
			h = append(h, historyEntry(f, "ignore_added", `{"patterns":["^z"]}`))
		}
		r.set("archivebot:history:"+f, "list", append(h, historyEntry(f, "finished", `{}`)))
		return r, f
	}
	if r, _ := build(true); r.check(t).Failed() {
		t.Fatalf("an ended job whose change is in its history fails:\n%s", r.check(t).Summary())
	}
	r, f := build(false)
	failsOnly(t, r.check(t), 4, f, "history: ignore change acknowledged (^z) is not in archivebot:history:"+f+" (3 entries)")
	// An aborted queued job's record is gone 5 s later; its history
	// stays, and says the abort.
	r = clean()
	r.set("archivebot:history:"+identOf(urlN), "list", []string{historyEntry(identOf(urlN), "aborted", `{}`)})
	failsOnly(t, r.check(t), 4, identOf(urlN), "history: abort change acknowledged (abort)")
}

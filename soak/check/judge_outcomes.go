package check

// Invariant 1: every acknowledged job reaches one outcome, or is still
// queued or running at the end; and the checks every invariant shares.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
)

// ---- invariant 1

// endState is dump.endState, worked out once per job.
func (c *checker) endState(dump Dump, ident string) string {
	if c.ends == nil {
		c.ends = map[string]string{}
		c.queued, c.working = c.finalSets(dump)
	}
	st, ok := c.ends[ident]
	if !ok {
		st = dump.endState(ident, c.queued, c.working)
		c.ends[ident] = st
	}
	return st
}

func (c *checker) finalSets(dump Dump) (queued, working map[string]bool) {
	queued, working = map[string]bool{}, map[string]bool{}
	for _, q := range dump.queues() {
		for _, id := range dump.Members(q) {
			queued[id] = true
		}
	}
	for _, id := range dump.Members("working") {
		working[id] = true
	}
	return
}

func (c *checker) allLives() []*life {
	var out []*life
	for _, ls := range c.lives {
		out = append(out, ls...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

func (c *checker) judge1(dump Dump) {
	inv := c.inv[1]
	n, byOutcome, live, unacked := 0, map[string]int{}, 0, 0
	recent, queuedReport := 0, 0
	owed := owedReports(dump)
	for _, l := range c.allLives() {
		if !l.acked {
			unacked++
			continue
		}
		n++
		if l.outcome != "" {
			byOutcome[l.outcome]++
			continue
		}
		last := c.cur[l.ident] == l
		st := "superseded"
		if last {
			st = c.endState(dump, l.ident)
		}
		if st == "queued" || st == "running" {
			live++
			continue
		}
		if owed[l.ident] {
			queuedReport++
			continue
		}
		if end := c.endInDump(dump, l); !end.IsZero() && end.After(c.res.End.Add(-c.opts.EndGrace)) {
			recent++
			continue
		}
		d := "no outcome reported in the channel, and not queued or running at the end (final state: " + st + ")"
		lines := []int{l.ackLine}
		t2 := time.Time{}
		if l.pipeEnd != "" {
			d = fmt.Sprintf("the pipeline ended it (%s) but no report reached the channel (final state: %s)", l.pipeEnd, st)
			lines = append(lines, l.pipeEndLine)
			t2 = l.pipeEndT
		}
		inv.violate(Violation{Ident: l.ident, T: l.ackT, T2: t2, Lines: lines, Detail: d})
	}
	inv.count("acknowledged", "%d", n)
	inv.count("finished", "%d", byOutcome["finished"])
	inv.count("aborted", "%d", byOutcome["aborted"])
	inv.count("failed", "%d", byOutcome["failed"])
	inv.count("queued or running at the end", "%d", live)
	inv.count(fmt.Sprintf("ended in the last %s, report not awaited", c.opts.EndGrace), "%d", recent)
	inv.count("report still queued in Redis", "%d", queuedReport)
	inv.count("reports", "%d", c.reportsTotal)
	inv.count("duplicate reports", "%d (%s)", c.dupsTotal, pct(c.dupsTotal, c.reportsTotal))
	inv.count("already exists", "%d", c.exists)
	inv.count("refused", "%d", c.refused)
	if unacked > 0 || c.unknownYet > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d jobs seen (taken or reported) without an acknowledgement the observer saw; %d \"outcome unknown\" answers", unacked, c.unknownYet))
	}
	if c.unackedReports > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d reports of jobs not seen before", c.unackedReports))
	}
	if n == 0 {
		inv.violate(Violation{T: c.res.Start, Detail: "no !a/!ao was acknowledged: the bot's reply texts may have changed (soak/check/parse.go)"})
	}
	inv.Pass = len(inv.Violations) == 0
}

// reNotice matches the notices about a job addressed to the user who
// queued it (finish, start, death), which are not answers to a command.
var reNotice = regexp.MustCompile(`^(?:\[for [^\]]*\] )?(?:\d+ (?:of your )?jobs finished: |Your job for \S+ (?:has|was) |Job [0-9a-z]+ <\S+> has had no heartbeat)`)

// owedReports are the idents whose finish notices are still in Redis at
// the end, waiting to be (or being) delivered: their reports are owed,
// not lost.
func owedReports(dump Dump) map[string]bool {
	out := map[string]bool{}
	for _, k := range []string{"finish_notifications", "archivebot:finish_notifications:processing"} {
		for _, doc := range dump.Members(k) {
			var n struct {
				URL string `json:"url"`
			}
			if json.Unmarshal([]byte(doc), &n) == nil && n.URL != "" {
				out[ident.Of(n.URL)] = true
			}
		}
	}
	// The reaper's death line is an admin notice, queued by the fail
	// itself: a job failed in the last moment (while Redis was read) has
	// its report waiting there.
	for _, k := range []string{"archivebot:admin_notices", "archivebot:admin_notices:processing"} {
		for _, doc := range dump.Members(k) {
			var n struct {
				Text string `json:"text"`
			}
			if json.Unmarshal([]byte(doc), &n) != nil {
				continue
			}
			for _, s := range parseLine(n.Text) {
				if s.kind == sayReport && s.ident != "" {
					out[s.ident] = true
				}
			}
		}
	}
	return out
}

// endInDump is when a life without a report ended, as far as the history
// and Redis tell: its pipeline's end, else the failure's failed_at.
func (c *checker) endInDump(dump Dump, l *life) time.Time {
	if l.pipeEnd != "" {
		return l.pipeEndT
	}
	if f := dump.Hash("archivebot:failed:" + l.ident); f != nil {
		if v, err := strconv.ParseFloat(f["failed_at"], 64); err == nil {
			return time.Unix(0, int64(v*1e9))
		}
	}
	// The job's history (archivebot:history:IDENT): its last ending.
	var end time.Time
	for _, doc := range dump.Members("archivebot:history:" + l.ident) {
		var h struct {
			TS    float64 `json:"ts"`
			Event string  `json:"event"`
		}
		if json.Unmarshal([]byte(doc), &h) == nil && (h.Event == "failed" || h.Event == "finished" || h.Event == "aborted") {
			end = time.Unix(0, int64(h.TS*1e9))
		}
	}
	return end
}

package check

// Invariants 4 and 5: acknowledged changes are in the record, and the
// records agree with the model at quiet points.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ---- invariant 4

func (c *checker) judge4(dump Dump) {
	inv := c.inv[4]
	changes, checked := 0, 0
	judged := c.judgeHistories(dump)
	for _, l := range c.allLives() {
		changes += len(l.changes)
		if c.cur[l.ident] != l || len(l.changes) == 0 {
			continue
		}
		if _, over := l.ended(); over {
			continue
		}
		st := c.endState(dump, l.ident)
		if st != "queued" && st != "running" {
			continue
		}
		checked++
		x := l.expectedAt(c.res.End)
		h := dump.Hash(l.ident)
		var miss []string
		have := map[string]bool{}
		for _, p := range dump.Members(l.ident + "_ignores") {
			have[p] = true
		}
		for p := range x.ignores {
			if !have[p] {
				miss = append(miss, "ignore "+p+" not in "+l.ident+"_ignores")
			}
		}
		if x.delay != nil && (h["delay_min"] != fmt.Sprint(x.delay[0]) || h["delay_max"] != fmt.Sprint(x.delay[1])) {
			miss = append(miss, fmt.Sprintf("delay [%d, %d] acknowledged, record has [%s, %s]", x.delay[0], x.delay[1], h["delay_min"], h["delay_max"]))
		}
		if x.concurrency != 0 && h["concurrency"] != fmt.Sprint(x.concurrency) {
			miss = append(miss, fmt.Sprintf("concurrency %d acknowledged, record has %q", x.concurrency, h["concurrency"]))
		}
		if x.abort && h["abort_requested"] != "true" {
			miss = append(miss, "abort acknowledged, abort_requested not set")
		}
		sort.Strings(miss)
		for _, m := range miss {
			inv.violate(Violation{Ident: l.ident, T: l.changes[len(l.changes)-1].t, T2: c.res.End, Lines: changeLines(l.changes), Detail: "final dump: " + m})
		}
	}
	// Probes that carry the settings.
	probed := 0
	for _, p := range c.probes {
		l := c.lifeAt(p.Ident, p.T)
		if l == nil || len(l.changes) == 0 || (p.state != "queued" && p.state != "running") {
			continue
		}
		x := l.expectedAt(p.T.Add(-c.opts.ProbeSlack))
		var miss []string
		switch p.Via {
		case "status":
			if x.abort && len(p.Text) < 500 && !strings.HasSuffix(p.Text, "…") && !strings.Contains(p.Text, "Abort requested.") {
				miss = append(miss, "abort acknowledged, !status does not say \"Abort requested.\"")
			}
		case "jobs_api":
			var v struct {
				AbortRequested *bool    `json:"abort_requested"`
				IgnorePatterns []string `json:"ignore_patterns"`
				Settings       struct {
					DelayMin, DelayMax, Concurrency *int64
				} `json:"settings"`
			}
			if json.Unmarshal([]byte(p.Text), &v) != nil {
				continue
			}
			if x.abort && v.AbortRequested != nil && !*v.AbortRequested {
				miss = append(miss, "abort acknowledged, /jobs says abort_requested false")
			}
			if v.IgnorePatterns != nil {
				have := map[string]bool{}
				for _, q := range v.IgnorePatterns {
					have[q] = true
				}
				for q := range x.ignores {
					if !have[q] {
						miss = append(miss, "ignore "+q+" missing from /jobs")
					}
				}
			}
			if x.delay != nil && v.Settings.DelayMin != nil && v.Settings.DelayMax != nil &&
				(*v.Settings.DelayMin != x.delay[0] || *v.Settings.DelayMax != x.delay[1]) {
				miss = append(miss, fmt.Sprintf("delay [%d, %d] acknowledged, /jobs says [%d, %d]", x.delay[0], x.delay[1], *v.Settings.DelayMin, *v.Settings.DelayMax))
			}
		default:
			continue
		}
		probed++
		sort.Strings(miss)
		for _, m := range miss {
			inv.violate(Violation{Ident: p.Ident, T: p.T, Lines: append(changeLines(l.changes), p.line), Detail: p.Via + " probe: " + m})
		}
	}
	inv.count("acknowledged changes", "%d", changes)
	c.evidence[4] = checked + probed
	for _, n := range judged {
		c.evidence[4] += n
	}
	c.floor4(judged)
	inv.count("live jobs checked at the end", "%d", checked)
	inv.count("probes checked", "%d", probed)
	inv.Pass = len(inv.Violations) == 0
}

func changeLines(cs []change) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.line)
	}
	if len(out) > 5 {
		out = out[len(out)-5:]
	}
	return out
}

// lifeAt is the life of ident at t: the last one begun by t (with slack).
func (c *checker) lifeAt(ident string, t time.Time) *life {
	var best *life
	for _, l := range c.lives[ident] {
		if !l.start.After(t.Add(c.opts.ProbeSlack)) {
			best = l
		}
	}
	return best
}

// ---- invariant 5

func (c *checker) judge5(dump Dump) {
	inv := c.inv[5]
	byVia := map[string]int{}
	agree := 0
	for _, p := range c.probes {
		byVia[p.Via]++
		ok, model := c.probeAgrees(p)
		if ok {
			agree++
			continue
		}
		what := "stale"
		if model == "absent" {
			what = "ghost"
		}
		inv.violate(Violation{Ident: p.Ident, T: p.T, Lines: []int{p.line},
			Detail: fmt.Sprintf("%s: %s says %s, the model says %s (within %s)", what, p.Via, p.state, model, c.opts.ProbeSlack)})
	}
	// The end: the model against Redis, as it was while Redis was read.
	from, to := c.res.End, c.res.End
	if !c.dumpTo.IsZero() {
		to = c.dumpTo
		from = to
		if !c.dumpFrom.IsZero() && c.dumpFrom.Before(to) {
			from = c.dumpFrom
		}
	}
	if from.Equal(to) {
		inv.Notes = append(inv.Notes, "the Final event does not say when the dump began (Num dump_started): the dump is taken as read at one instant")
	} else {
		inv.Notes = append(inv.Notes, fmt.Sprintf("Redis was read over %s at the end: compared with the model over that time", to.Sub(from).Round(time.Millisecond)))
	}
	ends, ghosts := 0, 0
	owed := owedReports(dump)
	for ident, ls := range c.lives {
		l := ls[len(ls)-1]
		model := l.stateAt(c.res.End)
		st := c.endState(dump, ident)
		ends++
		ok := l.statesIn(from, to)[st] || (model == "aborted" && st == "absent") ||
			(model == "finished" && st == "absent" && l.outcomeT.Before(c.res.End.Add(-48*time.Hour)))
		if st == "vanished" && (l.statesIn(from, to)["aborted"] || l.statesIn(from, to)["failed"]) {
			ok = true // its record expired (5 s after the end) while Redis was read
		}
		if st == "running" && l.statesIn(from, to)["queued"] {
			// Taken while Redis was read, its Take not yet written, or
			// taken by a key whose pipeline never got the answer and
			// then failed by the reaper while Redis was read: Redis
			// read it running, the model has it queued then failed.
			ok = true
		}
		if !ok && (model == "queued" || model == "running") && (st == "failed" || st == "finished" || st == "aborted") {
			if end := c.endInDump(dump, l); !end.IsZero() && end.After(c.res.End.Add(-c.opts.EndGrace)) {
				ok = true // it ended in the last seconds, unseen yet
			}
			if owed[ident] {
				ok = true // it ended, its report waits in Redis, unseen yet
			}
		}
		if !ok && (model == "queued" || model == "running") && l.acked && (st == "absent" || st == "stranded") {
			ok = true // a lost job: invariant 1 judges it
		}
		if !ok && (model == "queued" || model == "running") && !l.acked {
			// Jobs no one was seen to queue: a pipeline's record only.
			ok = st != "ghost"
		}
		if !ok {
			inv.violate(Violation{Ident: ident, T: c.res.End, Lines: []int{l.ackLine},
				Detail: fmt.Sprintf("at the end the model says %s, Redis says %s", model, st)})
		}
	}
	for ident := range c.lives {
		if c.endState(dump, ident) == "ghost" {
			ghosts++
		}
	}
	inv.count("probes", "%d (%s)", len(c.probes), viaCounts(byVia))
	c.evidence[5] = len(c.probes)
	inv.count("agree", "%d", agree)
	if c.unanswered > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d probes got no state (a timeout, or Redis not answering): not judged (counted against its bound: skipped \"not judged\")", c.unanswered))
	}
	inv.count("quiet points", "%d", len(c.quiet))
	inv.count("jobs compared at the end", "%d", ends)
	inv.count("ghost hashes left in Redis", "%d", ghosts)
	c.judgeFence(dump)
	inv.Pass = len(inv.Violations) == 0
}

func viaCounts(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// probeAgrees reports whether a probe matches the model's state of its
// job at some moment within the slack, and the model's state at the
// probe.
func (c *checker) probeAgrees(p probe) (bool, string) {
	states := map[string]bool{}
	at := func(t time.Time) string {
		var s string
		for _, l := range c.lives[p.Ident] {
			if x := l.stateAt(t); x != "" {
				s = x
			}
		}
		if s == "" {
			s = "absent"
		}
		return s
	}
	model := at(p.T)
	from, to := p.T.Add(-c.opts.ProbeSlack), p.T.Add(c.opts.ProbeSlack)
	states[at(from)] = true
	for _, l := range c.lives[p.Ident] {
		for _, x := range l.trans {
			if !x.t.Before(from) && !x.t.After(to) {
				states[x.state] = true
			}
		}
	}
	if states[p.state] {
		return true, model
	}
	// An aborted job's record expires 5 s after the end; the dashboard's
	// list (/jobs) holds only queued and running jobs.
	if p.state == "absent" && (states["aborted"] || p.Via == "dashboard" && (states["finished"] || states["failed"])) {
		return true, model
	}
	return false, model
}

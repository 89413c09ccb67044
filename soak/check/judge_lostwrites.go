package check

// A lost Redis write is noticed (part of invariant 2). Redis replicates
// asynchronously: a failover can promote a replica that lacks a take the
// node answered (doc/reliability.md, A failover that loses writes). The
// job is then queued again on the new master and taken by another
// pipeline while the first still holds it: two holders. That is Redis
// Sentinel's limit, not the node's; what the node promises is to notice
// it: its failover check says "Redis failover lost writes: …" in the
// channel, naming the jobs whose takes were lost, and tells their first
// holders to let go. So an overlap of two holds around a Redis master
// kill is excused when the node said so in time, counted; unsaid, it is
// a violation of its own kind.

import (
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

const (
	// lostNoticePrefix starts the node's line (coordinator.LostNoticePrefix).
	lostNoticePrefix = "Redis failover lost writes:"
	// lostBefore: a take lost by a failover was made at most this long
	// before the master kill's window (Redis replicates in milliseconds;
	// a second failover before the replicas caught up loses a few
	// seconds).
	lostBefore = 10 * time.Second
	// lostAfter: a failover (a second one included) happens within this
	// after a master kill's window ends, and a lost take's job is taken
	// again within it.
	lostAfter = 30 * time.Second
	// noticeGrace: the node's line comes at most this long after the
	// second take (the check runs every second; the admin notices are
	// delivered every 2 s, later while the leader changes).
	noticeGrace = 30 * time.Second
)

// lostNotice is one "Redis failover lost writes" line the channel saw.
type lostNotice struct {
	t      time.Time
	line   int
	idents map[string]bool
	more   bool // "and N more": not every ident is named
	used   bool
}

// parseLostNotice reads the idents a lost-writes line names.
func parseLostNotice(text string) (idents map[string]bool, more bool) {
	idents = map[string]bool{}
	_, list, ok := strings.Cut(text, "let go: ")
	if !ok {
		return idents, false
	}
	list = strings.TrimSuffix(strings.TrimSpace(list), ".")
	if i := strings.Index(list, " and "); i >= 0 && strings.HasSuffix(list, " more") {
		list, more = list[:i], true
	}
	for _, id := range strings.Split(list, ", ") {
		if id = strings.TrimSpace(id); id != "" {
			idents[id] = true
		}
	}
	return idents, more
}

// judgeLostWrites sorts invariant 2's overlaps around Redis master kills
// into lost takes the node noticed (excused, counted) and lost takes it
// never said (violations), and counts its lost-writes lines.
func (c *checker) judgeLostWrites(evs []ev) {
	inv := c.inv[2]
	var notices []*lostNotice
	for _, e := range evs {
		if e.Kind != history.Line || c.users[strings.ToLower(e.Actor)] {
			continue
		}
		if i := strings.Index(e.Text, lostNoticePrefix); i >= 0 {
			ids, more := parseLostNotice(e.Text[i:])
			notices = append(notices, &lostNotice{t: e.T, line: e.line, idents: ids, more: more})
		}
	}
	var kills []Window
	for _, w := range c.res.Faults {
		if w.Fault == "kill-redis-master" || w.Fault == "lose-redis-write" {
			kills = append(kills, w)
		}
	}
	inKill := func(first, second time.Time) bool {
		for _, w := range kills {
			if !first.Before(w.Start.Add(-lostBefore)) && !first.After(w.End.Add(lostAfter)) &&
				!second.Before(w.Start) && !second.After(w.End.Add(lostAfter)) {
				return true
			}
		}
		return false
	}
	noticed, unnoticed, direct := 0, 0, 0
	var kept []Violation
	for _, v := range inv.Violations {
		overlap := strings.HasPrefix(v.Detail, "held by ") && strings.Contains(v.Detail, " since the first time, taken by ")
		if !overlap || !inKill(v.T, v.T2) {
			kept = append(kept, v)
			continue
		}
		if strings.HasPrefix(v.Detail, "held by ") && strings.Contains(v.Detail, " ("+viaDirect+") since the first time") {
			// A direct-Redis pipeline's take is its own write to Redis,
			// not the node's: lost with the master, nothing the node can
			// see (doc/reliability.md, direct pipelines).
			direct++
			continue
		}
		var said *lostNotice
		for _, n := range notices {
			if !n.t.Before(v.T) && !n.t.After(v.T2.Add(noticeGrace)) && (n.idents[v.Ident] || n.more) {
				said = n
				break
			}
		}
		if said != nil {
			said.used = true
			noticed++
			continue
		}
		unnoticed++
		v.Detail = "a Redis failover lost a take and the node never said so (no \"" + lostNoticePrefix + "\" line naming the job within " +
			noticeGrace.String() + " of the second take): " + v.Detail
		kept = append(kept, v)
	}
	inv.Violations = kept
	unmatched := 0
	for _, n := range notices {
		if !n.used {
			unmatched++
		}
	}
	inv.count("takes lost by a Redis failover", "%d (%d noticed in the channel, %d not)", noticed+unnoticed, noticed, unnoticed)
	inv.count("direct pipelines' own takes lost by a Redis failover", "%d", direct)
	inv.count("lost-writes lines", "%d (%d naming no lost take seen: a lost command write, or a failover the run did not cause)", len(notices), unmatched)
	if unmatched > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d lost-writes lines named no take the run saw lost (first at history line %d)", unmatched, firstUnused(notices)))
	}
	inv.Pass = len(inv.Violations) == 0
}

func firstUnused(ns []*lostNotice) int {
	for _, n := range ns {
		if !n.used {
			return n.line
		}
	}
	return 0
}

// judgeLoseWindows holds each lose-redis-write fault (a failover that
// loses writes on purpose) to the promise: the node said "Redis failover
// lost writes" within noticeGrace of its end, or invariant 2 fails. What
// such a failover undid (a registration, a change, a pipeline's end, all
// written in its window) is Redis's doing, noticed: violations of
// invariants 1, 4 and 5 about a job that changed in a noticed window are
// excused and counted. Run after judges 1 to 5.
func (c *checker) judgeLoseWindows(evs []ev) {
	var notices []time.Time
	for _, e := range evs {
		if e.Kind == history.Line && !c.users[strings.ToLower(e.Actor)] && strings.Contains(e.Text, lostNoticePrefix) {
			notices = append(notices, e.T)
		}
	}
	var noticed []Window
	faults, missed := 0, 0
	for _, w := range c.res.Faults {
		if w.Fault != "lose-redis-write" {
			continue
		}
		faults++
		said := false
		for _, t := range notices {
			said = said || !t.Before(w.Start) && !t.After(w.End.Add(noticeGrace))
		}
		if said {
			noticed = append(noticed, w)
			continue
		}
		missed++
		c.inv[2].violate(Violation{T: w.Start, T2: w.End, Lines: w.Lines[:],
			Detail: "a failover lost writes on purpose (lose-redis-write) and the node never said so (no \"" + lostNoticePrefix + "\" line within " + noticeGrace.String() + " of its end)"})
	}
	if faults == 0 {
		return
	}
	c.inv[2].count("lose-redis-write faults noticed", "%d of %d", faults-missed, faults)
	c.inv[2].Pass = len(c.inv[2].Violations) == 0
	in := func(t time.Time) bool {
		for _, w := range noticed {
			if !t.Before(w.Start.Add(-time.Second)) && !t.After(w.End) {
				return true
			}
		}
		return false
	}
	touched := map[string]bool{}
	for ident, ls := range c.lives {
		for _, l := range ls {
			hit := in(l.ackT) || in(l.outcomeT) || in(l.pipeEndT)
			for _, s := range l.trans {
				hit = hit || in(s.t)
			}
			for _, ch := range l.changes {
				hit = hit || in(ch.t)
			}
			if hit {
				touched[ident] = true
			}
		}
	}
	for _, n := range []int{1, 4, 5} {
		inv := c.inv[n]
		var kept []Violation
		excused := 0
		for _, v := range inv.Violations {
			if v.Ident != "" && touched[v.Ident] {
				excused++
				continue
			}
			kept = append(kept, v)
		}
		if excused == 0 {
			continue
		}
		inv.Violations = kept
		inv.count("undone by a noticed lose-redis-write failover", "%d", excused)
		inv.Pass = len(kept) == 0
	}
}

package check

// Invariants 6, 7 and 8: flat resources, latencies outside faults, and
// no silent loss on the stream.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// ---- invariant 6

func (c *checker) judge6() {
	inv := c.inv[6]
	dur := c.res.End.Sub(c.res.Start)
	cut := c.res.Start.Add(time.Duration(float64(dur) * c.opts.WarmUp))
	// Each process's series is cut into segments (its lives, and for
	// the nodes its terms as leader or standby): a break at each
	// restart (a kill or restart fault on it: the process is up again
	// at the fault's end; for redis, each kill-redis-master or
	// lose-redis-write: the samples follow the master, a new process
	// after it) and, for the nodes, at each change of leader (a node
	// that becomes leader, or stops being it, takes on or drops the
	// whole load: its level changes, which is not growth).
	breaks := map[string][]segBreak{}
	for _, f := range c.res.Faults {
		if strings.HasPrefix(f.Fault, "kill") || strings.HasPrefix(f.Fault, "restart") {
			breaks[f.Target] = append(breaks[f.Target], segBreak{at: f.Start, live: f.End})
		}
		if f.Fault == "kill-redis-master" || f.Fault == "lose-redis-write" {
			breaks["redis"] = append(breaks["redis"], segBreak{at: f.Start, live: f.End})
		}
	}
	nodes := map[string]bool{}
	for _, l := range c.leaders {
		if l.Actor != "" {
			nodes[l.Actor] = true
		}
	}
	prev := "?"
	for _, l := range c.leaders {
		if l.Actor == prev {
			continue
		}
		prev = l.Actor
		for n := range nodes {
			breaks[n] = append(breaks[n], segBreak{at: l.T, live: l.T})
		}
	}
	// A segment's warm-up: SegmentWarmUp, never more than the run's own.
	warm := min(c.opts.SegmentWarmUp, cut.Sub(c.res.Start))
	judgedMetric := map[string]bool{}
	short := Skip{Name: "segment too short", Bound: "one segment judged per metric with a limit"}
	for _, s := range c.res.series.samples() {
		if s.actor == "machine" {
			continue // where the CPU goes (load.go), not a process
		}
		limit := c.opts.SlopeLimits[s.metric]
		segs := s.segments(cut, warm, breaks[s.actor])
		// The series' slope over every segment's judged part (one
		// common slope, an intercept per segment), reported; judged
		// below only when those parts add up to MinSlopeWindow.
		var kept []segment
		for _, g := range segs {
			if len(g.pts) >= c.opts.MinSamples && len(g.pts) >= 3 {
				kept = append(kept, g)
			} else if limit > 0 && len(g.pts) > 0 {
				short.N++
				short.Of++
				if len(short.Examples) < 10 {
					short.Examples = append(short.Examples, fmt.Sprintf("%s/%s from %s: %d samples after its warm-up, fewer than %d", s.actor, s.metric, g.from.UTC().Format("15:04:05"), len(g.pts), c.opts.MinSamples))
				}
			}
		}
		all := fitSegments(s, kept)
		all.Limit = limit
		nSlopes := len(c.res.Slopes)
		if limit <= 0 {
			c.res.Slopes = append(c.res.Slopes, all)
			continue
		}
		short.Of += len(kept)
		// Each segment is judged on its own: growth within one life of
		// the process, after its warm-up. The allowance is the limit;
		// over a window shorter than MinSlopeWindow, a fixed rise: what
		// the limit adds in MinSlopeWindow (8.3 MB of RSS in 10
		// minutes), however short the window. It used to be what the
		// limit adds in an hour (limit × 1h / window), which let a
		// 2-minute run add +50 MB of RSS.
		var judged time.Duration
		for _, g := range kept {
			judged += g.pts[len(g.pts)-1].t.Sub(g.pts[0].t)
		}
		// Over many short lives a slow leak is in no one life: their
		// common slope is judged too, when their judged parts add up
		// to MinSlopeWindow (against the limit itself). It is one more
		// slope of the series judged.
		pooled := len(kept) > 1 && judged >= c.opts.MinSlopeWindow
		tries := len(kept)
		if pooled {
			tries++
		}
		for i, g := range kept {
			if pooled && g.pts[len(g.pts)-1].t.Sub(g.pts[0].t) < c.opts.MinAloneWindow {
				// In a long run a short segment is judged in the
				// common slope only: over a minute or two a node's
				// level steps as viewers and pipelines move between
				// the nodes (a step is not noise, and not growth).
				continue
			}
			sl := fitSegments(s, kept[i:i+1])
			sl.Limit = limit
			sl.From = g.from // zero for the run's first segment
			c.judgeSlope(&sl, g.pts, tries)
			c.res.Slopes = append(c.res.Slopes, sl)
		}
		if pooled {
			all.Window = judged
			var pts []point
			for _, g := range kept {
				pts = append(pts, g.pts...)
			}
			c.judgeSlope(&all, pts, tries)
			c.res.Slopes = append(c.res.Slopes, all)
		}
		if len(kept) > 0 {
			judgedMetric[s.metric] = true
		}
		// The slope shown is the series' over every judged part; the
		// judgement is each slope's own, against its allowance (the
		// limit, or over a window shorter than MinSlopeWindow the
		// limit's rise in MinSlopeWindow, so a short window's per-hour
		// figure may exceed the limit and pass). Name the judged slope
		// nearest its allowance, so the line says what passed.
		near := ""
		var worst *Slope
		for i := range c.res.Slopes[nSlopes:] {
			sl := &c.res.Slopes[nSlopes+i]
			if sl.Judged && (worst == nil || sl.PerHour-sl.Sigmas*sl.StdErr-sl.Allowed > worst.PerHour-worst.Sigmas*worst.StdErr-worst.Allowed) {
				worst = sl
			}
		}
		if worst != nil {
			near = fmt.Sprintf("; nearest its allowance: %s/h less %.1f standard errors against %s/h allowed over %s", human(worst.Metric, worst.PerHour), worst.Sigmas, human(worst.Metric, worst.Allowed), worst.Window.Round(time.Second))
		}
		inv.count(all.Series, "%s/h ±%s (limit %s/h; %d of %d segments judged%s)", human(all.Metric, all.PerHour), strings.TrimPrefix(human(all.Metric, all.StdErr), "+"), human(all.Metric, all.Limit), len(kept), len(kept)+countShort(segs, c.opts.MinSamples), near)
	}
	var metrics []string
	for m, v := range c.opts.SlopeLimits {
		if v > 0 {
			metrics = append(metrics, m)
		}
	}
	sort.Strings(metrics)
	short.Pass = true
	for _, m := range metrics {
		if !judgedMetric[m] {
			short.Pass = false
			c.below(6, "no segment of a %s series had %d samples after its warm-up: it was never judged", m, c.opts.MinSamples)
		}
	}
	c.shortSegments = short
	inv.Pass = len(inv.Violations) == 0
}

func countShort(segs []segment, min int) int {
	n := 0
	for _, g := range segs {
		if len(g.pts) > 0 && (len(g.pts) < min || len(g.pts) < 3) {
			n++
		}
	}
	return n
}

// judgeSlope judges one fitted slope against its limit: the limit, or
// over a window shorter than MinSlopeWindow the slope of a fixed rise.
// A slope fails only when it less Sigmas standard errors is above that:
// growth the samples show, not a slope their noise could give. Of
// tries slopes of the series judged, noise alone would push one past
// two standard errors tries times as often: the level is divided
// among them (fifteen noisy 1-minute lives judged at 2 standard errors
// each failed 3 runs in 12 on noise alone).
func (c *checker) judgeSlope(sl *Slope, pts []point, tries int) {
	if sl.Window <= 0 {
		return
	}
	sl.Judged = true
	sl.Sigmas = tCritical(twoSigma/float64(max(tries, 1)), sl.dof)
	sl.Allowed = sl.Limit
	if sl.Window < c.opts.MinSlopeWindow {
		sl.Allowed = sl.Limit * float64(c.opts.MinSlopeWindow) / float64(sl.Window)
	}
	sl.Pass = sl.PerHour-sl.Sigmas*sl.StdErr <= sl.Allowed
	c.evidence[6]++
	if sl.Pass {
		return
	}
	first, last := pts[0], pts[len(pts)-1]
	what := "after warm-up"
	switch {
	case sl.Segments > 1:
		what = fmt.Sprintf("after warm-up, over %d segments (common slope)", sl.Segments)
	case !sl.From.IsZero():
		what = fmt.Sprintf("after warm-up in its segment from %s", sl.From.UTC().Format("15:04:05"))
	}
	c.inv[6].violate(Violation{T: first.t, T2: last.t, Lines: []int{first.line, last.line},
		Detail: fmt.Sprintf("%s grows %s per hour %s (limit %s, judged against %s over %s, %d samples; ±%s standard error (residuals' autocorrelation %.2f), %.1f of them allowed)",
			sl.Series, human(sl.Metric, sl.PerHour), what, human(sl.Metric, sl.Limit), human(sl.Metric, sl.Allowed), sl.Window.Round(time.Second), sl.Samples, strings.TrimPrefix(human(sl.Metric, sl.StdErr), "+"), sl.Rho, sl.Sigmas)})
}

func human(metric string, v float64) string {
	if strings.HasSuffix(metric, "bytes") || strings.HasSuffix(metric, "memory") {
		return fmt.Sprintf("%+.1f MB", v/1e6)
	}
	return fmt.Sprintf("%+.1f", v)
}

// ---- invariant 7

func (c *checker) inFault(a, b time.Time) bool {
	for _, f := range c.res.Faults {
		if !b.Before(f.Start) && !a.After(f.End.Add(c.opts.FaultGrace)) {
			return true
		}
	}
	return false
}

func (c *checker) judge7() {
	inv := c.inv[7]
	judge := func(name string, ls []latency, limit time.Duration) {
		var out []float64
		var slow []latency
		timeouts := 0
		for _, l := range ls {
			end := l.end
			if c.inFault(l.start, end) {
				continue
			}
			out = append(out, l.ms)
			if math.IsInf(l.ms, 1) {
				timeouts++
			}
			if l.ms > float64(limit)/1e6 {
				slow = append(slow, l)
			}
		}
		c.evidence[7] += len(out)
		p50, p99 := percentile(out, 50), percentile(out, 99)
		inv.count(name+" outside faults", "%d, p50 %s, p99 %s (limit %s)", len(out), ms(p50), ms(p99), limit)
		if timeouts > 0 {
			inv.count(name+" unanswered outside faults", "%d", timeouts)
		}
		if len(out) > 0 && p99 >= float64(limit)/1e6 {
			sort.Slice(slow, func(i, j int) bool { return slow[i].ms > slow[j].ms })
			inv.violate(Violation{T: c.res.Start, T2: c.res.End, Detail: fmt.Sprintf("%s p99 %s ≥ %s outside faults (%d of %d over)", name, ms(p99), limit, len(slow), len(out))})
			for i, l := range slow {
				if i == 20 {
					break
				}
				d := fmt.Sprintf("%s took %s", name, ms(l.ms))
				if l.text != "" {
					d += ": " + l.text
				}
				inv.violate(Violation{Ident: l.ident, T: l.start, T2: l.end, Lines: l.lines, Detail: d})
			}
		}
	}
	judge("replies", c.replies, c.opts.ReplyP99)
	judge("finish reports", c.finishes, c.opts.FinishP99)
	if c.noticeReplies > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d replies were finish reports or other job notices addressed to the user, not the command's answer: left out of the reply latencies", c.noticeReplies))
	}
	if n := len(c.pendingFinish); n > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d pipeline ends never reported (invariant 1 judges them)", n))
	}
	c.recoveries()
	inv.Pass = len(inv.Violations) == 0
}

func (c *checker) recoveries() {
	for _, f := range c.res.Faults {
		r := Recovery{Fault: f.Fault, Target: f.Target, Start: f.Start, End: f.End, Commands: -1, Stream: 0}
		for _, l := range c.replies {
			// Not the command a frozen leader held: its answer, if any,
			// is the woken node's refusal, not service again.
			if !l.start.Before(f.Start) && !math.IsInf(l.ms, 1) && c.sendBy[l.id].Fault == "" {
				r.Commands = l.end.Sub(f.Start)
				break
			}
		}
		r.Stream, r.StreamStopped, r.StreamViewers = c.res.series.streamRecovery(f.Start, f.End)
		c.res.Recoveries = append(c.res.Recoveries, r)
	}
	byKind := map[string]int{}
	for _, f := range c.res.Faults {
		byKind[f.Fault]++
	}
	c.inv[7].count("faults", "%d (%s)", len(c.res.Faults), viaCounts(byKind))
}

// ---- invariant 8 (beyond issue 28's seven: its planted bug "drop 1 %
// of log frames without counting them" has no other witness)

// judge8 compares, per v2 viewer and outside fault windows, the entries
// missing from their jobs' score sequences (gaps) with the losses the
// node reported (dropped frames): a gap not reported is a silent loss.
func (c *checker) judge8() {
	inv := c.inv[8]
	type tally struct {
		gaps, dropped, entries float64
		intervals              int
		bad                    []history.Event
	}
	per := map[string]*tally{}
	var order []string
	prev := map[string]time.Time{}
	excused, empty := 0, 0
	viewers := map[string]bool{}
	for _, e := range c.res.series.streams {
		start, seen := prev[e.Actor]
		prev[e.Actor] = e.T
		g, ok := e.Num["gaps"]
		if e.Via != "v2" || !ok {
			continue
		}
		if !viewers[e.Actor] {
			viewers[e.Actor] = true
		}
		if !seen {
			start = e.T.Add(-10 * time.Second)
		}
		if c.inFault(start, e.T) {
			excused++
			continue
		}
		t := per[e.Actor]
		if t == nil {
			t = &tally{}
			per[e.Actor] = t
			order = append(order, e.Actor)
		}
		if e.Num["entries"] == 0 && g == 0 {
			// An interval that carried nothing proves nothing about
			// losses: not counted as evidence.
			empty++
			continue
		}
		t.intervals++
		t.gaps += g
		t.dropped += e.Num["dropped_reported"]
		t.entries += e.Num["entries"]
		if g > e.Num["dropped_reported"] {
			t.bad = append(t.bad, e)
		}
	}
	var gaps, dropped, entries float64
	intervals := 0
	for _, v := range order {
		t := per[v]
		gaps, dropped, entries, intervals = gaps+t.gaps, dropped+t.dropped, entries+t.entries, intervals+t.intervals
		if t.gaps <= t.dropped {
			continue
		}
		var at []string
		for i, e := range t.bad {
			if i == 3 {
				at = append(at, "…")
				break
			}
			at = append(at, fmt.Sprintf("%s: %.0f missing, %.0f reported", e.T.UTC().Format("15:04:05"), e.Num["gaps"], e.Num["dropped_reported"]))
		}
		inv.violate(Violation{T: t.bad[0].T, T2: t.bad[len(t.bad)-1].T,
			Detail: fmt.Sprintf("viewer %s lost %.0f of %.0f entries without saying so (%.0f missing from their jobs' sequences, %.0f reported dropped) outside faults; %s",
				v, t.gaps-t.dropped, t.entries+t.gaps, t.gaps, t.dropped, strings.Join(at, "; "))})
	}
	c.evidence[8] = intervals
	var names []string
	for v := range viewers {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		got := 0.0
		if t := per[v]; t != nil {
			got = t.entries + t.gaps
		}
		if got < c.opts.MinViewerEntries {
			c.below(8, "viewer %s carried %.0f entries in the intervals judged (outside faults), fewer than the %.0f needed", v, got, c.opts.MinViewerEntries)
		}
	}
	if empty > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d intervals outside faults carried no entry: not counted", empty))
	}
	inv.count("v2 viewer intervals outside faults", "%d", intervals)
	inv.count("entries", "%.0f", entries)
	inv.count("missing", "%.0f", gaps)
	inv.count("reported dropped", "%.0f", dropped)
	inv.count("silent", "%.0f", math.Max(0, gaps-dropped))
	if excused > 0 {
		inv.Notes = append(inv.Notes, fmt.Sprintf("%d intervals touching a fault window left out", excused))
	}
	inv.Pass = len(inv.Violations) == 0
}

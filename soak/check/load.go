package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Load is what the run carried and what it cost the leader, after
// warm-up (the first Options.WarmUp of the run): the figures of the
// issue's "highest sustained load" and "CPU per 1,000 log entries/s".
type Load struct {
	// EntriesPerSec: log entries per second as the dashboard's v2
	// viewers received them (each sees every job's entries): the best
	// viewer's mean, and the 5-s interval median and peak of the best
	// viewer per interval.
	EntriesPerSec, EntriesMedian, EntriesPeak float64
	// TakesPerSec, EndsPerSec: pipelines' takes and job ends per second.
	TakesPerSec, EndsPerSec float64
	// LeaderCPU is the leading node's CPU time per second of wall time
	// (1 = one core), from its /proc/PID/stat samples while it led.
	LeaderCPU float64
	// CPUPer1000 is LeaderCPU per 1,000 log entries/s (EntriesPerSec).
	CPUPer1000 float64
	// LeaderRSS is the leader's largest resident memory, bytes.
	LeaderRSS float64
	// MachineBusy is the machine's mean busy cores (of Cores), and CPU
	// the mean cores each class of process used (nodes, redis,
	// pipelines, bridges, ngircd, harness, other): what a run that
	// did not reach its load was short of. Empty without "machine"
	// samples.
	MachineBusy, Cores float64
	CPU                map[string]float64
	Window             time.Duration
}

// cpuOrder is the order CPU classes are printed in.
var cpuOrder = []string{"nodes", "redis", "pipelines", "bridges", "ngircd", "harness", "other"}

func (l Load) String() string {
	if l.Window == 0 {
		return "load: not measured (no samples after warm-up)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "load over %s after warm-up: log entries/s mean %.0f, 5-s median %.0f, peak %.0f; takes/s %.2f, job ends/s %.2f",
		l.Window.Round(time.Second), l.EntriesPerSec, l.EntriesMedian, l.EntriesPeak, l.TakesPerSec, l.EndsPerSec)
	fmt.Fprintf(&b, "; leader CPU %.2f cores", l.LeaderCPU)
	if l.EntriesPerSec > 0 {
		fmt.Fprintf(&b, " = %.2f cores per 1,000 log entries/s", l.CPUPer1000)
	}
	fmt.Fprintf(&b, "; leader RSS peak %.0f MB", l.LeaderRSS/1e6)
	if l.Cores > 0 {
		fmt.Fprintf(&b, "; machine busy %.2f of %.0f cores (", l.MachineBusy, l.Cores)
		for i, g := range cpuOrder {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %.2f", g, l.CPU[g])
		}
		b.WriteString(")")
	}
	return b.String()
}

// load works out Load from the samples, the stream figures and the
// leader changes.
func (c *checker) load() Load {
	dur := c.res.End.Sub(c.res.Start)
	cut := c.res.Start.Add(time.Duration(float64(dur) * c.opts.WarmUp))
	var l Load
	l.Window = c.res.End.Sub(cut)
	if l.Window <= 0 {
		return Load{}
	}
	secs := l.Window.Seconds()
	// Stream: per v2 viewer, entries over the time its intervals cover.
	type iv struct {
		t    time.Time
		rate float64
	}
	last := map[string]time.Time{}
	total := map[string]float64{}
	span := map[string]float64{}
	var ivs []iv
	for _, e := range c.res.series.streams {
		prev, ok := last[e.Actor]
		last[e.Actor] = e.T
		if e.Via != "v2" || !ok || e.T.Before(cut) {
			continue
		}
		d := e.T.Sub(prev).Seconds()
		if d <= 0 {
			continue
		}
		total[e.Actor] += e.Num["entries"]
		span[e.Actor] += d
		ivs = append(ivs, iv{e.T, e.Num["entries"] / d})
	}
	for v, n := range total {
		if span[v] > 0 && n/span[v] > l.EntriesPerSec {
			l.EntriesPerSec = n / span[v]
		}
	}
	// The best viewer in each 5-s bucket.
	best := map[int64]float64{}
	for _, x := range ivs {
		k := x.t.Unix() / 5
		if x.rate > best[k] {
			best[k] = x.rate
		}
	}
	var rates []float64
	for _, r := range best {
		rates = append(rates, r)
		l.EntriesPeak = max(l.EntriesPeak, r)
	}
	sort.Float64s(rates)
	if len(rates) > 0 {
		l.EntriesMedian = rates[len(rates)/2]
	}
	for _, t := range c.res.series.counts["takes"] {
		if !t.Before(cut) {
			l.TakesPerSec++
		}
	}
	for _, t := range c.res.series.counts["job ends"] {
		if !t.Before(cut) {
			l.EndsPerSec++
		}
	}
	l.TakesPerSec /= secs
	l.EndsPerSec /= secs
	// The leader's CPU: each pair of consecutive samples of a node while
	// it led (a fall of cpu_seconds is a new process: skipped).
	leaderAt := func(t time.Time) string {
		cur := ""
		for _, e := range c.leaders {
			if e.T.After(t) {
				break
			}
			cur = e.Actor
		}
		return cur
	}
	var cpu, wall float64
	mach := map[string][]float64{}
	for _, s := range c.res.series.samples() {
		if s.actor == "machine" {
			for _, p := range s.pts {
				if !p.t.Before(cut) {
					mach[s.metric] = append(mach[s.metric], p.v)
				}
			}
			continue
		}
		switch s.metric {
		case "cpu_seconds":
			for i := 1; i < len(s.pts); i++ {
				a, b := s.pts[i-1], s.pts[i]
				if a.t.Before(cut) || b.v < a.v || leaderAt(a.t) != s.actor || leaderAt(b.t) != s.actor {
					continue
				}
				cpu += b.v - a.v
				wall += b.t.Sub(a.t).Seconds()
			}
		case "rss_bytes":
			for _, p := range s.pts {
				if !p.t.Before(cut) && leaderAt(p.t) == s.actor {
					l.LeaderRSS = max(l.LeaderRSS, p.v)
				}
			}
		}
	}
	if wall > 0 {
		l.LeaderCPU = cpu / wall
	}
	mean := func(v []float64) float64 {
		t := 0.0
		for _, x := range v {
			t += x
		}
		return t / float64(len(v))
	}
	if len(mach["cores"]) > 0 {
		l.Cores = mean(mach["cores"])
		l.MachineBusy = mean(mach["cpu_busy"])
		l.CPU = map[string]float64{}
		for _, g := range cpuOrder {
			if v := mach["cpu_"+g]; len(v) > 0 {
				l.CPU[g] = mean(v)
			}
		}
	}
	if l.EntriesPerSec > 0 {
		l.CPUPer1000 = l.LeaderCPU / (l.EntriesPerSec / 1000)
	}
	return l
}

// Figures are the run's figures for a closing note, as text: faults
// injected by kind, each fault's recovery, the slopes with their limits.
func (r *Result) Figures() string {
	var b strings.Builder
	kinds := map[string]int{}
	for _, f := range r.Faults {
		kinds[f.Fault]++
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	b.WriteString("faults by kind:")
	for _, k := range ks {
		fmt.Fprintf(&b, " %s %d;", k, kinds[k])
	}
	b.WriteString("\n")
	for _, rc := range r.Recoveries {
		cmd, st := "none answered", "did not stop"
		if rc.Commands >= 0 {
			cmd = rc.Commands.Round(10 * time.Millisecond).String()
		}
		switch {
		case rc.Stream < 0:
			st = fmt.Sprintf("stopped for %d of %d viewers, and for one never flowed again", rc.StreamStopped, rc.StreamViewers)
		case rc.Stream > 0:
			st = fmt.Sprintf("stopped for %d of %d viewers, flowing again for all within %s", rc.StreamStopped, rc.StreamViewers, rc.Stream.Round(time.Second))
		}
		fmt.Fprintf(&b, "  recovery %s %s at %s (%s): commands answered after %s, stream %s\n",
			rc.Fault, rc.Target, rc.Start.UTC().Format("15:04:05"), rc.End.Sub(rc.Start).Round(time.Second), cmd, st)
	}
	for _, s := range r.Slopes {
		if s.Limit == 0 {
			continue
		}
		v := "not judged"
		if s.Judged {
			v = "PASS"
			if !s.Pass {
				v = "FAIL"
			}
		}
		which := "from the run's warm-up"
		switch {
		case s.Segments > 1:
			which = fmt.Sprintf("%d segments, common slope", s.Segments)
		case !s.From.IsZero():
			which = "segment from " + s.From.UTC().Format("15:04:05")
		}
		fmt.Fprintf(&b, "  slope %s %s/h ±%s (limit %s, judged against %s over %s, %d samples, %s, %.1f standard errors allowed) %s%s\n",
			s.Series, human(s.Metric, s.PerHour), strings.TrimPrefix(human(s.Metric, s.StdErr), "+"), human(s.Metric, s.Limit), human(s.Metric, s.Allowed), s.Window.Round(time.Second), s.Samples, which, s.Sigmas, v, shortWindowWhy(s))
	}
	return b.String()
}

// shortWindowWhy says why a slope above its hourly limit can pass: over a
// window shorter than MinSlopeWindow a series may rise by a fixed amount
// (what the limit adds in MinSlopeWindow), so the rise, not the hourly
// figure, is what was judged.
func shortWindowWhy(s Slope) string {
	if s.Limit <= 0 || s.Allowed <= s.Limit || s.Window <= 0 {
		return ""
	}
	h := s.Window.Hours()
	return fmt.Sprintf(": over so short a window the rise is judged, not the hourly figure: it rose %s of the fixed %s allowed (what the limit adds in %s)",
		strings.TrimPrefix(human(s.Metric, s.PerHour*h), "+"), strings.TrimPrefix(human(s.Metric, s.Allowed*h), "+"), time.Duration(float64(time.Hour)*s.Allowed*h/s.Limit).Round(time.Minute))
}

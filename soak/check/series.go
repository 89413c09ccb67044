package check

import (
	"math"
	"sort"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

type point struct {
	t    time.Time
	v    float64
	line int
	pid  float64
}

// sampleSeries is one metric of one process over the run.
type sampleSeries struct {
	actor, metric string
	pts           []point
}

// seriesSet holds the measures over time: resource samples, latencies,
// event counts and the stream's figures.
type seriesSet struct {
	bySample map[string]*sampleSeries
	values   map[string][]point // latency series
	units    map[string]string
	counts   map[string][]time.Time
	streams  []history.Event
}

func newSeriesSet() *seriesSet {
	return &seriesSet{bySample: map[string]*sampleSeries{}, values: map[string][]point{}, units: map[string]string{}, counts: map[string][]time.Time{}}
}

func (s *seriesSet) sample(actor, metric string, t time.Time, v float64, line int) {
	if metric == "pid" {
		return
	}
	k := actor + "/" + metric
	ss := s.bySample[k]
	if ss == nil {
		ss = &sampleSeries{actor: actor, metric: metric}
		s.bySample[k] = ss
	}
	ss.pts = append(ss.pts, point{t: t, v: v, line: line})
}

func (s *seriesSet) add(name, unit string, t time.Time, v float64) {
	s.values[name] = append(s.values[name], point{t: t, v: v})
	s.units[name] = unit
}

func (s *seriesSet) count(name string, t time.Time) { s.counts[name] = append(s.counts[name], t) }

func (s *seriesSet) stream(e history.Event) { s.streams = append(s.streams, e) }

// samples are the sample series, sorted by name.
func (s *seriesSet) samples() []*sampleSeries {
	var out []*sampleSeries
	for _, ss := range s.bySample {
		out = append(out, ss)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].metric != out[j].metric {
			return out[i].metric < out[j].metric
		}
		return out[i].actor < out[j].actor
	})
	return out
}

// lines are a few history lines of the series after cut: its first and
// last samples.
func (ss *sampleSeries) lines(cut time.Time) []int {
	var first, last int
	for _, p := range ss.pts {
		if p.t.Before(cut) {
			continue
		}
		if first == 0 {
			first = p.line
		}
		last = p.line
	}
	return []int{first, last}
}

// segBreak is where a process's series starts a new segment: at, a
// restart's fault or a change of leader; live, when the process is up
// again in its new life or role, from which its warm-up runs.
type segBreak struct{ at, live time.Time }

// segment is one life (or term) of a process: the samples after its
// warm-up, and when that warm-up began.
type segment struct {
	from time.Time
	pts  []point
}

// segments cuts the series at its breaks and keeps, in each segment, the
// samples after its warm-up: the run's (cut) for every segment, and
// for a segment that starts at a break, warm more after the process was
// up again (a new leader's heap grows to the load it took on; a
// restarted process fills its caches and connections).
func (ss *sampleSeries) segments(cut time.Time, warm time.Duration, breaks []segBreak) []segment {
	sort.Slice(breaks, func(i, j int) bool { return breaks[i].at.Before(breaks[j].at) })
	segs := make([]segment, len(breaks)+1)
	for i := range breaks {
		segs[i+1].from = breaks[i].live
	}
	for _, p := range ss.pts {
		k := 0
		for k < len(breaks) && !p.t.Before(breaks[k].at) {
			k++
		}
		start := cut
		if k > 0 {
			if w := segs[k].from.Add(warm); w.After(start) {
				start = w
			}
		}
		if p.t.Before(start) {
			continue
		}
		segs[k].pts = append(segs[k].pts, p)
	}
	return segs
}

// fitSegments fits the segments' samples by least squares, one line per
// segment (its own intercept, the same slope), and returns the slope
// per hour.
func fitSegments(ss *sampleSeries, segs []segment) Slope {
	sl := Slope{Series: ss.actor + "/" + ss.metric, Metric: ss.metric, Segments: len(segs)}
	var first, last time.Time
	for _, g := range segs {
		for _, p := range g.pts {
			if first.IsZero() || p.t.Before(first) {
				first = p.t
			}
			if p.t.After(last) {
				last = p.t
			}
			sl.Samples++
		}
	}
	sl.Window = last.Sub(first)
	type mean struct{ x, y float64 }
	ms := make([]mean, len(segs))
	var sxy, sxx float64
	for i, g := range segs {
		if len(g.pts) < 2 {
			continue
		}
		for _, p := range g.pts {
			ms[i].x += p.t.Sub(first).Hours()
			ms[i].y += p.v
		}
		ms[i].x /= float64(len(g.pts))
		ms[i].y /= float64(len(g.pts))
		for _, p := range g.pts {
			x := p.t.Sub(first).Hours() - ms[i].x
			sxy += x * (p.v - ms[i].y)
			sxx += x * x
		}
	}
	if sxx > 0 {
		sl.PerHour = sxy / sxx
	}
	// The slope's standard error: the residuals' spread about each
	// segment's line, over the spread of the times. Many short segments
	// of a noisy series (the leader's goroutines follow its backlog of
	// requests) give a slope that says little; its error says how little.
	var rss, lag float64
	n, k := 0, 0
	for i, g := range segs {
		if len(g.pts) < 2 {
			continue
		}
		k++
		prev, hasPrev := 0.0, false
		for _, p := range g.pts {
			r := (p.v - ms[i].y) - sl.PerHour*(p.t.Sub(first).Hours()-ms[i].x)
			rss += r * r
			if hasPrev {
				lag += r * prev
			}
			prev, hasPrev = r, true
			n++
		}
	}
	sl.dof = n - k - 1
	if sl.dof > 0 && sxx > 0 {
		sl.StdErr = math.Sqrt(rss / float64(sl.dof) / sxx)
	}
	// Samples of a resource are not independent: a level that steps
	// (fds and goroutines follow the connections open, which change in
	// steps) stays where it stepped for many samples, and the least
	// squares' error, which counts each sample as news, shrinks as the
	// sampling quickens while the evidence does not. The residuals'
	// lag-1 autocorrelation rho says how much of each sample is news:
	// the error's variance is inflated by (1+rho)/(1-rho) and the
	// samples count as n(1-rho)/(1+rho) (AR(1)'s effective sample size).
	// A steady leak leaves residuals about its line with little
	// correlation, and is judged as before.
	if rss > 0 && sl.dof > 0 {
		rho := min(max(lag/rss, 0), 0.95)
		f := (1 + rho) / (1 - rho)
		sl.Rho = rho
		sl.StdErr *= math.Sqrt(f)
		sl.dof = max(int(float64(n)/f)-k-1, 1)
	}
	return sl
}

// streamRecovery is how the dashboard's stream came through a fault
// that started at t and ended at end, per viewer (each v2 and upstream
// viewer follows every job): a viewer stopped when one of its 5-s
// intervals ending between t and end+settle carried no frame, and
// flowed again at the end of its next interval with frames (an upper
// bound: the interval's end). stopped is how many viewers stopped, of
// viewers seen in the window; d is the last of them to flow again,
// measured from t (0: none stopped; -1: one never flowed again before
// the run ended).
func (s *seriesSet) streamRecovery(t, end time.Time) (d time.Duration, stopped, viewers int) {
	const settle = 30 * time.Second
	type st struct{ stopped, again bool }
	per := map[string]*st{}
	for _, e := range s.streams {
		if e.T.Before(t) {
			continue
		}
		v := per[e.Actor]
		if v == nil {
			if e.T.After(end.Add(settle)) {
				continue
			}
			v = &st{}
			per[e.Actor] = v
		}
		switch {
		case v.again:
		case e.Num["frames"] == 0:
			if !v.stopped && !e.T.After(end.Add(settle)) {
				v.stopped = true
			}
		case v.stopped:
			v.again = true
			d = max(d, e.T.Sub(t))
		}
	}
	for _, v := range per {
		viewers++
		if v.stopped {
			stopped++
			if !v.again {
				return -1, stopped, len(per)
			}
		}
	}
	return d, stopped, viewers
}

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

// slope fits the samples after cut by least squares, one line per
// process life (a restart, told by a kill or restart fault on the
// actor, starts a new segment with its own intercept and the same
// slope), and returns the slope per hour.
func (ss *sampleSeries) slope(cut time.Time, restarts []time.Time) Slope {
	sl := Slope{Series: ss.actor + "/" + ss.metric, Metric: ss.metric}
	segOf := func(t time.Time) int {
		n := 0
		for _, r := range restarts {
			if !t.Before(r) {
				n++
			}
		}
		return n
	}
	type acc struct {
		pts []point
	}
	segs := map[int]*acc{}
	var first, last time.Time
	for _, p := range ss.pts {
		if p.t.Before(cut) {
			continue
		}
		k := segOf(p.t)
		if segs[k] == nil {
			segs[k] = &acc{}
		}
		segs[k].pts = append(segs[k].pts, p)
		if first.IsZero() {
			first = p.t
		}
		last = p.t
		sl.Samples++
	}
	sl.Window = last.Sub(first)
	sl.Segments = len(segs)
	// Each segment's means, computed once for the slope and its error.
	means := func(a *acc) (mx, my float64) {
		for _, p := range a.pts {
			mx += p.t.Sub(first).Hours()
			my += p.v
		}
		return mx / float64(len(a.pts)), my / float64(len(a.pts))
	}
	type mean struct{ x, y float64 }
	ms := map[*acc]mean{}
	var sxy, sxx float64
	for _, a := range segs {
		if len(a.pts) < 2 {
			continue
		}
		mx, my := means(a)
		ms[a] = mean{mx, my}
		for _, p := range a.pts {
			x := p.t.Sub(first).Hours() - mx
			sxy += x * (p.v - my)
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
	var rss float64
	n, k := 0, 0
	for a, m := range ms {
		k++
		for _, p := range a.pts {
			r := (p.v - m.y) - sl.PerHour*(p.t.Sub(first).Hours()-m.x)
			rss += r * r
			n++
		}
	}
	if dof := n - k - 1; dof > 0 && sxx > 0 {
		sl.StdErr = math.Sqrt(rss / float64(dof) / sxx)
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

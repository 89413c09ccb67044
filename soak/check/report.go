package check

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"
)

// The report: one page a person reads in a minute. The verdict and the
// invariants first, then the fault timeline, then the measures over time
// as hand-written SVG with the fault windows shaded. No script.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

type xy struct {
	t time.Time
	v float64
}

type line struct {
	name    string
	pts     []xy
	scatter bool
}

const (
	chartW, chartH         = 580, 190
	padL, padR, padT, padB = 62, 10, 26, 24
)

// chart draws lines over the run with the faults shaded; ymax 0 means
// fit.
func (r *Result) chart(title, unit string, scale float64, lines []line, limit float64, zero bool) template.HTML {
	var b strings.Builder
	x0, x1 := r.Start, r.End
	if !x1.After(x0) {
		x1 = x0.Add(time.Second)
	}
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	X := func(t time.Time) float64 { return padL + pw*float64(t.Sub(x0))/float64(x1.Sub(x0)) }
	ymin, ymax := math.Inf(1), math.Inf(-1)
	var all []float64
	for _, l := range lines {
		for _, p := range l.pts {
			v := p.v / scale
			ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			all = append(all, v)
		}
	}
	if limit > 0 {
		ymax = math.Max(ymax, limit/scale)
	}
	if math.IsInf(ymin, 1) {
		ymin, ymax = 0, 1
	}
	// Latency scatters: a few outliers must not flatten the rest.
	if len(lines) > 0 && lines[0].scatter && len(all) > 20 {
		cap := percentile(all, 99.5) * 1.3
		if limit > 0 {
			cap = math.Max(cap, 1.5*limit/scale)
		}
		ymax = math.Min(ymax, cap)
	}
	if zero || ymin > 0 && ymin < ymax*0.6 {
		ymin = math.Min(0, ymin)
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	span := ymax - ymin
	if ymin != 0 {
		ymin -= span * 0.03
	}
	ymax += span * 0.05
	Y := func(v float64) float64 {
		v = math.Max(ymin, math.Min(ymax, v))
		return padT + ph*(1-(v-ymin)/(ymax-ymin))
	}
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="15" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="#fbfbfb" stroke="#ccc"/>`, padL, padT, pw, ph)
	for _, f := range r.Faults {
		a, z := X(f.Start), X(f.End)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.0f" fill="%s" opacity="0.18"><title>%s %s</title></rect>`,
			a, padT, math.Max(1.5, z-a), ph, faultColor(f.Fault), f.Fault, f.Target)
	}
	// Axes: 4 y ticks, 6 x ticks (minutes since start).
	for i := 0; i <= 4; i++ {
		v := ymin + (ymax-ymin)*float64(i)/4
		y := Y(v)
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, padL+pw, y, y, padL-4, y+4, tick(v))
	}
	dur := x1.Sub(x0)
	for i := 0; i <= 6; i++ {
		t := x0.Add(dur * time.Duration(i) / 6)
		anchor := "middle"
		if i == 6 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, X(t), chartH-8, anchor, since(t.Sub(x0)))
	}
	fmt.Fprintf(&b, `<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">%s</text>`, padT+ph/2, padT+ph/2, template.HTMLEscapeString(unit))
	if limit > 0 {
		y := Y(limit / scale)
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="5,3"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#d62728">limit</text>`,
			padL, padL+pw, y, y, padL+pw-3, y-3)
	}
	lx := float64(padL) + 8.4*float64(len([]rune(title))) + 16
	for i, l := range lines {
		col := palette[i%len(palette)]
		if l.scatter {
			// One dot per pixel column and value band: the worst of each
			// column, and the rest thinned.
			seen := map[[2]int]bool{}
			for _, p := range l.pts {
				x, y := X(p.t), Y(p.v/scale)
				k := [2]int{int(x), int(y / 2)}
				if seen[k] {
					continue
				}
				seen[k] = true
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.6" fill="%s" opacity="0.7"/>`, x, y, col)
			}
		} else if len(l.pts) > 0 {
			step := max(1, len(l.pts)/800)
			var pts []string
			for j := 0; j < len(l.pts); j += step {
				p := l.pts[j]
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(p.t), Y(p.v/scale)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.4" points="%s"/>`, col, strings.Join(pts, " "))
		}
		if len(lines) > 1 || l.name != "" {
			fmt.Fprintf(&b, `<rect x="%.0f" y="6" width="10" height="10" fill="%s"/><text x="%.0f" y="15">%s</text>`, lx, col, lx+13, template.HTMLEscapeString(l.name))
			lx += 20 + 6.5*float64(len([]rune(l.name)))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func tick(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func since(d time.Duration) string {
	if d >= time.Hour {
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	if d >= 10*time.Minute || d%time.Minute == 0 {
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

var faultColors = map[string]string{
	"kill-leader": "#d62728", "freeze-leader": "#ff7f0e", "kill-redis-master": "#8c564b",
	"partition-node-redis": "#9467bd", "partition-pipeline-node": "#17becf", "partition-leader-irc": "#e377c2",
	"pause-pipeline": "#bcbd22", "clock-skew": "#7f7f7f", "revoke-waiting": "#2ca02c", "restart-bridge": "#1f77b4",
}

func faultColor(f string) string {
	if c, ok := faultColors[f]; ok {
		return c
	}
	return "#555"
}

// timeline draws one row per kind of fault.
func (r *Result) timeline() template.HTML {
	kinds := map[string]bool{}
	for _, f := range r.Faults {
		kinds[f.Fault] = true
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	const w, lab, row = 1180, 170, 16
	rows := len(ks)
	if len(r.leaders) > 0 {
		rows++
	}
	h := 24 + row*max(1, rows)
	x0, x1 := r.Start, r.End
	if !x1.After(x0) {
		x1 = x0.Add(time.Second)
	}
	pw := float64(w - lab - 10)
	X := func(t time.Time) float64 { return lab + pw*float64(t.Sub(x0))/float64(x1.Sub(x0)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">`, w, h)
	for i, k := range ks {
		y := 4 + row*i
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#eee"/>`, lab-6, y+11, k, lab, w-10, y+8, y+8)
		for _, f := range r.Faults {
			if f.Fault != k {
				continue
			}
			a, z := X(f.Start), X(f.End)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s %s</title></rect>`,
				a, y+2, math.Max(2, z-a), row-4, faultColor(k), k, f.Target, f.End.Sub(f.Start).Round(100*time.Millisecond))
		}
	}
	if len(r.leaders) > 0 {
		// Who held the lease: one colour per node, blank when none.
		y := 4 + row*len(ks)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">leader</text>`, lab-6, y+11)
		nodes := map[string]string{}
		for i, l := range r.leaders {
			if l.Actor == "" {
				continue
			}
			col, ok := nodes[l.Actor]
			if !ok {
				col = []string{"#4e79a7", "#59a14f", "#b07aa1", "#9c755f"}[len(nodes)%4]
				nodes[l.Actor] = col
			}
			end := x1
			if i+1 < len(r.leaders) {
				end = r.leaders[i+1].T
			}
			a, z := X(l.T), X(end)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.75"><title>%s</title></rect>`, a, y+2, math.Max(1, z-a), row-4, col, l.Actor)
			if z-a > 40 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#fff" font-size="10">%s</text>`, a+3, y+11, l.Actor)
			}
		}
	}
	if len(ks) == 0 && len(r.leaders) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="16">no faults</text>`, lab)
	}
	dur := x1.Sub(x0)
	for i := 0; i <= 10; i++ {
		t := x0.Add(dur * time.Duration(i) / 10)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%s</text>`, X(t), h-4, since(t.Sub(x0)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// bucket is the width of the throughput charts' buckets: a minute, or
// a 60th of a shorter run, but at least 10 s.
func (r *Result) bucket() time.Duration {
	dur := r.End.Sub(r.Start)
	if dur >= time.Hour {
		return time.Minute
	}
	return max(10*time.Second, dur/60)
}

// perMinute buckets event times into rates per minute.
func (r *Result) perMinute(ts []time.Time) []xy {
	vs := make([]float64, len(ts))
	for i := range vs {
		vs[i] = 1
	}
	return r.bucketed(ts, vs, false, float64(time.Minute))
}

// bucketed sums (or, with takeMax, takes the largest of) values per
// bucket, scaled per unit of time (0: not scaled).
func (r *Result) bucketed(ts []time.Time, vs []float64, takeMax bool, per float64) []xy {
	b := r.bucket()
	n := int(r.End.Sub(r.Start)/b) + 1
	acc := make([]float64, n)
	for i, t := range ts {
		k := int(t.Sub(r.Start) / b)
		if k < 0 || k >= n {
			continue
		}
		if takeMax {
			acc[k] = math.Max(acc[k], vs[i])
		} else {
			acc[k] += vs[i]
		}
	}
	out := make([]xy, n)
	for i, v := range acc {
		if per > 0 {
			v = v * per / float64(b)
		}
		out[i] = xy{r.Start.Add(b*time.Duration(i) + b/2), v}
	}
	return out
}

func (r *Result) charts() []template.HTML {
	s := r.series
	var out []template.HTML
	metric := func(m, title, unit string, scale float64) {
		var ls []line
		for _, ss := range s.samples() {
			if ss.metric != m {
				continue
			}
			l := line{name: ss.actor}
			for _, p := range ss.pts {
				l.pts = append(l.pts, xy{p.t, p.v})
			}
			ls = append(ls, l)
		}
		if len(ls) > 0 {
			out = append(out, r.chart(title, unit, scale, ls, 0, true))
		}
	}
	metric("rss_bytes", "Resident memory", "MB", 1e6)
	metric("redis_used_memory", "Redis used memory", "MB", 1e6)
	metric("redis_live_memory", "Redis memory less keys with a TTL (judged)", "MB", 1e6)
	metric("goroutines", "Goroutines", "count", 1)
	metric("fds", "Open file descriptors", "count", 1)
	lat := func(name, title string, limit time.Duration) {
		pts := s.values[name]
		l := line{name: name, scatter: true}
		for _, p := range pts {
			l.pts = append(l.pts, xy{p.t, p.v})
		}
		out = append(out, r.chart(title, "ms", 1, []line{l}, float64(limit/time.Millisecond), true))
	}
	opts := r.opts
	lat("reply latency", "Command reply latency", opts.ReplyP99)
	lat("finish latency", "Finish report latency (pipeline end → channel)", opts.FinishP99)
	var tl []line
	for _, k := range []string{"takes", "job ends", "reports"} {
		tl = append(tl, line{name: k, pts: r.perMinute(s.counts[k])})
	}
	out = append(out, r.chart("Throughput", "per minute", 1, tl, 0, true))
	if len(s.streams) > 0 {
		var ts []time.Time
		var fr, lg []float64
		for _, e := range s.streams {
			ts = append(ts, e.T)
			fr = append(fr, e.Num["frames"])
			lg = append(lg, e.Num["lag_p99_ms"])
		}
		frames := line{name: "all viewers", pts: r.bucketed(ts, fr, false, float64(time.Second))}
		lag := line{name: "worst viewer", pts: r.bucketed(ts, lg, true, 0)}
		out = append(out, r.chart("Dashboard stream: frames per second", "frames/s", 1, []line{frames}, 0, true))
		out = append(out, r.chart("Dashboard stream: lag p99", "ms", 1, []line{lag}, 0, true))
	}
	return out
}

type reportData struct {
	R        *Result
	Failed   bool
	Duration string
	Timeline template.HTML
	Charts   []template.HTML
	Shown    map[int][]Violation
	More     map[int]int
}

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"dur": func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"perh": func(s Slope) string {
		return human(s.Metric, s.PerHour) + " ±" + strings.TrimPrefix(human(s.Metric, s.StdErr), "+")
	},
	"lim": func(s Slope) string {
		if s.Limit == 0 {
			return "–"
		}
		return human(s.Metric, s.Limit)
	},
	"allowed": func(s Slope) string {
		if !s.Judged {
			return "not judged"
		}
		return human(s.Metric, s.Allowed)
	},
	"color": faultColor,
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Soak report</title>
<style>
body{font-family:sans-serif;margin:16px;width:1200px;color:#222;font-size:13px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.verdict{display:inline-block;padding:3px 12px;border-radius:4px;color:#fff;font-weight:bold;font-size:18px;margin-right:10px}
.pass{background:#2a8f2a} .fail{background:#c62828}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid #e3e3e3;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .tag{font-weight:bold;border-radius:3px;padding:1px 6px;color:#fff;font-size:12px}
.c{color:#444} .c b{color:#000;font-weight:600} .v{color:#b71c1c;font-family:monospace;font-size:11px;margin:2px 0}
.n{color:#666;font-style:italic} .charts{display:flex;flex-wrap:wrap;gap:8px 20px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px}
</style></head><body>
<h1><span class="verdict {{if .Failed}}fail">FAIL{{else}}pass">PASS{{end}}</span>Soak {{.R.Dir}}</h1>
<div class="c">{{.R.Start.UTC.Format "2006-01-02 15:04:05"}} UTC, {{.Duration}}, {{.R.Events}} events, {{len .R.Faults}} faults</div>
<div class="c">{{.R.Load.String}}</div>
<h2>Invariants</h2>
<table><tr><th style="width:26px">#</th><th style="width:52px"></th><th>invariant and figures</th></tr>
{{range .R.Invariants}}<tr><td>{{.N}}</td><td>{{if .Pass}}<span class="tag pass">PASS</span>{{else}}<span class="tag fail">FAIL</span>{{end}}</td>
<td><div><b>{{.Name}}</b></div><div class="c">{{range $i, $c := .Counts}}{{if $i}} · {{end}}{{$c.Name}} <b>{{$c.Value}}</b>{{end}}</div>
{{range .Notes}}<div class="n">{{.}}</div>{{end}}
{{range index $.Shown .N}}<div class="v">{{.String}}</div>{{end}}{{with index $.More .N}}<div class="v">… and {{.}} more</div>{{end}}</td></tr>
{{end}}</table>
<h2>Judgements left out <span class="n" style="font-weight:normal">(each bounded; past its bound the run fails)</span></h2>
<table><tr><th style="width:52px"></th><th>skipped</th><th>of</th><th>bound</th></tr>
{{range .R.Skips}}<tr><td>{{if .Pass}}<span class="tag pass">PASS</span>{{else}}<span class="tag fail">FAIL</span>{{end}}</td><td><b>{{.Name}}</b> {{.N}}{{range .Examples}}<div class="v">{{.}}</div>{{end}}</td><td>{{.Of}}</td><td>{{.Bound}}</td></tr>
{{end}}</table>
<h2>Fault timeline</h2>
{{.Timeline}}
<h2>Measures over time <span class="n" style="font-weight:normal">(shaded: fault windows; x: time since start)</span></h2>
<div class="charts">{{range .Charts}}<div>{{.}}</div>{{end}}</div>
<h2>Slopes after warm-up (invariant 6)</h2>
<table><tr><th>series</th><th>slope per hour</th><th>limit</th><th>judged against</th><th>window</th><th>samples</th><th>lives</th><th></th></tr>
{{range .R.Slopes}}<tr><td>{{.Series}}</td><td>{{perh .}}</td><td>{{lim .}}</td><td>{{allowed .}}</td><td>{{dur .Window}}</td><td>{{.Samples}}</td><td>{{.Segments}}</td>
<td>{{if .Judged}}{{if .Pass}}<span class="tag pass">PASS</span>{{else}}<span class="tag fail">FAIL</span>{{end}}{{end}}</td></tr>{{end}}
</table>
<h2>Faults and recovery (invariant 7)</h2>
<table><tr><th>fault</th><th>target</th><th>start</th><th>lasted</th><th>commands answered again after</th><th>stream flowing again after</th></tr>
{{range .R.Recoveries}}<tr><td><span class="sw" style="background:{{color .Fault}}"></span>{{.Fault}}</td><td>{{.Target}}</td><td>{{clock .Start}}</td><td>{{dur (.End.Sub .Start)}}</td><td>{{dur .Commands}}</td><td>{{if eq .Stream 0}}did not stop{{else}}{{.StreamStopped}} of {{.StreamViewers}} viewers stopped; {{if lt .Stream 0}}one never flowed again{{else}}all flowing within {{dur .Stream}}{{end}}{{end}}</td></tr>{{end}}
</table>
</body></html>
`))

// HTML is the report page.
func (r *Result) HTML() string {
	d := reportData{R: r, Failed: r.Failed(), Duration: r.End.Sub(r.Start).Round(time.Second).String(),
		Timeline: r.timeline(), Charts: r.charts(), Shown: map[int][]Violation{}, More: map[int]int{}}
	for _, inv := range r.Invariants {
		vs := inv.Violations
		if len(vs) > 8 {
			d.More[inv.N] = len(vs) - 8
			vs = vs[:8]
		}
		d.Shown[inv.N] = vs
	}
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, d); err != nil {
		return "report: " + template.HTMLEscapeString(err.Error())
	}
	return b.String()
}

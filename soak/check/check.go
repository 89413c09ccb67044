// Package check is the soak's invariant checker. It reads a run's history
// (soak/history: every command and reply, every channel line, every take
// and end of a job, every fault, sample and probe) and Redis's state at
// the end, rebuilds its own model of every job from them, checks the seven
// invariants of issue 28 and writes report.html (and report.png) into the
// run's directory. It decides from those files alone, so a kept run can
// be checked again: go run ./soak/check/cmd/soakcheck DIR.
//
// doc/soak.md (The checker) says what each invariant checks and how.
package check

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// Options are the checker's limits. DefaultOptions holds the defaults
// issue 28 names.
type Options struct {
	// RevokeGrace: a revoked key may take nothing later than this after
	// its Revoke event (invariant 3).
	RevokeGrace time.Duration
	// FaultGrace extends every fault window: replies and finish reports
	// in a window or its grace are not held to the latency limits
	// (invariant 7).
	FaultGrace time.Duration
	// ReplyP99 and FinishP99: the latency limits outside faults.
	ReplyP99, FinishP99 time.Duration
	// EndGrace: a job that ended this close to the end of the run (its
	// pipeline's end, or its failure in Redis) may not have been
	// reported yet; its missing report is counted, not a violation.
	EndGrace time.Duration
	// ProbeSlack: a probe agrees with the model when it matches the
	// model's state at any moment within this of the probe (the
	// history's events are stamped by different processes a little
	// after what they record).
	ProbeSlack time.Duration
	// WarmUp is the fraction of the run left out of the slopes.
	WarmUp float64
	// MinSlopeWindow: over a shorter window (after warm-up) a series
	// may rise by what its limit adds in MinSlopeWindow, a fixed rise
	// however short the window (the slope judged against limit ×
	// MinSlopeWindow / window).
	MinSlopeWindow time.Duration
	// MinAloneWindow: when a series' judged segments add up to
	// MinSlopeWindow (their common slope is judged), a segment whose
	// judged part is shorter than this is judged only in that common
	// slope, not on its own. In a short run every segment is judged on
	// its own.
	MinAloneWindow time.Duration
	// SegmentWarmUp: after each restart of a process and each change of
	// leader its series starts a new segment, whose first SegmentWarmUp
	// is not judged (the run's start has WarmUp).
	SegmentWarmUp time.Duration
	// MinSamples: a series with a limit needs this many samples after
	// warm-up to be judged; a run with fewer fails (invariant 6's
	// floor). Every metric with a limit needs one such series.
	MinSamples int
	// PipelineKinds: the kinds of pipeline (a take's Via) each of which
	// must have taken a job (invariant 2's floor).
	PipelineKinds []string
	// MinViewerEntries: the entries each v2 viewer must have received in
	// the intervals judged (outside faults; intervals that carried no
	// entries do not count) (invariant 8's floor).
	MinViewerEntries float64
	// Skips bounds the judgements the checker leaves out (Skip): a run
	// that leaves out more fails.
	Skips SkipBounds
	// SlopeLimits: per metric (a Sample's Num key), the largest slope
	// per hour allowed. Metrics without a limit are reported, not
	// judged.
	SlopeLimits map[string]float64
	// AllowEmpty passes an invariant that had nothing to check (a
	// note says so); by default it fails, since it proved nothing.
	AllowEmpty bool
	// PNG: also render report.png with headless Chromium at Chromium.
	PNG      bool
	Chromium string
}

// DefaultOptions are the limits issue 28 sets, with the checker's own
// tolerances.
func DefaultOptions() Options {
	return Options{
		RevokeGrace:      time.Second,
		FaultGrace:       15 * time.Second,
		ReplyP99:         time.Second,
		FinishP99:        2 * time.Second,
		ProbeSlack:       2 * time.Second,
		EndGrace:         10 * time.Second,
		WarmUp:           0.2,
		MinSlopeWindow:   10 * time.Minute,
		SegmentWarmUp:    45 * time.Second,
		MinAloneWindow:   3 * time.Minute,
		MinSamples:       6,
		PipelineKinds:    []string{"api", "bridge", "direct"},
		MinViewerEntries: 100,
		Skips:            DefaultSkipBounds(),
		SlopeLimits: map[string]float64{
			"rss_bytes":  50e6,
			"goroutines": 200,
			"fds":        100,
			// Redis less the keys with a TTL (kept by design until they
			// expire); redis_used_memory is reported, not judged.
			"redis_live_memory": 50e6,
		},
		PNG:      true,
		Chromium: "/usr/bin/chromium",
	}
}

// Violation is one breach of an invariant, with what is needed to find
// it in the history: the job, the times, and the history's line numbers
// (1-based).
type Violation struct {
	Ident  string    `json:"ident,omitempty"`
	T      time.Time `json:"t"`
	T2     time.Time `json:"t2,omitzero"`
	Lines  []int     `json:"lines,omitempty"`
	Detail string    `json:"detail"`
}

func (v Violation) String() string {
	var b strings.Builder
	if v.Ident != "" {
		b.WriteString(v.Ident + ": ")
	}
	b.WriteString(v.Detail)
	fmt.Fprintf(&b, " [at %s", v.T.UTC().Format("15:04:05.000"))
	if !v.T2.IsZero() {
		fmt.Fprintf(&b, ", %s", v.T2.UTC().Format("15:04:05.000"))
	}
	b.WriteString("]")
	if len(v.Lines) > 0 {
		fmt.Fprintf(&b, " history lines %v", v.Lines)
	}
	return b.String()
}

// Count is one figure of an invariant.
type Count struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Invariant is one invariant's verdict.
type Invariant struct {
	N          int         `json:"n"`
	Name       string      `json:"name"`
	Pass       bool        `json:"pass"`
	Counts     []Count     `json:"counts"`
	Notes      []string    `json:"notes,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

func (inv *Invariant) count(name string, format string, args ...any) {
	inv.Counts = append(inv.Counts, Count{name, fmt.Sprintf(format, args...)})
}

func (inv *Invariant) violate(v Violation) { inv.Violations = append(inv.Violations, v) }

// Slope is one resource series' trend after warm-up (invariant 6).
type Slope struct {
	Series  string  `json:"series"` // actor/metric
	Metric  string  `json:"metric"`
	PerHour float64 `json:"per_hour"`
	// StdErr is PerHour's standard error (least squares). A series
	// fails only when PerHour − Sigmas·StdErr exceeds Allowed: growth
	// the samples show, not a slope their noise could give.
	StdErr float64 `json:"std_err"`
	// Rho is the residuals' lag-1 autocorrelation (0 when negative),
	// by which StdErr is inflated and the samples' count deflated
	// (fitSegments).
	Rho float64 `json:"rho,omitempty"`
	// Sigmas is how many standard errors PerHour must clear: Student's
	// t for the fit's degrees of freedom at the one-sided level of two
	// standard errors of a normal (2.3 %), divided by the number of
	// segments of the series judged (each is a chance for noise to
	// look like growth). About 2 for one segment of many samples.
	Sigmas float64 `json:"sigmas"`
	dof    int
	Limit  float64 `json:"limit"` // 0: not judged
	// Allowed is the slope it was judged against: Limit, or over a
	// window shorter than MinSlopeWindow the slope of a fixed rise
	// (what Limit adds in MinSlopeWindow).
	Allowed float64       `json:"allowed"`
	Window  time.Duration `json:"window"`
	// From is when the segment judged began (zero: the series is one
	// segment, or this is the common slope of its segments).
	From     time.Time `json:"from,omitempty"`
	Samples  int       `json:"samples"`
	Segments int       `json:"segments"`
	Judged   bool      `json:"judged"`
	Pass     bool      `json:"pass"`
}

// Recovery is, for one fault, how long until commands were answered and
// the stream flowed again (invariant 7).
type Recovery struct {
	Fault    string        `json:"fault"`
	Target   string        `json:"target"`
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Commands time.Duration `json:"commands"` // -1: none answered
	Stream   time.Duration `json:"stream"`   // 0: never stopped; -1: never flowed again
	// StreamStopped of StreamViewers viewers saw their stream stop in
	// the fault (Stream is the last of them to see it flow again).
	StreamStopped int `json:"stream_stopped"`
	StreamViewers int `json:"stream_viewers"`
}

// Window is a fault's window.
type Window struct {
	Fault, Target string
	Start, End    time.Time
	Lines         [2]int
}

// Result is the whole verdict of a run.
type Result struct {
	Dir        string
	Start, End time.Time
	Events     int
	Invariants []*Invariant
	Faults     []Window
	Slopes     []Slope
	Recoveries []Recovery
	// Skips are the judgements left out, each with its bound.
	Skips []Skip
	// Load is what the run carried and what it cost the leader.
	Load Load
	// Report and PNG are the files written; PNGError says why there is
	// no PNG.
	Report, PNG, PNGError string

	series  *seriesSet
	opts    Options
	leaders []history.Event
}

// Failed reports whether any invariant failed.
func (r *Result) Failed() bool {
	for _, inv := range r.Invariants {
		if !inv.Pass {
			return true
		}
	}
	for _, s := range r.Skips {
		if !s.Pass {
			return true
		}
	}
	return false
}

// Invariant returns invariant n (1–8).
func (r *Result) Invariant(n int) *Invariant {
	for _, inv := range r.Invariants {
		if inv.N == n {
			return inv
		}
	}
	return nil
}

// Summary is the verdict in a few lines of text.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s: %d events, %s to %s (%s), %d faults\n", r.Dir, r.Events,
		r.Start.UTC().Format(time.DateTime), r.End.UTC().Format("15:04:05"), r.End.Sub(r.Start).Round(time.Second), len(r.Faults))
	for _, inv := range r.Invariants {
		verdict := "PASS"
		if !inv.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "%s %d. %s", verdict, inv.N, inv.Name)
		for i, c := range inv.Counts {
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			fmt.Fprintf(&b, "%s%s %s", sep, c.Name, c.Value)
		}
		b.WriteString("\n")
		for i, v := range inv.Violations {
			if i == 10 {
				fmt.Fprintf(&b, "    … and %d more\n", len(inv.Violations)-10)
				break
			}
			fmt.Fprintf(&b, "    %s\n", v)
		}
	}
	for _, s := range r.Skips {
		b.WriteString(s.String() + "\n")
	}
	b.WriteString(r.Load.String() + "\n")
	b.WriteString(r.Figures())
	if r.Report != "" {
		fmt.Fprintf(&b, "report: %s\n", r.Report)
	}
	if r.PNG != "" {
		fmt.Fprintf(&b, "picture: %s\n", r.PNG)
	}
	if r.PNGError != "" {
		fmt.Fprintf(&b, "no picture: %s\n", r.PNGError)
	}
	return b.String()
}

// Run checks the run in dir with the default options and writes its
// report (and picture).
func Run(dir string) (*Result, error) { return RunWith(dir, DefaultOptions()) }

// RunWith is Run with opts.
func RunWith(dir string, opts Options) (*Result, error) {
	events, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	name := "final_redis.json"
	for _, e := range events {
		if e.Kind == history.Final && e.Text != "" {
			name = e.Text
		}
	}
	dump, err := ReadDump(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	res := Check(events, dump, opts)
	res.Dir = dir
	res.Report = filepath.Join(dir, "report.html")
	defer func() {
		// The figures a closing note copies, as text.
		os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(res.Summary()), 0o644)
	}()
	if err := os.WriteFile(res.Report, []byte(res.HTML()), 0o644); err != nil {
		return res, err
	}
	if opts.PNG {
		png := filepath.Join(dir, "report.png")
		if err := RenderPNG(res.Report, png, opts.Chromium); err != nil {
			res.PNGError = err.Error()
		} else {
			res.PNG = png
		}
	}
	return res, nil
}

// Entry is one key of Redis's state at the end, as internal/redistest.Dump
// writes it.
type Entry struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
	TTL   any             `json:"ttl"`
}

// Dump is Redis's state at the end: key → entry.
type Dump map[string]Entry

// ReadDump reads final_redis.json.
func ReadDump(path string) (Dump, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dump
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Hash is key's hash value, nil when it is not a hash.
func (d Dump) Hash(key string) map[string]string {
	e, ok := d[key]
	if !ok || e.Type != "hash" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(e.Value, &m) != nil {
		return nil
	}
	return m
}

// Members is a list's or set's members.
func (d Dump) Members(key string) []string {
	e, ok := d[key]
	if !ok || (e.Type != "list" && e.Type != "set") {
		return nil
	}
	var m []string
	_ = json.Unmarshal(e.Value, &m)
	return m
}

// queues are the lists that hold queued jobs, a paused queue's list
// aside (archivebot:paused:QUEUE, doc/protocol.md, Paused queues)
// included.
func (d Dump) queues() []string {
	var out []string
	for k, e := range d {
		q := strings.TrimPrefix(k, "archivebot:paused:")
		if e.Type == "list" && (q == "pending" || q == "pending-ao" || q == "pending-large" || strings.HasPrefix(q, "pending:")) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// registered reports whether a job hash carries the fields the node
// registers; a hash without them is a ghost (doc/protocol.md, Which record speaks for a job).
func registered(h map[string]string) bool {
	return h["url"] != "" && h["started_by"] != "" && h["queued_at"] != ""
}

// endState is a job's state in the final dump, by the rule of doc/protocol.md (Which record speaks for a job)
// and §11: queued (in a pending queue), running (started, or in
// working), finished, aborted, failed, absent; ghost (a hash without
// the registration fields) and stranded (registered, not started, in no
// queue) are states no live job may be in.
func (d Dump) endState(ident string, queued, working map[string]bool) string {
	h := d.Hash(ident)
	fail := d.Hash("archivebot:failed:" + ident)
	switch {
	case h != nil && !registered(h):
		if fail != nil {
			return "failed"
		}
		return "ghost"
	case h != nil && h["failed"] == "true":
		return "failed"
	case h != nil && h["finished_at"] != "" && h["aborted"] == "true":
		return "aborted"
	case h != nil && h["finished_at"] != "":
		return "finished"
	case h != nil && (h["started_at"] != "" || h["pipeline_id"] != "" || working[ident]):
		return "running"
	case h != nil && queued[ident]:
		return "queued"
	case h != nil:
		if fail != nil {
			return "failed"
		}
		return "stranded"
	case fail != nil:
		return "failed"
	case working[ident] || queued[ident]:
		return "orphan"
	}
	if e, ok := d[ident]; ok && e.Type == "none" {
		// Listed when the dump began, gone when it was read: it
		// expired or was deleted meanwhile.
		return "vanished"
	}
	return "absent"
}

// percentile is the p-th percentile (0–100) of xs, by nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	k = max(0, min(k, len(s)-1))
	return s[k]
}

func ms(d float64) string {
	if math.IsInf(d, 1) {
		return "∞"
	}
	if math.IsNaN(d) {
		return "–"
	}
	return fmt.Sprintf("%.0f ms", d)
}

func pct(n, of int) string {
	if of == 0 {
		return "0 %"
	}
	return fmt.Sprintf("%.2f %%", 100*float64(n)/float64(of))
}

package check

// The judgements the checker leaves out, counted and bounded: an answer
// it cannot read ("other"), a probe that got no state ("not judged": a
// timeout, an error), a registration stamped near a clock skew ("near a
// clock skew", judge_fence.go). Each is in the summary with its bound; a
// run past a bound fails, so a checker that stops reading the node's
// answers (a new wording, a runner that records nothing) cannot pass by
// judging nothing.

import (
	"fmt"
	"strings"
)

// SkipBounds are the bounds on the judgements left out.
type SkipBounds struct {
	// Other: answers (replies to users, probes) the checker cannot read.
	Other int
	// NotJudged: the fraction of probes that got no state.
	NotJudged float64
	// NearSkew: the fraction of registrations held against the lease
	// that were stamped near a clock skew and not judged.
	NearSkew float64
}

// DefaultSkipBounds: no answer unread; a tenth of the probes without a
// state (a fault's timeouts); half the registrations near a skew (a
// short run's clock-skew window and its margins cover a large part of
// it).
func DefaultSkipBounds() SkipBounds {
	return SkipBounds{Other: 0, NotJudged: 0.1, NearSkew: 0.5}
}

// Skip is one kind of judgement left out: how many, of how many, the
// bound, and the first ones (with their history lines).
type Skip struct {
	Name     string   `json:"name"`
	N        int      `json:"n"`
	Of       int      `json:"of"`
	Bound    string   `json:"bound"`
	Pass     bool     `json:"pass"`
	Examples []string `json:"examples,omitempty"`
}

func (s Skip) String() string {
	v := "PASS"
	if !s.Pass {
		v = "FAIL"
	}
	out := fmt.Sprintf("%s skipped %q: %d of %d (bound %s)", v, s.Name, s.N, s.Of, s.Bound)
	if !s.Pass && len(s.Examples) > 0 {
		out += "\n    " + strings.Join(s.Examples, "\n    ")
	}
	return out
}

// unread notes an answer the checker cannot read.
func (c *checker) unread(e ev, what, text string) {
	c.others++
	if len(c.otherExamples) < 10 {
		c.otherExamples = append(c.otherExamples, fmt.Sprintf("%s, history line %d: %q", what, e.line, cut(text, 200)))
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// judgeSkips counts what was left out against the bounds.
func (c *checker) judgeSkips() {
	b := c.opts.Skips
	answers := len(c.replies) + len(c.probes) + c.unanswered + c.others
	other := Skip{Name: "other", N: c.others, Of: answers, Bound: fmt.Sprint(b.Other), Pass: c.others <= b.Other, Examples: c.otherExamples}
	probes := len(c.probes) + c.unanswered
	notJudged := Skip{Name: "not judged", N: c.unanswered, Of: probes, Bound: fmt.Sprintf("%.0f %%", 100*b.NotJudged),
		Pass: float64(c.unanswered) <= b.NotJudged*float64(probes)}
	notJudged.Examples = c.unansweredExamples
	near := Skip{Name: "near a clock skew", N: c.nearSkew, Of: c.fenceChecked + c.nearSkew, Bound: fmt.Sprintf("%.0f %%", 100*b.NearSkew),
		Pass: float64(c.nearSkew) <= b.NearSkew*float64(c.fenceChecked+c.nearSkew)}
	c.res.Skips = []Skip{other, notJudged, near, c.shortSegments}
}

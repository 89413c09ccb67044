package refusal

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// rig is a Log on a fake clock whose scheduled flushes run when the test
// says so.
type rig struct {
	*Log
	buf     bytes.Buffer
	t       time.Time
	pending []func()
}

func newRig(every time.Duration) *rig {
	r := &rig{t: time.Unix(1_700_000_000, 0)}
	r.Log = New(slog.New(slog.NewTextHandler(&r.buf, nil)), every)
	r.now = func() time.Time { return r.t }
	r.after = func(_ time.Duration, f func()) { r.pending = append(r.pending, f) }
	return r
}

func (r *rig) lines() []string {
	s := strings.TrimSpace(r.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (r *rig) runFlushes() {
	fs := r.pending
	r.pending = nil
	for _, f := range fs {
		f()
	}
}

func TestFirstRefusalLoggedAtOnceThenSummed(t *testing.T) {
	r := newRig(10 * time.Second)
	r.Refused("api_body_budget", "10.0.0.1", "limit", "64MiB")
	if got := r.lines(); len(got) != 1 || !strings.Contains(got[0], "class=api_body_budget") || !strings.Contains(got[0], "refused=1") {
		t.Fatalf("first refusal: lines %q, want one line with class and refused=1", got)
	}
	for i := range 1000 {
		r.t = r.t.Add(time.Millisecond)
		r.Refused("api_body_budget", fmt.Sprintf("10.0.0.%d", i%9), "limit", "64MiB")
	}
	if got := r.lines(); len(got) != 1 {
		t.Fatalf("1,000 refusals within the period wrote %d lines, want none beyond the first", len(got)-1)
	}
	if len(r.pending) != 1 {
		t.Fatalf("%d flushes scheduled, want 1 for the period's end", len(r.pending))
	}
	r.t = r.t.Add(10 * time.Second)
	r.runFlushes()
	got := r.lines()
	if len(got) != 2 {
		t.Fatalf("after the period: lines %q, want 2", got)
	}
	for _, want := range []string{"refused=1000", "sources=9", "10.0.0.0×112", "limit=64MiB"} {
		if !strings.Contains(got[1], want) {
			t.Errorf("summary line %q lacks %q", got[1], want)
		}
	}
}

func TestQuietPeriodFlushWritesNothing(t *testing.T) {
	r := newRig(time.Second)
	r.Refused("c", "a")
	r.runFlushes()
	if got := r.lines(); len(got) != 1 {
		t.Fatalf("lines %q, want only the first", got)
	}
	r.t = r.t.Add(2 * time.Second)
	r.Refused("c", "a")
	if got := r.lines(); len(got) != 2 {
		t.Fatalf("a refusal after a quiet period: lines %q, want it logged at once", got)
	}
}

func TestClassesAreSeparate(t *testing.T) {
	r := newRig(time.Minute)
	r.Refused("a", "x")
	r.Refused("b", "x")
	if got := r.lines(); len(got) != 2 {
		t.Fatalf("two classes: lines %q, want one each", got)
	}
}

func TestSourcesBounded(t *testing.T) {
	r := newRig(time.Minute)
	r.Refused("c", "first")
	for i := range 3 * MaxSources {
		r.Refused("c", fmt.Sprintf("s%d", i))
	}
	c := r.classes["c"]
	if len(c.sources) > MaxSources {
		t.Fatalf("%d sources kept, want at most %d", len(c.sources), MaxSources)
	}
	r.t = r.t.Add(time.Minute)
	r.runFlushes()
	got := r.lines()
	if !strings.Contains(got[len(got)-1], fmt.Sprintf("refused=%d", 3*MaxSources)) || !strings.Contains(got[len(got)-1], "others×") {
		t.Fatalf("summary %q: want every refusal counted and the overflow named", got[len(got)-1])
	}
}

func TestNilLogIgnores(t *testing.T) {
	var l *Log
	l.Refused("c", "s") // must not panic
}

package badkeys

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type rec struct{ msgs []string }

func (r *rec) Enabled(context.Context, slog.Level) bool { return true }
func (r *rec) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *rec) WithGroup(string) slog.Handler            { return r }
func (r *rec) Handle(_ context.Context, x slog.Record) error {
	r.msgs = append(r.msgs, x.Message)
	return nil
}

// One line per change of the count, at most once per Every; a cycle
// without bad members makes a later rise news again; names are cut.
func TestSummary(t *testing.T) {
	r := &rec{}
	log := slog.New(r)
	s := New("working", "test", "not jobs")
	t0 := time.Unix(1700000000, 0)
	cycle := func(n int, at time.Duration) {
		for i := 0; i < n; i++ {
			s.Add(fmt.Sprintf("k%d", i))
		}
		s.End(log, t0.Add(at))
	}
	cycle(5, 0)              // said
	cycle(5, time.Second)    // same count: quiet
	cycle(9, 2*time.Second)  // changed within a minute: quiet
	cycle(9, 2*time.Minute)  // now said
	cycle(0, 3*time.Minute)  // none: quiet, forgets the count
	cycle(9, 10*time.Minute) // back: said again
	want := []string{
		"5 bad members of working (not jobs), first: k0, k1, k2",
		"9 bad members of working (not jobs), first: k0, k1, k2",
		"9 bad members of working (not jobs), first: k0, k1, k2",
	}
	if strings.Join(r.msgs, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", r.msgs, want)
	}
	s.Add("\x1b]0;title\x07" + strings.Repeat("x", 500))
	s.End(log, t0.Add(time.Hour))
	if last := r.msgs[len(r.msgs)-1]; len(last) > 200 || strings.ContainsAny(last, "\x1b\x07") {
		t.Errorf("a long or escaped name is not cut and cleaned: %q", last)
	}
}

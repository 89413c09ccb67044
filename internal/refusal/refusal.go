// Package refusal logs what the node refuses the way an operator watching
// an attack needs it: the first refusal of a class at once, then one WARN
// line per class and period with how many were refused since the last
// line, from how many sources, and the busiest of them. A flood costs a
// line every period, never a line per request, and never goes unseen: a
// period that ends with refusals not yet logged is logged when it ends,
// even if nothing more arrives (doc/operating.md, The log).
//
// Classes are the callers' constants ("api_body_budget", "web_login_pool",
// …); sources are what the caller knows of who was refused (an address, a
// key, a nick). Both are bounded: at most MaxSources distinct sources are
// kept per class and period, the rest are counted as others.
package refusal

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxSources bounds the distinct sources kept per class and period.
const MaxSources = 256

// DefaultEvery is the period of the summary lines when New is given 0.
const DefaultEvery = 10 * time.Second

// Log counts refusals by class and logs them, rate-limited. The zero value
// is not usable; a nil *Log ignores every call.
type Log struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	classes map[string]*class
	now     func() time.Time            // tests
	after   func(time.Duration, func()) // tests; time.AfterFunc otherwise
}

type class struct {
	lastLine time.Time      // when the last line for this class was written
	pending  int            // refusals since that line
	sources  map[string]int // source → refusals since that line
	others   int            // refusals from sources beyond MaxSources
	attrs    []any          // the most recent refusal's attributes
	flushing bool           // a flush is scheduled for the period's end
}

// New returns a Log writing to log, one line per class every period
// (DefaultEvery when every is 0).
func New(log *slog.Logger, every time.Duration) *Log {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Log{log: log, every: every, classes: map[string]*class{}, now: time.Now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// Refused records one refusal of class from source, with attrs (slog's
// key-value pairs) describing it: the limit, the reason. The first
// refusal of a class in a period is logged at once; the rest are summed
// into the line written when the period ends.
func (l *Log) Refused(name, source string, attrs ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	c := l.classes[name]
	if c == nil {
		c = &class{}
		l.classes[name] = c
	}
	c.pending++
	if _, ok := c.sources[source]; ok || len(c.sources) < MaxSources {
		if c.sources == nil {
			c.sources = map[string]int{}
		}
		c.sources[source]++
	} else {
		c.others++
	}
	c.attrs = attrs
	now := l.now()
	if c.lastLine.IsZero() || now.Sub(c.lastLine) >= l.every {
		line := l.takeLocked(name, c, now)
		l.mu.Unlock()
		l.write(line)
		return
	}
	if !c.flushing {
		c.flushing = true
		wait := l.every - now.Sub(c.lastLine)
		l.after(wait, func() { l.flush(name) })
	}
	l.mu.Unlock()
}

// flush writes the line of a period that ended with refusals not logged.
func (l *Log) flush(name string) {
	l.mu.Lock()
	c := l.classes[name]
	if c == nil {
		l.mu.Unlock()
		return
	}
	c.flushing = false
	if c.pending == 0 {
		l.mu.Unlock()
		return
	}
	line := l.takeLocked(name, c, l.now())
	l.mu.Unlock()
	l.write(line)
}

type line struct {
	class   string
	count   int
	sources int
	top     string
	attrs   []any
	period  time.Duration
}

func (l *Log) takeLocked(name string, c *class, now time.Time) line {
	period := time.Duration(0)
	if !c.lastLine.IsZero() {
		period = now.Sub(c.lastLine)
	}
	ln := line{class: name, count: c.pending, sources: len(c.sources), attrs: c.attrs, period: period}
	if c.others > 0 {
		ln.sources = len(c.sources) + 1 // at least one more; "others" says how many refusals
	}
	ln.top = topSources(c.sources, c.others, 3)
	c.pending, c.others, c.sources = 0, 0, nil
	c.lastLine = now
	return ln
}

// topSources names the n busiest sources as "addr×count, …".
func topSources(m map[string]int, others, n int) string {
	type kv struct {
		k string
		v int
	}
	all := make([]kv, 0, len(m))
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if c := cmp.Compare(b.v, a.v); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	var b strings.Builder
	for i, e := range all {
		if i == n {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s×%d", e.k, e.v)
	}
	if others > 0 {
		fmt.Fprintf(&b, ", others×%d", others)
	}
	return b.String()
}

func (l *Log) write(ln line) {
	args := []any{"class", ln.class, "refused", ln.count, "sources", ln.sources, "top", ln.top}
	if ln.period > 0 {
		args = append(args, "over", ln.period.Round(time.Millisecond).String())
	}
	args = append(args, ln.attrs...)
	l.log.Warn("refused", args...)
}

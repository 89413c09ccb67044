// Package badkeys summarises the members of a shared list or set (such as
// `working`) that are not what its reader expects: keys another program
// wrote. A reader skips them and, instead of a line per member, logs at
// most one summary line per cycle ("N bad members of working, first: …"),
// and only when the summary changed, at most once per Every; memory stays
// bounded (a count and the first few names) whatever the list holds.
package badkeys

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/text"
)

// First is how many members a summary names.
const First = 3

// Every is the least time between two summary lines of one Summary.
const Every = time.Minute

// nameMax cuts each named member (a key may be long).
const nameMax = 100

// Summary counts one reader's bad members of one list over a cycle. The
// zero value is not ready: use New. It is safe for concurrent use.
type Summary struct {
	list, reader, why string

	mu    sync.Mutex
	n     int
	first []string
	// told is the count the last line gave (0: nothing said, or all gone
	// since), at toldAt.
	told   int
	toldAt time.Time
}

// New returns the summary of reader's bad members of list; why says what
// the reader does with them ("not jobs: not analyzed").
func New(list, reader, why string) *Summary {
	return &Summary{list: list, reader: reader, why: why}
}

// Add counts one bad member of this cycle.
func (s *Summary) Add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if len(s.first) < First {
		s.first = append(s.first, text.Cut(text.Clean(key, text.Untrusted), nameMax))
	}
}

// End ends a cycle: it records the count in /metrics and, when there
// were bad members and their count differs from what the last line said
// (and that line is at least Every old), logs one WARN line:
// "N bad members of LIST (WHY), first: a, b, c". A cycle with none makes
// a later rise news again.
func (s *Summary) End(log *slog.Logger, now time.Time) {
	s.mu.Lock()
	n, first := s.n, s.first
	s.n, s.first = 0, nil
	say := false
	switch {
	case n == 0:
		s.told = 0
	case n == s.told:
	case !s.toldAt.IsZero() && now.Sub(s.toldAt) < Every:
		// said recently: a later cycle says the new count
	default:
		s.told, s.toldAt, say = n, now, true
	}
	s.mu.Unlock()
	metrics.BadMembers(s.list, s.reader, n)
	if say {
		log.Warn(fmt.Sprintf("%d bad members of %s (%s), first: %s", n, s.list, s.why, strings.Join(first, ", ")),
			"bad", n, "list", s.list, "note", "skipped; said again when the count changes, at most once a minute")
	}
}

package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
)

// Helpers the services share.

// announceIn posts line in channel, or in every channel the bot serves
// when the job has none (it was queued from the console). The line is
// cleaned as untrusted text here, the one place the services clean text
// from Redis. Lines nobody can receive (ErrCannotDeliver) are logged and
// count as delivered; any other error means the line must be kept for a
// later attempt.
func announceIn(ctx context.Context, ann news.Announcer, log *slog.Logger, channel, line string) error {
	line = text.Clean(line, text.Untrusted)
	targets := []string{channel}
	if channel == "" {
		if chs := ann.Channels(); len(chs) > 0 {
			targets = chs
		}
	}
	for _, ch := range targets {
		err := ann.Announce(ctx, ch, line)
		if errors.Is(err, news.ErrCannotDeliver) {
			log.Warn("cannot deliver line, dropping it", "channel", ch, "line", line, "err", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// shortDuration writes d to the second, without a trailing "0s" when it is
// a whole number of minutes ("2h0m", "5m", "42s").
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	s := d.String()
	if d >= time.Minute && strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	return s
}

// onceLog remembers the keys a service complained about, so that a bad key
// is logged once, not every cycle. Memory and log stay bounded whatever
// other programs write: it remembers at most onceLogMax keys, as 64-bit
// hashes (a key's length does not matter), and never forgets them; a bad
// key beyond those is counted instead of logged, and endCycle logs the
// count ("N more bad members of working") when it changes, at most once
// per onceLogEvery.
type onceLog struct {
	mu   sync.Mutex
	seed maphash.Seed
	seen map[uint64]struct{}
	// more counts this cycle's bad keys that were not logged one by one;
	// told is the count the last summary gave, at toldAt.
	more, told int
	toldAt     time.Time
}

// onceLogMax bounds the keys an onceLog remembers (and so logs one by one).
const onceLogMax = 10000

// onceLogEvery is the least time between two summaries of one onceLog.
const onceLogEvery = time.Minute

// first reports whether key is complained about for the first time and
// should be logged on its own line.
func (o *onceLog) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seed, o.seen = maphash.MakeSeed(), map[uint64]struct{}{}
	}
	h := maphash.String(o.seed, key)
	if _, ok := o.seen[h]; ok {
		return false
	}
	if len(o.seen) >= onceLogMax {
		o.more++
		return false
	}
	o.seen[h] = struct{}{}
	return true
}

// endCycle ends one pass over what (a key or "keys"): when bad keys were
// left unlogged because onceLogMax were logged already, it says how many,
// once per change of that number and at most once per onceLogEvery.
func (o *onceLog) endCycle(log *slog.Logger, what string, now time.Time) {
	o.mu.Lock()
	n := o.more
	o.more = 0
	switch {
	case n == o.told:
		n = 0
	case n == 0:
		o.told = 0 // all gone: a later rise is news again
	case !o.toldAt.IsZero() && now.Sub(o.toldAt) < onceLogEvery:
		n = 0 // said recently; the next cycle after the pause says it
	default:
		o.told, o.toldAt = n, now
	}
	o.mu.Unlock()
	if n > 0 {
		log.Warn(fmt.Sprintf("%d more bad members of %s", n, what), "more", n,
			"logged_one_by_one", onceLogMax, "note", "not logged one by one; the count is said again when it changes")
	}
}

// serviceLog is the logger of one service: log (slog.Default() when nil)
// with service=name.
func serviceLog(log *slog.Logger, name string) *slog.Logger {
	if log == nil {
		log = slog.Default()
	}
	return log.With("service", name)
}

// addressed is a channel line addressed to nick ("NICK: line"), or the line
// alone when nick is "" (a job queued without one).
func addressed(nick, line string) string {
	if nick == "" {
		return line
	}
	return nick + ": " + line
}

// orDefault sets *v to def when it is zero or negative: a service built
// without a value (tests, tools) takes the default of package config, the
// one place defaults are spelled.
func orDefault[T cmp.Ordered](v *T, def T) {
	var zero T
	if *v <= zero {
		*v = def
	}
}

package coordinator

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/text"
)

// Announcer delivers report lines to IRC channels, or to the console. The
// IRC front end and the console implement it; the services in this package
// use it for finish reports, pipeline notices and death-timer warnings.
type Announcer interface {
	// Announce posts text in channel and returns nil only once the line
	// was written to the IRC socket (or printed, on the console). Any
	// error means the line was not delivered and the caller should keep
	// it for a later attempt — except ErrCannotDeliver, which means it
	// never will be. A channel the bot does not serve is never joined: the
	// front end posts the line in its report channel, saying where it was
	// meant to go.
	Announce(ctx context.Context, channel, text string) error
	// Channels lists the channels the bot serves (pipeline notices go to
	// all of them).
	Channels() []string
}

// ErrCannotDeliver is returned by Announce for a channel that cannot be
// joined, or that the bot does not serve when no report channel takes its
// lines: the caller logs the line and acknowledges it.
var ErrCannotDeliver = errors.New("channel cannot be joined")

// Helpers the services share.

// announceIn posts line in channel, or in every channel the bot serves
// when the job has none (it was queued from the console). The line is
// cleaned as untrusted text here, the one place the services clean text
// from Redis. Lines nobody can receive (ErrCannotDeliver) are logged and
// count as delivered; any other error means the line must be kept for a
// later attempt.
func announceIn(ctx context.Context, ann Announcer, log *slog.Logger, channel, line string) error {
	line = text.Clean(line, text.Untrusted)
	targets := []string{channel}
	if channel == "" {
		if chs := ann.Channels(); len(chs) > 0 {
			targets = chs
		}
	}
	for _, ch := range targets {
		err := ann.Announce(ctx, ch, line)
		if errors.Is(err, ErrCannotDeliver) {
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
// is logged once, not every cycle. It forgets everything when it holds too
// many, so memory stays bounded whatever other programs write.
type onceLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// onceLogMax bounds the keys an onceLog remembers.
const onceLogMax = 10000

// first reports whether key is complained about for the first time.
func (o *onceLog) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[key]; ok {
		return false
	}
	if o.seen == nil || len(o.seen) >= onceLogMax {
		o.seen = map[string]struct{}{}
	}
	o.seen[key] = struct{}{}
	return true
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

// FinishReport is one finish notice as a front end that combines reports
// sees it (see FinishAnnouncer).
type FinishReport struct {
	// Channel is where the job was started (started_in); pipelines write
	// it, so it may name any channel.
	Channel string
	Nick    string // who started the job (started_by), may be ""
	URL     string
	Ident   string
	Aborted bool
	// Line is the report as one line on its own:
	// "NICK: Your job for URL has finished. (IDENT)".
	Line string
}

// FinishAnnouncer is an Announcer that takes finish reports without
// waiting for each to be sent, so that reports which back up in a channel
// can be combined into fewer lines. The finish notifier uses it when the
// front end has it, and Announce otherwise.
type FinishAnnouncer interface {
	// AnnounceFinish queues r and returns at once. done is called exactly
	// once, from any goroutine: with nil once the line carrying r (alone
	// or combined with others) was written to the IRC socket, or with the
	// reason it was not (ErrCannotDeliver: it never will be). When ctx
	// ends, done is called soon.
	AnnounceFinish(ctx context.Context, r FinishReport, done func(error))
}

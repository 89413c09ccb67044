package news

import (
	"context"
	"errors"
)

// Announcer delivers report lines to IRC channels, or to the console. The
// IRC front end and the console implement it; the services (package
// coordinator) use it for finish reports, pipeline notices and death-timer
// warnings.
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

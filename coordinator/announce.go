package coordinator

import (
	"context"
	"errors"
)

// Announcer delivers report lines to IRC channels, or to the console. The
// IRC front end and the console implement it; the services in this package
// use it for finish reports, pipeline notices and death-timer warnings.
type Announcer interface {
	// Announce posts text in channel and returns nil only once the line
	// was written to the IRC socket (or printed, on the console). Any
	// error means the line was not delivered and the caller should keep
	// it for a later attempt — except ErrCannotDeliver, which means it
	// never will be (the channel cannot be joined).
	Announce(ctx context.Context, channel, text string) error
	// Channels lists the channels the bot serves (pipeline notices go to
	// all of them).
	Channels() []string
}

// ErrCannotDeliver is returned by Announce for a channel that cannot be
// joined: the caller logs the line and acknowledges it.
var ErrCannotDeliver = errors.New("channel cannot be joined")

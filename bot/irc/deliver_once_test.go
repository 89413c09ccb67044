package irc

import (
	"context"
	"testing"
	"time"
)

// gateLink is a connection whose writes signal when they start and
// complete only when released.
type gateLink struct {
	started chan struct{}
	release chan error
}

func (g *gateLink) write(ctx context.Context, line []byte) error {
	g.started <- struct{}{}
	return <-g.release
}

// TestSendWrittenWhileCancelled: a line the socket took while the sender's
// context ended was delivered; reporting it failed would have the caller
// (a finish notice, say) send it again, and the channel would read it
// twice. The lines not yet written are withdrawn, and then the send did
// fail.
func TestSendWrittenWhileCancelled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   int
		wantErr bool
	}{
		{"the last line", 1, false},
		{"a line with more after it", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One line a second: the second line cannot be picked
			// before the send withdraws it.
			o := newOutbox(1, 1)
			runOutbox(t, o)
			g := &gateLink{started: make(chan struct{}, 2), release: make(chan error, 2)}
			o.setLink(g, 1)
			var lines [][]byte
			for i := 0; i < tc.lines; i++ {
				l, _ := buildLine("PRIVMSG", "#c", "report")
				lines = append(lines, l)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- o.send(ctx, "k", 1, time.Time{}, false, lines...) }()
			<-g.started // the first line is being written
			cancel()
			time.Sleep(20 * time.Millisecond) // let send see the cancellation
			g.release <- nil                  // the socket took it
			err := <-done
			if (err != nil) != tc.wantErr {
				t.Errorf("send = %v; want an error: %v", err, tc.wantErr)
			}
			if n := o.sent.Load(); n != 1 {
				t.Errorf("%d lines written, want 1", n)
			}
		})
	}
}

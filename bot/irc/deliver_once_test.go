package irc

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/news"
	"github.com/google/go-cmp/cmp"
)

// gateLink is a connection whose writes signal when they start and
// complete only when released.
type gateLink struct {
	started chan struct{}
	release chan error
}

func (*gateLink) confirm(context.Context) error { return nil }

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

// flakyLink records the lines written to it and fails the writes whose
// number (from 1) is in fail.
type flakyLink struct {
	mu    sync.Mutex
	n     int
	fail  map[int]bool
	lines []string
}

func (*flakyLink) confirm(context.Context) error { return nil }

func (f *flakyLink) write(ctx context.Context, line []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.fail[f.n] {
		return errConnLost
	}
	f.lines = append(f.lines, string(line))
	return nil
}

// TestFinishReportSentWholeAfterPartialSend: a report too long for one
// line whose delivery failed after its first line went out is delivered
// again whole (at least once): the line written before the failure was
// never confirmed read by the server (TestFinishReportUnconfirmedAtReset),
// so it is sent again, and the channel may read it twice, never zero
// times.
func TestFinishReportSentWholeAfterPartialSend(t *testing.T) {
	c, _ := offlineClient(t, 0, 1)
	f := &flakyLink{fail: map[int]bool{2: true}}
	c.out.setLink(f, c.gen.Load())
	url := "https://example.com/" + strings.Repeat("long/", 200)
	r := news.FinishReport{Channel: "#chan", Nick: "alice", URL: url, Ident: "resume1",
		Line: "alice: Your job for " + url + " has finished."}
	deliver := func() error {
		done := make(chan error, 1)
		c.AnnounceFinish(context.Background(), r, func(err error) { done <- err })
		return <-done
	}
	if err := deliver(); err == nil {
		t.Fatal("first delivery: no error, but the second line failed")
	}
	if err := deliver(); err != nil {
		t.Fatalf("second delivery: %v", err)
	}
	want, err := messageLines("PRIVMSG", "#chan", "", r.Line, c.nickLen())
	if err != nil || len(want) < 3 {
		t.Fatalf("the report is %d lines (%v); the test wants at least 3", len(want), err)
	}
	wantStr := []string{string(want[0])} // the first attempt's first line
	for _, l := range want {
		wantStr = append(wantStr, string(l))
	}
	if diff := cmp.Diff(wantStr, f.lines); diff != "" {
		t.Errorf("lines written over both deliveries (-first line, then the whole report +got):\n%s", diff)
	}
}

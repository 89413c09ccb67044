package irc

import (
	"context"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/news"
)

// TestFinishReportUnconfirmedAtReset: a TCP
// reset discards what the server had not read yet, so a report whose
// line was written, but which the server never confirmed reading, is
// not delivered: its done gets an error and it is delivered again (the
// node acknowledged it as soon as it was written, and the channel never
// read it). Confirmed, it is delivered.
func TestFinishReportUnconfirmedAtReset(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#c"), nil)
	p := s.accept()
	welcome(h, p, "")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	p.Send(":ArchiveBot!u@h JOIN #c")

	// Confirmed: the server answers the PING after the line.
	r := news.FinishReport{Channel: "#c", Nick: "alice", URL: "https://example.com/", Ident: "conf1",
		Line: "alice: Your job for https://example.com/ has finished. (conf1)"}
	deliver := func() chan error {
		done := make(chan error, 1)
		h.client.AnnounceFinish(context.Background(), r, func(err error) { done <- err })
		return done
	}
	if err := <-deliver(); err != nil {
		t.Fatalf("a report the server confirmed: %v", err)
	}
	p.Expect("the first report", cmdIs("PRIVMSG", "#c", r.Line))

	// Unconfirmed: the server takes the line off the socket but never
	// answers; the connection is reset.
	p.HoldPings()
	r.Ident, r.Line = "conf2", "alice: Your job for https://example.com/ has finished. (conf2)"
	done := deliver()
	p.Expect("the second report written", cmdIs("PRIVMSG", "#c", r.Line))
	select {
	case err := <-done:
		t.Fatalf("the report was acknowledged (%v) before the server confirmed reading it", err)
	case <-time.After(200 * time.Millisecond):
	}
	p.Expect("a PING after it", cmdIs("PING"))
	p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a report the server never confirmed, on a connection that was reset, was acknowledged")
		}
	case <-time.After(waitFor):
		t.Fatal("the report's delivery did not end when the connection did")
	}

	// Delivered again on the next connection.
	p2 := s.accept()
	welcome(h, p2, "")
	p2.Expect("JOIN", cmdIs("JOIN", "#c"))
	p2.Send(":ArchiveBot!u@h JOIN #c")
	if err := <-deliver(); err != nil {
		t.Fatalf("delivered again: %v", err)
	}
	p2.Expect("the report again", cmdIs("PRIVMSG", "#c", r.Line))
}

// TestConfirmerCoalesces: callers that arrive while a PING is in flight
// wait for the next one (the one in flight may have left before their
// lines), sent when it is answered: a burst costs two PINGs, not one
// each. Other PONGs (ircevent's keepalive) are ignored; the end of the
// connection fails every waiter.
func TestConfirmerCoalesces(t *testing.T) {
	sent := make(chan string, 10)
	c := newConfirmer(func(l string) error { sent <- l; return nil })
	first := make(chan error, 1)
	go func() { first <- c.confirm(context.Background(), 5*time.Second) }()
	if got := <-sent; got != "PING :abconfirm-1" {
		t.Fatalf("first PING %q", got)
	}
	// Five more callers while PING 1 is in flight.
	rest := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func() { rest <- c.confirm(context.Background(), 5*time.Second) }()
	}
	// Once all six wait (each past its own chance to send), nothing
	// more was sent.
	testproc.Eventually(t, "six callers waiting", func() bool { w, _ := c.counts(); return w == 6 })
	select {
	case l := <-sent:
		t.Fatalf("%q sent while PING 1 was in flight", l)
	default:
	}
	c.pong("keepalive-123") // not ours
	c.pong("abconfirm-7")   // never sent
	_, looked := c.counts()
	c.pong("abconfirm-1")
	if err := <-first; err != nil {
		t.Fatalf("first caller: %v", err)
	}
	if got := <-sent; got != "PING :abconfirm-2" {
		t.Fatalf("second PING %q", got)
	}
	// Every caller has looked at PING 1's answer (woken by it): the
	// five that came during it still wait.
	testproc.Eventually(t, "every caller looked at PING 1's answer", func() bool { _, l := c.counts(); return l >= looked+6 })
	if w, _ := c.counts(); w != 5 {
		t.Fatalf("%d callers wait after PING 1's answer, want the 5 that came during it", w)
	}
	c.pong("abconfirm-2")
	for i := 0; i < 5; i++ {
		if err := <-rest; err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	select {
	case l := <-sent:
		t.Fatalf("%q sent with nobody waiting", l)
	default:
	}
	// The connection ends while a caller waits.
	last := make(chan error, 1)
	go func() { last <- c.confirm(context.Background(), 5*time.Second) }()
	<-sent
	c.end()
	if err := <-last; err == nil {
		t.Fatal("a caller waiting when the connection ended got nil")
	}
	if err := c.confirm(context.Background(), time.Second); err == nil {
		t.Fatal("confirm after the end got nil")
	}
}

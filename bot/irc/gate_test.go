package irc

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"
)

// A node whose leader lease ran out (Gate false) sends nothing
// more on its connection — no announcement, no PONG, no QUIT — and does
// not dial again.
func TestGateClosedSendsNothing(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	var open atomic.Bool
	open.Store(true)
	h := startBot(t, testIRCConfig(s.url(), "#c"), func(c *Client) { c.Gate = open.Load })
	p := s.accept()
	p.Expect("CAP LS", cmdIs("CAP", "LS"))
	p.Send(":fake CAP * LS :multi-prefix")
	p.Expect("CAP REQ", cmdIs("CAP", "REQ", "multi-prefix"))
	p.Send(":fake CAP * ACK :multi-prefix")
	nakOthers(p, "multi-prefix")
	p.Expect("USER", cmdIs("USER"))
	p.Expect("CAP END", cmdIs("CAP", "END"))
	welcome(h, p, "")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	p.Send(":ArchiveBot!u@h JOIN #c")
	if err := h.client.Announce(context.Background(), "#c", "before"); err != nil {
		t.Fatal(err)
	}
	p.Expect("the announcement", cmdIs("PRIVMSG", "#c", "before"))
	pos := p.Pos()

	open.Store(false)
	p.Send("PING :still-there")
	if err := h.client.Announce(context.Background(), "#c", "after"); err == nil {
		t.Error("Announce with the gate closed returned nil")
	}
	p.WaitClosed()
	h.stop()
	if got := p.Messages(pos); len(got) != 0 {
		t.Errorf("the bot sent %d lines after its gate closed: %v", len(got), lines(got))
	}
	select {
	case <-s.conns:
		t.Error("the bot dialed again with its gate closed")
	default:
	}
}

func lines(ms []ircmsg.Message) []string {
	var out []string
	for _, m := range ms {
		l, _ := m.Line()
		out = append(out, l)
	}
	return out
}

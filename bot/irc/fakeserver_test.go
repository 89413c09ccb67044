package irc

import (
	"context"
	"encoding/base64"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

// fakeServer accepts connections and hands each to the test as a peer
// it scripts line by line (ngircd has no SASL).
type fakeServer struct {
	t     *testing.T
	ln    net.Listener
	conns chan net.Conn
}

func newFakeServer(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, ln: ln, conns: make(chan net.Conn, 10)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns <- c
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *fakeServer) url() string { return "irc://" + s.ln.Addr().String() }

// accept waits for the bot's next connection.
func (s *fakeServer) accept() *irctest.User {
	s.t.Helper()
	select {
	case c := <-s.conns:
		return irctest.NewPeer(s.t, c, "server")
	case <-time.After(waitFor):
		s.t.Fatal("the bot did not connect")
		return nil
	}
}

func cmdIs(cmd string, params ...string) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		if m.Command != cmd || len(m.Params) < len(params) {
			return false
		}
		for i, p := range params {
			if m.Params[i] != p {
				return false
			}
		}
		return true
	}
}

// negotiate plays the server side of registration up to AUTHENTICATE.
func negotiate(t *testing.T, p *irctest.User, pass string) {
	t.Helper()
	if pass != "" {
		p.Expect("PASS", cmdIs("PASS", pass))
	}
	p.Expect("CAP LS", cmdIs("CAP", "LS"))
	p.Send(":fake CAP * LS :multi-prefix sasl")
	p.Expect("CAP REQ multi-prefix", cmdIs("CAP", "REQ", "multi-prefix"))
	p.Expect("CAP REQ sasl", cmdIs("CAP", "REQ", "sasl"))
	p.Send(":fake CAP * ACK :multi-prefix")
	p.Send(":fake CAP * ACK :sasl")
	nakOthers(p, "multi-prefix")
	p.Expect("NICK", cmdIs("NICK", "ArchiveBot"))
	p.Expect("USER", cmdIs("USER"))
	p.Expect("AUTHENTICATE PLAIN", cmdIs("AUTHENTICATE", "PLAIN"))
	p.Send("AUTHENTICATE +")
}

// nakOthers refuses every capability the bot asks for but those listed,
// as a server that lacks them does (ircevent waits for an answer to each
// request).
func nakOthers(p *irctest.User, acked ...string) {
	var nak []string
	for _, c := range requestCaps {
		if !slices.Contains(acked, c) {
			nak = append(nak, c)
		}
	}
	if len(nak) > 0 {
		p.Send(":fake CAP * NAK :%s", strings.Join(nak, " "))
	}
}

// welcome plays the server's answer to a registration: 001, the ISUPPORT
// line (005) unless isupport is empty, and the end of the MOTD; then it
// waits until the bot counts itself connected.
func welcome(h *harness, p *irctest.User, isupport string) {
	h.t.Helper()
	p.Line(":fake 001 ArchiveBot :Welcome")
	if isupport != "" {
		p.Line(":fake 005 ArchiveBot " + isupport + " :are supported")
	}
	p.Line(":fake 376 ArchiveBot :End of MOTD")
	h.waitState(true)
}

// joinWith plays the server's side of the bot joining channel (spelt as
// the server spells it): the JOIN echoed and the NAMES list of names.
func joinWith(p *irctest.User, channel, names string) {
	p.Line(":ArchiveBot!u@h JOIN " + channel)
	p.Line(":fake 353 ArchiveBot = " + channel + " :" + names)
	p.Line(":fake 366 ArchiveBot " + channel + " :End of /NAMES list.")
}

// TestSASLAndPassword: the bot sends the server password and logs in with
// SASL PLAIN before registering; ranks come from the server's PREFIX.
func TestSASLAndPassword(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	cfg := testIRCConfig(s.url(), "#c")
	cfg.Password = "server-pw"
	cfg.SASL = "botacct:s3cr:et"
	h := startBot(t, cfg, nil)
	p := s.accept()
	negotiate(t, p, "server-pw")
	m := p.Expect("SASL PLAIN response", cmdIs("AUTHENTICATE"))
	raw, err := base64.StdEncoding.DecodeString(m.Params[0])
	if err != nil || string(raw) != "botacct\x00botacct\x00s3cr:et" {
		t.Fatalf("SASL PLAIN response %q (%v)", raw, err)
	}
	p.Send(":fake 900 ArchiveBot ArchiveBot!u@h botacct :You are now logged in as botacct")
	p.Send(":fake 903 ArchiveBot :SASL authentication successful")
	p.Expect("CAP END", cmdIs("CAP", "END"))
	welcome(h, p, "PREFIX=(qaohv)~&@%+ CHANTYPES=#")

	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	// multi-prefix was acknowledged: several prefixes per name.
	joinWith(p, "#c", "~owner &admin %half +voice @+opvoice plain ArchiveBot")

	cases := []struct{ nick, text, want string }{
		{"owner", "!a < https://example.com/owner.txt", "owner: Queued"},
		{"admin", "!a < https://example.com/admin.txt", "admin: Queued"},
		{"half", "!a < https://example.com/half.txt", "half: Sorry, " + refuseOp},
		{"half", "!a https://example.com/half", "half: Queued"},
		{"voice", "!a https://example.com/voice", "voice: Queued"},
		{"plain", "!a https://example.com/plain", "plain: Sorry, " + refuseVoice},
	}
	for _, c := range cases {
		p.Send(":%s!u@h PRIVMSG #c :%s", c.nick, c.text)
		m := p.Expect("answer to "+c.nick, func(m ircmsg.Message) bool {
			return m.Command == "PRIVMSG" && len(m.Params) == 2 && strings.HasPrefix(m.Params[1], c.nick+": ")
		})
		if !strings.HasPrefix(m.Params[1], c.want) {
			t.Errorf("%s %q: got %q, want %q…", c.nick, c.text, m.Params[1], c.want)
		}
	}
	// After -o the op keeps the voice NAMES showed with multi-prefix, and
	// the bot does not need to ask NAMES again.
	p.Send(":owner!u@h MODE #c -o opvoice")
	p.Send(":opvoice!u@h PRIVMSG #c :!a < https://example.com/ov.txt")
	m = p.Expect("answer to opvoice", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) == 2 && strings.HasPrefix(m.Params[1], "opvoice: ")
	})
	if !strings.Contains(m.Params[1], refuseOp) {
		t.Errorf("de-opped user: %q", m.Params[1])
	}

	// Clean shutdown: QUIT.
	h.cancel()
	p.Expect("QUIT", cmdIs("QUIT"))
	p.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitFor):
		t.Error("Run did not return after QUIT")
	}
	h.cancel = nil
}

// TestSASLFailure: a refused login is not a registration; the bot tries
// again later, with backoff, and never pretends to be connected.
func TestSASLFailure(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	cfg := testIRCConfig(s.url(), "#c")
	cfg.SASL = "botacct:wrong"
	h := startBot(t, cfg, nil)
	for attempt := 0; attempt < 2; attempt++ {
		p := s.accept()
		negotiate(t, p, "")
		p.Expect("SASL PLAIN response", cmdIs("AUTHENTICATE"))
		p.Send(":fake 904 * :SASL authentication failed")
		p.WaitClosed() // the bot gives up on this connection
	}
	if h.client.Connected() {
		t.Error("Connected() after failed logins")
	}
	select {
	case up := <-h.events:
		t.Errorf("connection state changed to %v", up)
	default:
	}
}

// TestForcedJoinAndCaseMapping: a channel the
// server puts the bot in is left, and commands from it are ignored; a
// configured channel is recognised under the server's CASEMAPPING.
func TestForcedJoinAndCaseMapping(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#ops[1]"), nil)
	p := s.accept()
	p.Expect("NICK", cmdIs("NICK", "ArchiveBot"))
	welcome(h, p, "CASEMAPPING=rfc1459 CHANTYPES=#")
	p.Expect("JOIN", cmdIs("JOIN", "#ops[1]"))
	joinWith(p, "#OPS{1}", "@op ArchiveBot")
	// Forced into #victim, with its op.
	joinWith(p, "#victim", "@mallory ArchiveBot")
	p.Expect("PART #victim", cmdIs("PART", "#victim"))
	p.Send(":mallory!u@h PRIVMSG #victim :!a https://example.com/evil")
	p.Send(":op!u@h PRIVMSG #ops{1} :!a https://example.com/good")
	m := p.Expect("an answer", cmdIs("PRIVMSG"))
	if m.Params[0] != "#ops{1}" || !strings.HasPrefix(m.Params[1], "op: Queued https://example.com/good") {
		t.Errorf("answer %q", m.Params)
	}
	if got := h.rdb.LLen(context.Background(), "pending").Val(); got != 1 {
		t.Errorf("%d jobs pending, want 1 (only op's)", got)
	}
}

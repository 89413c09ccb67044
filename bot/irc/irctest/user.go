package irctest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
)

// User is a scripted IRC client over raw TCP (or, with NewPeer, the
// scripted server side of a connection). It answers PING by itself and
// records every other message it receives. The Expect family scans the
// recorded messages from a scan position on, waiting for new ones up to a
// deadline.
type User struct {
	t testing.TB
	// Nick is the user's nick; change it after a NICK the server accepted.
	Nick string
	conn net.Conn

	wmu sync.Mutex

	mu       sync.Mutex
	msgs     []ircmsg.Message
	raw      []string // the line each message was parsed from
	unparsed []string // lines ircmsg could not parse
	next     int      // expect scans from here
	seq      int      // Ask markers
	wake     chan struct{}
	closed   bool
	// holdPings: PINGs are recorded like other messages instead of
	// answered (a server that stopped reading, for the test).
	holdPings bool
}

// HoldPings stops answering PING: from now on PINGs are recorded as
// messages, unanswered, as by a server that has not read them.
func (u *User) HoldPings() {
	u.mu.Lock()
	u.holdPings = true
	u.mu.Unlock()
}

// Dial connects nick to the server at addr and waits for the end of
// registration.
func Dial(t testing.TB, addr, nick string) *User {
	t.Helper()
	u := Connect(t, addr, nick)
	u.Registered()
	return u
}

// Connect connects and sends the registration without waiting for it, so
// several users can register at once (ngircd's flood control pauses each
// new client for a second). Call Registered before using the user.
func Connect(t testing.TB, addr, nick string) *User {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, WaitFor)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", nick, addr, err)
	}
	u := NewPeer(t, conn, nick)
	u.Send("NICK %s", nick)
	u.Send("USER %s 0 * :test user", strings.ToLower(nick))
	return u
}

// NewPeer wraps an established connection (for example one a fake server
// accepted) and starts recording what arrives on it. name is used in
// messages. The connection is closed when the test ends.
func NewPeer(t testing.TB, conn net.Conn, name string) *User {
	u := &User{t: t, Nick: name, conn: conn, wake: make(chan struct{})}
	t.Cleanup(func() { conn.Close() })
	go u.read()
	return u
}

// Registered waits for the end of registration (001, then the end of the
// MOTD or its absence).
func (u *User) Registered() {
	u.t.Helper()
	u.Expect("welcome", func(m ircmsg.Message) bool { return m.Command == "001" })
	u.Expect("end of MOTD", func(m ircmsg.Message) bool { return m.Command == "376" || m.Command == "422" })
}

func (u *User) read() {
	sc := bufio.NewScanner(u.conn)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Text()
		m, err := ircmsg.ParseLine(line)
		if err != nil {
			u.mu.Lock()
			u.unparsed = append(u.unparsed, line)
			u.mu.Unlock()
			continue
		}
		u.mu.Lock()
		hold := u.holdPings
		u.mu.Unlock()
		if m.Command == "PING" && len(m.Params) > 0 && !hold {
			u.Send("PONG :%s", m.Params[0])
			continue
		}
		u.mu.Lock()
		u.msgs = append(u.msgs, m)
		u.raw = append(u.raw, line)
		close(u.wake)
		u.wake = make(chan struct{})
		u.mu.Unlock()
	}
	u.mu.Lock()
	u.closed = true
	close(u.wake)
	u.wake = make(chan struct{})
	u.mu.Unlock()
}

// Send formats one line (without CRLF) and sends it; without arguments
// format is sent as it is.
func (u *User) Send(format string, a ...any) {
	line := format
	if len(a) > 0 {
		line = fmt.Sprintf(format, a...)
	}
	u.Line(line)
}

// Line sends one line as it is, adding CRLF. A write error is reported
// with t.Errorf (safe from any goroutine).
func (u *User) Line(line string) {
	u.wmu.Lock()
	defer u.wmu.Unlock()
	if _, err := io.WriteString(u.conn, line+"\r\n"); err != nil {
		u.t.Errorf("%s: send %q: %v", u.Nick, line, err)
	}
}

// SendRaw writes bytes as they are (several lines at once).
func (u *User) SendRaw(data string) {
	u.wmu.Lock()
	defer u.wmu.Unlock()
	if _, err := io.WriteString(u.conn, data); err != nil {
		u.t.Errorf("%s: send: %v", u.Nick, err)
	}
}

// ExpectWithin returns the first message from the scan position on that
// matches, and moves the scan position past it. It fails the test when
// none arrives within d or the connection closes first.
func (u *User) ExpectWithin(d time.Duration, what string, pred func(ircmsg.Message) bool) ircmsg.Message {
	u.t.Helper()
	m, err := u.WaitWithin(d, what, pred)
	if err != nil {
		u.t.Fatal(err)
	}
	return m
}

// WaitWithin is ExpectWithin returning an error instead of failing the test.
func (u *User) WaitWithin(d time.Duration, what string, pred func(ircmsg.Message) bool) (ircmsg.Message, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		for i := u.next; i < len(u.msgs); i++ {
			if pred(u.msgs[i]) {
				m := u.msgs[i]
				u.next = i + 1
				u.mu.Unlock()
				return m, nil
			}
		}
		wake, closed := u.wake, u.closed
		u.mu.Unlock()
		if closed {
			return ircmsg.Message{}, fmt.Errorf("%s: connection closed while waiting for %s; got:\n%s", u.Nick, what, u.Dump())
		}
		select {
		case <-wake:
		case <-deadline.C:
			return ircmsg.Message{}, fmt.Errorf("%s: no %s within %v; got:\n%s", u.Nick, what, d, u.Dump())
		}
	}
}

// Expect is ExpectWithin(WaitFor, …).
func (u *User) Expect(what string, pred func(ircmsg.Message) bool) ircmsg.Message {
	u.t.Helper()
	return u.ExpectWithin(WaitFor, what, pred)
}

// WaitClosed waits until the other side closed the connection.
func (u *User) WaitClosed() {
	u.t.Helper()
	timer := time.NewTimer(WaitFor)
	defer timer.Stop()
	for {
		u.mu.Lock()
		wake, closed := u.wake, u.closed
		u.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			u.t.Fatalf("%s: connection still open", u.Nick)
		}
	}
}

// Closed reports whether the other side closed the connection.
func (u *User) Closed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closed
}

// Close closes the connection.
func (u *User) Close() { u.conn.Close() }

// Conn is the underlying connection.
func (u *User) Conn() net.Conn { return u.conn }

// Dump returns the last 40 messages received, one per line, for failure
// messages.
func (u *User) Dump() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	start := len(u.msgs) - 40
	if start < 0 {
		start = 0
	}
	for _, m := range u.msgs[start:] {
		l, _ := m.Line()
		b.WriteString("  " + strings.TrimSpace(l) + "\n")
	}
	return b.String()
}

// Mark moves the scan position to the end: later expects see only what
// arrives from now on.
func (u *User) Mark() {
	u.mu.Lock()
	u.next = len(u.msgs)
	u.mu.Unlock()
}

// Pos is the scan position: the index of the next message Expect looks at.
func (u *User) Pos() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.next
}

// SetPos moves the scan position (a value from Pos or Len).
func (u *User) SetPos(pos int) {
	u.mu.Lock()
	u.next = pos
	u.mu.Unlock()
}

// Messages returns a copy of the messages received from index from on.
func (u *User) Messages(from int) []ircmsg.Message {
	u.mu.Lock()
	defer u.mu.Unlock()
	if from > len(u.msgs) {
		from = len(u.msgs)
	}
	return append([]ircmsg.Message(nil), u.msgs[from:]...)
}

// RawLines returns the lines (without CRLF) the messages from index from on
// were parsed from.
func (u *User) RawLines(from int) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if from > len(u.raw) {
		from = len(u.raw)
	}
	return append([]string(nil), u.raw[from:]...)
}

// Unparsed returns the lines received that were not valid IRC messages.
func (u *User) Unparsed() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.unparsed...)
}

// Join joins channel and waits for the end of its NAMES list.
func (u *User) Join(channel string) {
	u.t.Helper()
	u.Send("JOIN %s", channel)
	u.Expect("end of NAMES for "+channel, func(m ircmsg.Message) bool {
		return m.Command == "366" && len(m.Params) > 1 && strings.EqualFold(m.Params[1], channel)
	})
}

// Say sends a PRIVMSG.
func (u *User) Say(target, text string) { u.Send("PRIVMSG %s :%s", target, text) }

// IsFrom reports whether m is a PRIVMSG from nick to target.
func IsFrom(m ircmsg.Message, nick, target string) bool {
	return m.Command == "PRIVMSG" && len(m.Params) == 2 && strings.EqualFold(m.Nick(), nick) && strings.EqualFold(m.Params[0], target)
}

// Reply waits for the bot's next answer to u: in channel, a line
// starting "nick: " (returned without that prefix); in private (channel
// ""), a private message.
func (u *User) Reply(botNick, channel string) string {
	u.t.Helper()
	if channel == "" {
		return u.Expect("private reply from "+botNick, func(m ircmsg.Message) bool { return IsFrom(m, botNick, u.Nick) }).Params[1]
	}
	prefix := u.Nick + ": "
	m := u.Expect("reply in "+channel, func(m ircmsg.Message) bool {
		return IsFrom(m, botNick, channel) && strings.HasPrefix(m.Params[1], prefix)
	})
	return strings.TrimPrefix(m.Params[1], prefix)
}

// AnyReply waits for the bot's next answer to u, in channel (prefixed) or
// in private: !pending answers privately even when asked in a channel.
func (u *User) AnyReply(botNick, channel string) string {
	u.t.Helper()
	prefix := u.Nick + ": "
	m := u.Expect("any reply from "+botNick, func(m ircmsg.Message) bool {
		if IsFrom(m, botNick, u.Nick) {
			return true
		}
		return channel != "" && IsFrom(m, botNick, channel) && strings.HasPrefix(m.Params[1], prefix)
	})
	return strings.TrimPrefix(m.Params[1], prefix)
}

// WaitBotIn waits until the bot joins channel, as u sees it.
func (u *User) WaitBotIn(botNick, channel string) {
	u.t.Helper()
	u.Expect(botNick+" joining "+channel, func(m ircmsg.Message) bool {
		return m.Command == "JOIN" && strings.EqualFold(m.Nick(), botNick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel)
	})
}

// Ask sends text where channel says ("" = privately to the bot) and
// returns every answer the bot gives to it, in channel or in private. A
// "!status" for an unknown ident follows it as a marker: the bot answers
// one user's commands in order, so the marker's answer ends the list.
func (u *User) Ask(botNick, channel, text string) []string {
	u.t.Helper()
	u.seq++
	marker := fmt.Sprintf("zzmark%d", u.seq)
	target := channel
	if channel == "" {
		target = botNick
	}
	u.Say(target, text)
	u.Say(target, "!status "+marker)
	var out []string
	for {
		r := u.AnyReply(botNick, channel)
		if strings.Contains(r, marker) {
			return out
		}
		out = append(out, r)
	}
}

// BotListed reports whether a NAMES reply u received for channel listed
// botNick (with any prefix).
func (u *User) BotListed(botNick, channel string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range u.msgs {
		if m.Command == "353" && len(m.Params) >= 4 && strings.EqualFold(m.Params[2], channel) {
			for _, name := range strings.Fields(m.Params[3]) {
				if strings.EqualFold(strings.TrimLeft(name, "~&@%+"), botNick) {
					return true
				}
			}
		}
	}
	return false
}

// WaitBotPresent waits until the bot is in channel: already listed in a
// NAMES reply u received, or joining (now or later).
func (u *User) WaitBotPresent(botNick, channel string) {
	u.t.Helper()
	if u.BotListed(botNick, channel) {
		return
	}
	u.mu.Lock()
	for _, m := range u.msgs {
		if m.Command == "JOIN" && strings.EqualFold(m.Nick(), botNick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel) {
			u.mu.Unlock()
			return
		}
	}
	u.mu.Unlock()
	u.WaitBotIn(botNick, channel)
}

// Len is the number of messages received so far (a position for
// Messages and SetPos).
func (u *User) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.msgs)
}

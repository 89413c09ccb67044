package irc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/news"
)

// fakeLink is a connection that records the bytes written to it.
type fakeLink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines int
	wrote chan []byte // if set, every line is also sent here
	block chan struct{}
	fail  error
}

func (*fakeLink) confirm(context.Context) error { return nil }

func (f *fakeLink) write(ctx context.Context, line []byte) error {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.fail != nil {
		return f.fail
	}
	f.mu.Lock()
	f.buf.Write(line)
	f.lines++
	f.mu.Unlock()
	if f.wrote != nil {
		f.wrote <- line
	}
	return nil
}

// wire returns what was written, as the server would split it into lines.
func (f *fakeLink) wire() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.buf.String()
	if s == "" {
		return nil
	}
	// A server ends a line at LF (CR optional) and also rejects NUL.
	return strings.Split(strings.TrimSuffix(s, "\r\n"), "\r\n")
}

func runOutbox(t *testing.T, o *outbox) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// offlineClient is a Client whose outbox writes to a fakeLink, with no
// server: enough to drive replies and announcements.
func offlineClient(t *testing.T, perSecond float64, burst int) (*Client, *fakeLink) {
	t.Helper()
	b, _, _ := newTestBot(t)
	cfg := testIRCConfig("irc://127.0.0.1:1", "#chan")
	cfg.MessagesPerSecond, cfg.Burst = perSecond, burst
	c := New(cfg, b, testLogger(t))
	f := &fakeLink{}
	runOutbox(t, c.out)
	gen := c.gen.Add(1)
	c.out.setLink(f, gen)
	c.connected.set(true)
	// Pretend we are in #chan.
	c.onMessage(parse(t, ":ArchiveBot!u@h JOIN #chan"))
	return c, f
}

func parse(t testing.TB, line string) ircmsg.Message {
	t.Helper()
	m, err := ircmsg.ParseLine(line)
	if err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	return m
}

// planted holds text that arrives from Redis or users and tries to break
// out of its line.
var planted = []string{
	"\r\nPRIVMSG #chan :x",
	"url\r\nPRIVMSG #chan :x",
	"nick\nQUIT :bye",
	"note\rKICK #chan someone",
	"a\x00b",
	"\x00\r\n\x00",
	"bad utf-8 \xff\xfe\r\nPRIVMSG #chan :x",
	strings.Repeat("\r\n", 300),
}

// TestOutboxPlantedText: CR, LF and NUL in any text never reach the wire
// as line breaks, through replies, private answers and announcements.
func TestOutboxPlantedText(t *testing.T) {
	c, f := offlineClient(t, 0, 1)
	req := bot.Request{Nick: "user", Channel: "#chan", Text: "!status"}
	r := &replier{c: c, req: req}
	sent := 0
	for _, p := range planted {
		r.Reply("job note: " + p)
		r.Private(p)
		if err := c.Announce(context.Background(), "#chan", "finished: "+p); err != nil {
			t.Fatalf("Announce: %v", err)
		}
		// Only length may split a text (the last one is long).
		for _, m := range []struct{ target, prefix, text string }{
			{"#chan", "user: ", "job note: " + p}, {"user", "", p}, {"#chan", "", "finished: " + p},
		} {
			ls, err := messageLines("PRIVMSG", m.target, m.prefix, m.text, c.nickLen())
			if err != nil {
				t.Fatal(err)
			}
			sent += len(ls)
		}
	}
	if !c.waitReplies(context.Background()) {
		t.Fatal("answers not sent")
	}
	lines := f.wire()
	if len(lines) != sent {
		t.Fatalf("texts that make %d lines became %d lines on the wire:\n%q", sent, len(lines), lines)
	}
	if sent <= 3*len(planted) {
		t.Errorf("%d lines: the 600 control characters (1,800 bytes once replaced) should need several lines", sent)
	}
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n\x00") {
			t.Errorf("line carries a control character: %q", l)
		}
		m, err := ircmsg.ParseLine(l)
		if err != nil || m.Command != "PRIVMSG" || len(m.Params) != 2 {
			t.Errorf("line %q is not one PRIVMSG: %v", l, err)
			continue
		}
		if m.Params[0] != "#chan" && m.Params[0] != "user" {
			t.Errorf("line %q goes to %q", l, m.Params[0])
		}
		if !utf8.ValidString(m.Params[1]) {
			t.Errorf("line %q is not UTF-8", l)
		}
	}
}

// TestMessageLinesSplit: a long answer is split on UTF-8 boundaries into
// lines the server can relay (≤ 512 bytes with its prefix), every line
// keeps the "nick: " prefix, and nothing is lost.
func TestMessageLinesSplit(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 2000; i++ {
		fmt.Fprintf(&b, "word%d é日本語🙂 https://example.com/%d/ ", i, i)
	}
	text := strings.TrimSpace(b.String())
	for _, nickLen := range []int{0, 9, 31, 64} {
		for _, target := range []string{"#c", "#a-rather-long-channel-name-for-testing", "someone"} {
			lines, err := messageLines("PRIVMSG", target, "nickname: ", text, nickLen)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) < 5 {
				t.Errorf("2000 bytes in %d lines?", len(lines))
			}
			var got strings.Builder
			for _, l := range lines {
				if n := relayPrefixLen(nickLen) + len(l); n > maxLineLen {
					t.Errorf("relayed line would be %d bytes: %q", n, l)
				}
				m := parse(t, string(l))
				body := m.Params[1]
				if !strings.HasPrefix(body, "nickname: ") {
					t.Errorf("line without prefix: %q", body)
				}
				body = strings.TrimPrefix(body, "nickname: ")
				if !utf8.ValidString(body) {
					t.Errorf("split inside a character: %q", body)
				}
				got.WriteString(body)
			}
			if got.String() != text {
				t.Errorf("nickLen %d target %s: reassembled text differs:\n got %q\nwant %q", nickLen, target, got.String(), text)
			}
		}
	}

	// Far too long: shortened, saying so, instead of flooding.
	huge := strings.Repeat("x", 20000)
	lines, err := messageLines("PRIVMSG", "#c", "n: ", huge, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != maxReplyLines || !strings.Contains(string(lines[len(lines)-1]), "answer shortened") {
		t.Errorf("20000 bytes: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestOutboxRate(t *testing.T) {
	o := newOutbox(40, 2)
	runOutbox(t, o)
	f := &fakeLink{}
	o.setLink(f, 1)
	lines := make([][]byte, 12)
	for i := range lines {
		lines[i], _ = buildLine("PRIVMSG", "#c", fmt.Sprint(i))
	}
	start := time.Now()
	if err := o.send(context.Background(), "k", 0, time.Time{}, false, lines...); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// 2 at once, then 10 more at 40/s.
	if min := 10 * time.Second / 40; elapsed < min*9/10 {
		t.Errorf("12 lines at 40/s burst 2 took %v, want ≥ %v", elapsed, min)
	}
	if f.lines != 12 {
		t.Errorf("%d lines written", f.lines)
	}
}

// TestOutboxFairness: one user's long answer does not hold up another's.
func TestOutboxFairness(t *testing.T) {
	o := newOutbox(200, 1)
	f := &fakeLink{wrote: make(chan []byte, 100)}
	var items []*item
	for i := 0; i < 10; i++ {
		l, _ := buildLine("PRIVMSG", "#c", fmt.Sprint("a", i))
		it := &item{line: l, key: "a"}
		o.enqueue(it, false)
		items = append(items, it)
	}
	l, _ := buildLine("PRIVMSG", "#c", "b")
	o.enqueue(&item{line: l, key: "b"}, false)
	o.setLink(f, 1)
	runOutbox(t, o)
	var order []string
	for i := 0; i < 11; i++ {
		order = append(order, parse(t, string(<-f.wrote)).Params[1])
	}
	if order[1] != "b" {
		t.Errorf("order %v: b should go second", order)
	}
	for i, it := range items {
		if err := <-it.done; err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
}

func TestOutboxConnectionLoss(t *testing.T) {
	o := newOutbox(0, 1)
	runOutbox(t, o)
	line, _ := buildLine("PRIVMSG", "#c", "x")

	// No connection: lines bound to one fail at once.
	it := &item{line: line, gen: 1}
	o.enqueue(it, false)
	if err := <-it.done; !errors.Is(err, errNotConnected) {
		t.Errorf("bound line without a connection: %v", err)
	}

	// Unbound lines wait for a connection; expired ones are dropped
	// while there is none (within a second).
	waiting := &item{line: line}
	expired := &item{line: line, expires: time.Now().Add(-time.Second)}
	o.enqueue(waiting, false)
	o.enqueue(expired, false)
	if err := <-expired.done; !errors.Is(err, errExpired) {
		t.Errorf("expired line: %v", err)
	}
	// Connected, a line past its expiry still goes out: it only waited
	// behind others.
	late := &item{line: line, expires: time.Now().Add(-time.Second)}
	block := make(chan struct{})
	f := &fakeLink{block: block}
	o.setLink(f, 2)
	// The outbox takes the first line and blocks writing it; bound lines
	// queued behind it fail when the connection goes.
	bound := &item{line: line, gen: 2}
	o.enqueue(bound, false)
	o.dropLink(2)
	if err := <-bound.done; !errors.Is(err, errConnLost) {
		t.Errorf("bound line after the connection dropped: %v", err)
	}
	close(block)
	o.setLink(f, 3)
	if err := <-waiting.done; err != nil {
		t.Errorf("waiting line: %v", err)
	}
	o.enqueue(late, false)
	if err := <-late.done; err != nil {
		t.Errorf("a line past its expiry while connected: %v", err)
	}
}

// TestOutboxCompletion: send returns only once the line was written, and
// a cancelled send withdraws what was not written.
func TestOutboxCompletion(t *testing.T) {
	o := newOutbox(0, 1)
	runOutbox(t, o)
	block := make(chan struct{})
	f := &fakeLink{block: block}
	o.setLink(f, 1)
	l1, _ := buildLine("PRIVMSG", "#c", "1")
	l2, _ := buildLine("PRIVMSG", "#c", "2")
	done := make(chan error, 1)
	go func() { done <- o.send(context.Background(), "k", 1, time.Time{}, false, l1) }()
	select {
	case err := <-done:
		t.Fatalf("send returned %v before the line was written", err)
	case <-time.After(50 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- o.send(ctx, "k", 1, time.Time{}, false, l2) }()
	cancel()
	if err := <-done2; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled send: %v", err)
	}
	close(block)
	if err := <-done; err != nil {
		t.Errorf("send: %v", err)
	}
	if got := f.wire(); len(got) != 1 || !strings.HasSuffix(got[0], ":1") && !strings.HasSuffix(got[0], " 1") {
		t.Errorf("wire = %q, want only line 1", got)
	}
}

// TestAnnounceOffline: without a connection Announce fails at once.
func TestAnnounceOffline(t *testing.T) {
	b, _, _ := newTestBot(t)
	c := New(config.IRC{Server: "irc://127.0.0.1:1", Nick: "ArchiveBot", Channels: []string{"#a", "#b key"}}, b, testLogger(t))
	start := time.Now()
	err := c.Announce(context.Background(), "#a", "x")
	if err == nil || errors.Is(err, news.ErrCannotDeliver) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("Announce offline: %v after %v", err, time.Since(start))
	}
	if got := strings.Join(c.Channels(), ","); got != "#a,#b" {
		t.Errorf("Channels() = %q", got)
	}
	if c.Connected() {
		t.Error("Connected() before Run")
	}
}

func TestThrottle(t *testing.T) {
	th := newThrottle(3)
	t0 := time.Unix(1000, 0)
	type step struct {
		at         time.Duration
		privileged bool
		ok         bool
	}
	steps := []step{
		{0, false, true}, {time.Second, false, true}, {2 * time.Second, false, true},
		{3 * time.Second, false, false}, // refused (the client says so)
		{4 * time.Second, false, false},
		{5 * time.Second, true, true}, // voiced: ten times the limit
		{59 * time.Second, false, false},
		{60 * time.Second, false, false}, // the first one left the window, 3 remain
		{61 * time.Second, false, true},  // the second left too
		{62 * time.Second, false, true},
		{63 * time.Second, false, false},
	}
	for _, s := range steps {
		if ok := th.allow("nick", s.privileged, t0.Add(s.at)); ok != s.ok {
			t.Errorf("at %v (privileged %v): ok=%v, want %v", s.at, s.privileged, ok, s.ok)
		}
	}
	for i := 0; i < 27; i++ {
		if !th.allow("nick", true, t0.Add(64*time.Second)) {
			t.Fatalf("voiced command %d refused: ten times the limit must fit", i)
		}
	}
	if th.allow("nick", true, t0.Add(64*time.Second)) {
		t.Error("voiced users have no limit at all")
	}
	// A nick change keeps the window.
	th.rename("nick", "newnick")
	if th.allow("newnick", false, t0.Add(64*time.Second)) {
		t.Error("renaming reset the throttle")
	}
	if !th.allow("other", false, t0.Add(64*time.Second)) {
		t.Error("another user is throttled")
	}
	if !newThrottle(0).allow("x", false, t0) {
		t.Error("limit 0 should not throttle")
	}
}

// TestDispatcher: a slow command holds only its own user; each user's
// commands run in order.
func TestDispatcher(t *testing.T) {
	d := newDispatcher(2, 64, testLogger(t))
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	rec := func(s string) func() {
		return func() {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
	}
	d.submit("slow", func() { <-release })
	d.submit("slow", rec("slow-2"))
	done := make(chan struct{})
	for i := 0; i < 5; i++ {
		d.submit("fast", rec(fmt.Sprint("fast-", i)))
	}
	d.submit("fast", func() { close(done) })
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("a slow command blocked another user")
	}
	d.submit("boom", func() { panic("handler bug") })
	close(release)
	slowDone := make(chan struct{})
	d.submit("slow", func() { close(slowDone) })
	<-slowDone
	d.stop()
	d.wait(context.Background())
	want := "fast-0 fast-1 fast-2 fast-3 fast-4 slow-2"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	if err := d.submit("x", func() {}); err != errStopped {
		t.Errorf("submit after stop: %v, want errStopped", err)
	}
}

func TestBackoff(t *testing.T) {
	c := New(config.IRC{Nick: "x"}, nil, nil)
	c.backoffMin, c.backoffMax = time.Second, 30*time.Second
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		for range 20 {
			d := c.backoff().Wait(n)
			if d < want/2 || d > want {
				t.Errorf("backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
	c.backoff().Wait(1 << 20) // no overflow
}

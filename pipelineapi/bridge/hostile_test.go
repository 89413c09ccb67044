package bridge

// What a hostile or broken client can send the bridge.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// rawConn dials addr; its reads give up after 10 s so that a bridge that
// keeps the connection open fails the test instead of hanging it.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return nc
}

// send writes s and ends the client's side (the bridge reads on for a
// moment after refusing a request, until the client is done).
func send(nc net.Conn, s string) {
	io.WriteString(nc, s)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// readAll reads until the bridge closes the connection; closed is false
// when the read gave up instead.
func readAll(nc net.Conn) (got string, closed bool) {
	b, err := io.ReadAll(nc)
	if err == nil {
		return string(b), true
	}
	var ne net.Error
	if ok := asNetErr(err, &ne); ok && ne.Timeout() {
		return string(b), false
	}
	return string(b), true // a reset is a close too
}

func asNetErr(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

func takes(node *fakeNode) []string {
	var out []string
	for _, c := range node.callList() {
		if strings.HasPrefix(c, "take") {
			out = append(out, c)
		}
	}
	return out
}

// TestHTTPRequestRunsNothing: an HTTP POST whose body is
// Redis commands, as a web page can make a browser send, closes the
// connection at its request line, as Redis does, and runs none of them;
// an inline command is refused and closes the connection too.
func TestHTTPRequestRunsNothing(t *testing.T) {
	node := newFakeNode()
	node.queue("pending", "j1", nil)
	b, addr := startBridge(t, node)
	body := "PING\r\nSCAN 0 MATCH pending:*\r\nRPOPLPUSH pending working\r\n"
	for _, req := range []string{
		"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body,
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"Host: x\r\n" + body,
	} {
		nc := rawConn(t, addr)
		send(nc, req)
		got, closed := readAll(nc)
		if !closed {
			t.Errorf("%.20q…: the connection stays open", req)
		}
		if strings.Contains(got, "PONG") || strings.Contains(got, "j1") {
			t.Errorf("%.20q…: the body's commands ran: %q", req, got)
		}
	}
	if tk := takes(node); len(tk) > 0 {
		t.Errorf("an HTTP request took a job: %q", tk)
	}
	// A RESP command first, then an HTTP line: the command is answered,
	// then the connection ends.
	nc := rawConn(t, addr)
	send(nc, "*1\r\n$4\r\nPING\r\nPOST / HTTP/1.1\r\n*3\r\n$9\r\nRPOPLPUSH\r\n$7\r\npending\r\n$7\r\nworking\r\n")
	if got, closed := readAll(nc); got != "+PONG\r\n" || !closed {
		t.Errorf("PING then POST: %q, closed %v; want +PONG then the close", got, closed)
	}
	// Inline commands: refused with an error, and the connection closes.
	nc = rawConn(t, addr)
	send(nc, "PING\r\nRPOPLPUSH pending working\r\n")
	if got, closed := readAll(nc); !strings.HasPrefix(got, "-ERR Protocol error: inline commands are refused") || !closed {
		t.Errorf("inline PING: %q, closed %v", got, closed)
	}
	if tk := takes(node); len(tk) > 0 {
		t.Errorf("an inline command took a job: %q", tk)
	}
	st := b.Stats()
	if st["refused:protocol_http"] != 4 || st["refused:protocol_inline"] != 1 {
		t.Errorf("refusals not counted: %v", st)
	}
	// The bridge still serves.
	c := dial(t, addr)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the attacks: %v", err)
	}
}

// TestHugeLengths: lengths that overflow or are over the
// limits are refused as soon as their header is read, before anything is
// allocated for them; the connection that sent them is closed and the
// bridge goes on.
func TestHugeLengths(t *testing.T) {
	node := newFakeNode()
	b, addr := startBridge(t, node)
	ctx := context.Background()
	c := dial(t, addr)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"*1\r\n$9223372036854775805\r\n", "an argument of 9223372036854775805 bytes"},
		{"*1\r\n$1000000000\r\n", "an argument of 1000000000 bytes"},
		{"*1\r\n$99999999999999999999999\r\n", "invalid bulk length"},
		{"*9223372036854775807\r\n", "9223372036854775807 arguments"},
		{"*2000000\r\n$1\r\n", "2000000 arguments"},
		{"*1\r\n$-5\r\n", "invalid bulk length"},
		{"*1\r\n$" + strings.Repeat("1", 40) + "\r\n", "too big $ line"},
		{"*3\r\n$4\r\nECHO\r\n$524288\r\n" + strings.Repeat("x", 524288) + "\r\n$524288\r\n", "a command of more than 1048576 bytes"},
	} {
		nc := rawConn(t, addr)
		send(nc, tc.in)
		got, closed := readAll(nc)
		if !strings.HasPrefix(got, "-ERR Protocol error: ") || !strings.Contains(got, tc.want) || !closed {
			t.Errorf("%.40q: %.200q, closed %v; want a protocol error with %q and the close", tc.in, got, closed, tc.want)
		}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING on another connection after the attacks: %v", err)
	}
	if n := b.Stats()["refused:protocol_too_large"]; n != 5 {
		t.Errorf("refused:protocol_too_large = %d, want 5: %v", n, b.Stats())
	}
	// The largest argument allowed still goes through.
	big := strings.Repeat("y", 512<<10) // DefaultMaxArg
	if s, err := c.Echo(ctx, big).Result(); err != nil || s != big {
		t.Errorf("ECHO of %d bytes: %d bytes, %v", len(big), len(s), err)
	}
}

// panicNode panics on take.
type panicNode struct{ *fakeNode }

func (p panicNode) Take(context.Context, wire.TakeRequest) (*wire.Job, error) {
	var m map[string]int
	m["boom"]++ // a nil map: the kind of bug a recover must contain
	return nil, nil
}

// TestPanicEndsOnlyItsConnection: a panic while serving one
// connection closes that connection, after telling it; the bridge and
// its other connections go on.
func TestPanicEndsOnlyItsConnection(t *testing.T) {
	node := newFakeNode()
	b, addr := startBridge(t, panicNode{node})
	ctx := context.Background()
	other := dial(t, addr)
	if err := other.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	nc := rawConn(t, addr)
	send(nc, "*3\r\n$9\r\nRPOPLPUSH\r\n$7\r\npending\r\n$7\r\nworking\r\n")
	got, closed := readAll(nc)
	if !strings.HasPrefix(got, "-ERR internal error") || !closed {
		t.Errorf("the panicking connection got %q, closed %v", got, closed)
	}
	if err := other.Ping(ctx).Err(); err != nil {
		t.Fatalf("another connection after the panic: %v", err)
	}
	if n := b.Stats()["panic"]; n != 1 {
		t.Errorf("panic counted %d times", n)
	}
}

// TestRefusalStatsBounded: refusals of command names a
// client invents are counted under one name.
func TestRefusalStatsBounded(t *testing.T) {
	node := newFakeNode()
	b, addr := startBridge(t, node)
	ctx := context.Background()
	c := dial(t, addr)
	for i := range 500 {
		if err := c.Do(ctx, fmt.Sprintf("INVENTED%d", i), "x").Err(); err == nil || !strings.Contains(err.Error(), "is refused") {
			t.Fatalf("invented command: %v", err)
		}
	}
	c.Do(ctx, "FLUSHALL")
	st := b.Stats()
	if len(st) > 5 || st["refused:other"] != 500 || st["refused:flushall"] != 1 {
		t.Errorf("stats after 500 invented commands: %d counters, refused:other %d, refused:flushall %d",
			len(st), st["refused:other"], st["refused:flushall"])
	}
}

// pipeListener serves net.Pipe connections: a client that does not read
// blocks the bridge's writes to it at once (no socket buffer).
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial(t *testing.T) net.Conn {
	a, b := net.Pipe()
	l.conns <- b
	t.Cleanup(func() { a.Close() })
	a.SetDeadline(time.Now().Add(10 * time.Second))
	return a
}

// readFrames reads n RESP replies of subscribe mode (arrays of bulk
// strings and integers) and returns their lines.
func readFrames(rd *bufio.Reader, n int) ([]string, error) {
	var out []string
	for range n {
		line, err := rd.ReadString('\n')
		if err != nil {
			return out, err
		}
		var k int
		fmt.Sscanf(line, "*%d", &k)
		parts := []string{}
		for range k {
			l, err := rd.ReadString('\n')
			if err != nil {
				return out, err
			}
			if strings.HasPrefix(l, "$") {
				v, err := rd.ReadString('\n')
				if err != nil {
					return out, err
				}
				l = v
			}
			parts = append(parts, strings.TrimPrefix(strings.TrimSpace(l), ":"))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out, nil
}

func subscribeCmd(ch string) string {
	return fmt.Sprintf("*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", len(ch), ch)
}

// TestStalledSubscriber: a subscriber that stops reading
// neither stalls the control stream nor the other subscribers; it is
// closed once its queue is full.
func TestStalledSubscriber(t *testing.T) {
	node := newFakeNode()
	node.events = make(chan client.Event) // unbuffered: a send returns once the bridge took the event
	for _, id := range []string{"j1", "j2"} {
		node.queue("pending", id, nil)
		node.held[id] = true
	}
	ln := newPipeListener()
	b := New(Config{Node: node, RetryFor: 2 * time.Second})
	done := make(chan struct{})
	go func() { defer close(done); b.Serve(ln) }()
	t.Cleanup(func() { b.Close(); <-done })

	stalled := ln.dial(t)
	io.WriteString(stalled, subscribeCmd("archivebot:job:j1"))
	if got, err := readFrames(bufio.NewReader(stalled), 1); err != nil || got[0] != "subscribe archivebot:job:j1 1" {
		t.Fatalf("stalled subscriber's SUBSCRIBE: %q, %v", got, err)
	}
	reader := ln.dial(t)
	rd := bufio.NewReader(reader)
	io.WriteString(reader, subscribeCmd("archivebot:job:j2"))
	if got, err := readFrames(rd, 1); err != nil || got[0] != "subscribe archivebot:job:j2 1" {
		t.Fatalf("SUBSCRIBE: %q, %v", got, err)
	}
	// The stalled subscriber reads nothing more: settings changes for its
	// job, then one for the other job.
	settings := func(ident string, age int64) {
		d, _ := json.Marshal(wire.Settings{Ident: ident, Age: age})
		select {
		case node.events <- client.Event{Name: wire.EventSettings, Data: d}:
		case <-time.After(10 * time.Second):
			t.Fatalf("the control stream stalled: settings %s %d not taken", ident, age)
		}
	}
	// Over the default queue of 256, twice: one batch in the writer, one
	// queue full.
	for age := range int64(600) {

		settings("j1", age+1)
	}
	settings("j2", 7)
	got, err := readFrames(rd, 1)
	if err != nil || got[0] != "message archivebot:job:j2 7" {
		t.Fatalf("the other subscriber got %q, %v; want its message", got, err)
	}
	if n := b.Stats()["subscriber_overflow"]; n != 1 {
		t.Errorf("subscriber_overflow = %d, want 1: %v", n, b.Stats())
	}
	// The stalled one was closed: what it reads now ends.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(stalled); err != nil {
		t.Errorf("the stalled subscriber was not closed: %v", err)
	}
}

// TestRevocationDropsCache: once the control stream says the
// key is revoked, the bridge no longer answers reads from its cache.
func TestRevocationDropsCache(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	node.events = make(chan client.Event)
	node.queue("pending", "j1", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{Node: node, RetryFor: 1, CacheFor: time.Hour})
	done := make(chan struct{})
	go func() { defer close(done); b.Serve(ln) }()
	t.Cleanup(func() { b.Close(); <-done })
	c := dial(t, ln.Addr().String())
	if id := takeCycle(ctx, t, c, "pending"); id != "j1" {
		t.Fatalf("take = %q", id)
	}
	if u, err := c.HGet(ctx, "j1", "url").Result(); err != nil || u != "http://example.com/j1" {
		t.Fatalf("HGET url = %q, %v", u, err)
	}
	node.mu.Lock()
	node.fail = &client.Error{Status: 403, Code: "revoked_key", Reason: "the key was revoked"}
	node.mu.Unlock()
	bye, _ := json.Marshal(wire.Error{Error: "revoked_key", Reason: "the key was revoked"})
	node.events <- client.Event{Name: wire.EventBye, Data: bye}
	node.events <- client.Event{Name: "ping"} // taken once the bye was handled
	if u, err := c.HGet(ctx, "j1", "url").Result(); err == nil || !strings.Contains(err.Error(), "revoked_key") {
		t.Errorf("HGET after the revocation = %q, %v; want the node's revoked_key", u, err)
	}
}

// TestWrongNodeAddressReply: a refusal that is not the API's
// (the node's web port answering 405) tells the pipeline to check -node.
func TestWrongNodeAddressReply(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&client.Error{Status: 405, Code: "method PUT not allowed: this API is read-only (GET)"}, "pipelines.listen address"},
		{&client.Error{Status: 502, Code: "http_502", Reason: "<html>Bad Gateway</html>"}, "pipelines.listen address"},
		{&client.Error{Status: 403, Code: "not_held", Reason: "job x is not held by this key"}, "node refused (403 not_held)"},
	} {
		if got := nodeReply(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("nodeReply(%v) = %q, want %q in it", tc.err, got, tc.want)
		}
	}
}

// failingListener fails its first accepts (a process out of descriptors),
// then hands out pipe connections.
type failingListener struct {
	*pipeListener
	mu    sync.Mutex
	fails int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.fails > 0 {
		l.fails--
		l.mu.Unlock()
		return nil, errors.New("accept: too many open files")
	}
	l.mu.Unlock()
	return l.pipeListener.Accept()
}

// TestAcceptFailures: failed accepts are waited out with the accept
// backoff (5 ms doubling), not spun on, and the bridge serves the next
// connection.
func TestAcceptFailures(t *testing.T) {
	if w := [3]time.Duration{acceptBackoff.Wait(0), acceptBackoff.Wait(1), acceptBackoff.Wait(20)}; w != [3]time.Duration{5 * time.Millisecond, 10 * time.Millisecond, time.Second} {
		t.Errorf("accept waits %v, want 5ms, 10ms, then 1s", w)
	}
	ln := &failingListener{pipeListener: newPipeListener(), fails: 4}
	b := New(Config{Node: newFakeNode(), RetryFor: 2 * time.Second})
	done := make(chan struct{})
	go func() { defer close(done); b.Serve(ln) }()
	t.Cleanup(func() { b.Close(); <-done })
	c := ln.dial(t)
	io.WriteString(c, "*1\r\n$4\r\nPING\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING after failed accepts: %q, %v", line, err)
	}
}

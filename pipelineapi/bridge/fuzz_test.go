package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tidwall/redcon"
)

// fakeConn is a redcon.Conn that counts top-level replies.
type fakeConn struct {
	ctx      any
	pipeline []redcon.Command
	replies  int
	stack    []int // elements still to come of the open arrays
	detached bool
	closed   bool
}

func (c *fakeConn) value() {
	if n := len(c.stack); n > 0 {
		c.stack[n-1]--
		for len(c.stack) > 0 && c.stack[len(c.stack)-1] == 0 {
			c.stack = c.stack[:len(c.stack)-1]
		}
		return
	}
	c.replies++
}

func (c *fakeConn) RemoteAddr() string             { return "127.0.0.1:1" }
func (c *fakeConn) Close() error                   { c.closed = true; return nil }
func (c *fakeConn) WriteError(string)              { c.value() }
func (c *fakeConn) WriteString(string)             { c.value() }
func (c *fakeConn) WriteBulk([]byte)               { c.value() }
func (c *fakeConn) WriteBulkString(string)         { c.value() }
func (c *fakeConn) WriteInt(int)                   { c.value() }
func (c *fakeConn) WriteInt64(int64)               { c.value() }
func (c *fakeConn) WriteUint64(uint64)             { c.value() }
func (c *fakeConn) WriteNull()                     { c.value() }
func (c *fakeConn) WriteRaw([]byte)                { c.value() }
func (c *fakeConn) WriteAny(any)                   { c.value() }
func (c *fakeConn) Context() any                   { return c.ctx }
func (c *fakeConn) SetContext(v any)               { c.ctx = v }
func (c *fakeConn) SetReadBuffer(int)              {}
func (c *fakeConn) ReadPipeline() []redcon.Command { p := c.pipeline; c.pipeline = nil; return p }
func (c *fakeConn) PeekPipeline() []redcon.Command { return c.pipeline }
func (c *fakeConn) NetConn() net.Conn              { return nil }
func (c *fakeConn) WriteBulkFrom(int64, io.Reader) { c.value() }
func (c *fakeConn) WriteArray(n int) {
	c.value()
	if n > 0 {
		c.stack = append(c.stack, n)
	}
}
func (c *fakeConn) Detach() redcon.DetachedConn {
	c.detached = true
	return &fakeDetached{fakeConn: c}
}

type fakeDetached struct{ *fakeConn }

func (d *fakeDetached) ReadCommand() (redcon.Command, error) { return redcon.Command{}, net.ErrClosed }
func (d *fakeDetached) Flush() error                         { return nil }

// Close of a detached connection comes from the subscriber's goroutines:
// it must not touch what the test reads.
func (d *fakeDetached) Close() error { return nil }

// FuzzCommands feeds command sequences (arguments separated by NUL,
// commands by newline) to the bridge's translation, as one pipelined
// batch, with a node where the pipeline holds job j1 and another key holds
// j9. Whatever comes: no panic, exactly one reply per command, no write
// for a job the pipeline does not hold, and nothing reaches the node for
// a command the bridge refuses.
func FuzzCommands(f *testing.F) {
	for _, s := range []string{
		"SCAN\x000\x00MATCH\x00pending:*\nRPOPLPUSH\x00pending\x00working",
		"HMSET\x00j1\x00started_at\x001.5\x00pipeline_id\x00pipeline:x\nHGETALL\x00j1",
		"HINCRBY\x00j1\x00heartbeat\x001",
		"SCRIPT\x00EXISTS\x00" + SHALog + "\nEVALSHA\x00" + SHALog + "\x001\x00j1\x00{\"type\":\"stdout\"}\x00updates\x00j1_log\nHINCRBY\x00j1\x00bytes_downloaded\x0010",
		"EVALSHA\x00" + SHALog + "\x001\x00j9\x00{}\x00updates\x00j9_log",
		"HMGET\x00j1\x00delay_min\x00delay_max\x00concurrency\x00settings_age\x00abort_requested\x00suppress_ignore_reports\x00ignore_patterns_set_key\nSMEMBERS\x00j1_ignores",
		"EVALSHA\x00" + SHAMarkAborted + "\x001\x00j1\x00updates\nHGET\x00j1\x00aborted\nEVALSHA\x00" + SHAMarkDone + "\x001\x00j1\x00172800\x00updates\x001\x00{}\x00j1_log",
		"HMSET\x00pipeline:abc\x00nickname\x00n\nSADD\x00pipelines\x00pipeline:abc\nPUBLISH\x00archivebot:pipeline_updates\x00pipeline:abc\nDEL\x00pipeline:abc",
		"FLUSHALL\nKEYS\x00*\nCONFIG\x00GET\x00*\nEVAL\x00return 1\x000",
		"CLIENT\x00SETNAME\x00x\nSELECT\x001\nHELLO\x003\nAUTH\x00pw\nPING",
		"SUBSCRIBE\x00archivebot:job:j1",
		"HINCRBY\x00j9\x00heartbeat\x001\nEVALSHA\x00" + SHAMarkDone + "\x001\x00j9\x001\x00u\x001\x00{}\x00l",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		node := newFakeNode()
		node.queue("pending", "j1", nil)
		node.queue("other", "j9", nil)
		node.mu.Lock()
		node.held["j1"] = true
		node.queues["pending"] = nil
		node.mu.Unlock()
		b := New(Config{Node: node, RetryFor: 1})
		defer b.Close()
		var cmds []redcon.Command
		for _, line := range strings.Split(in, "\n") {
			if line == "" {
				continue
			}
			var args [][]byte
			for _, a := range strings.Split(line, "\x00") {
				args = append(args, []byte(a))
			}
			cmds = append(cmds, redcon.Command{Args: args})
		}
		if len(cmds) > 50 {
			cmds = cmds[:50]
		}
		c := &fakeConn{pipeline: cmds}
		served := 0
		for len(c.pipeline) > 0 && !c.detached && !c.closed {
			cmd := c.pipeline[0]
			c.pipeline = c.pipeline[1:]
			name := strings.ToLower(string(cmd.Args[0]))
			before := len(node.callList())
			b.serveRESP(c, cmd)
			served++
			if refusedCommands[name] {
				if calls := node.callList()[before:]; len(calls) > 0 {
					t.Fatalf("refused %q reached the node: %q", name, calls)
				}
			}
		}
		if !c.detached && !c.closed && c.replies != served {
			t.Fatalf("%d replies to %d commands", c.replies, served)
		}
		for _, call := range node.callList() {
			fields := strings.Fields(call)
			if len(fields) >= 2 && (fields[0] == "update" || fields[0] == "abort" || fields[0] == "done") && fields[1] != "j1" {
				t.Fatalf("a write for a job the pipeline does not hold reached the node: %q", call)
			}
		}
	})
}

// memConn is a net.Conn that reads in and records what is written.
type memConn struct {
	in     io.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
}

func (m *memConn) Read(p []byte) (int, error) { return m.in.Read(p) }
func (m *memConn) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	return m.out.Write(p)
}
func (m *memConn) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
func (m *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379} }
func (m *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

// readAllCommands reads commands until the reader ends: the commands and
// how it ended ("eof" or the refusal's counter).
func readAllCommands(t *testing.T, rd *respReader) ([]string, string) {
	var out []string
	for {
		cmds, err := rd.readCommands()
		if len(rd.buf) > rd.bufferCap() {
			t.Fatalf("buffer of %d bytes, over its cap of %d", len(rd.buf), rd.bufferCap())
		}
		for _, c := range cmds {
			if len(c.Args) > rd.lim.MaxArgs {
				t.Fatalf("a command of %d arguments passed the limit of %d", len(c.Args), rd.lim.MaxArgs)
			}
			total := 0
			for _, a := range c.Args {
				if len(a) > rd.lim.MaxArg {
					t.Fatalf("an argument of %d bytes passed the limit of %d", len(a), rd.lim.MaxArg)
				}
				total += len(a)
			}
			if total > rd.lim.MaxRequest {
				t.Fatalf("a command of %d bytes passed the limit of %d", total, rd.lim.MaxRequest)
			}
			out = append(out, fmt.Sprintf("%q", c.Args))
		}
		if err != nil {
			var pe *protoError
			if errors.As(err, &pe) {
				return out, pe.stat
			}
			return out, "eof"
		}
	}
}

// FuzzConn feeds raw bytes to a connection as the network would: the
// bounded reader, then the bridge's commands. Whatever comes: the reader
// gives the same commands and the same end whether the bytes arrive at
// once or one by one, never buffers or passes more than its limits, no
// panic is recovered (a recovered panic is a bug hidden), the connection
// ends when its input does, and input that is not RESP (an HTTP request,
// an inline command) reaches nothing.
func FuzzConn(f *testing.F) {
	body := "PING\r\nSCAN 0 MATCH pending:*\r\nRPOPLPUSH pending working\r\n"
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body,
		"*1\r\n$9223372036854775805\r\n",
		"*1\r\n$1000000000\r\n" + strings.Repeat("x", 100),
		"*-1\r\n*0\r\n*1\r\n$4\r\nPING\r\n",
		"PING\r\n",
		"*1\r\n$4\r\nPING\r\nHost: x\r\n",
		"*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$9\r\npending:*\r\n*3\r\n$9\r\nRPOPLPUSH\r\n$7\r\npending\r\n$7\r\nworking\r\n",
		"*4\r\n$7\r\nHINCRBY\r\n$2\r\nj1\r\n$9\r\nheartbeat\r\n$1\r\n1\r\n*2\r\n$9\r\nSUBSCRIBE\r\n$17\r\narchivebot:job:j1\r\n*1\r\n$4\r\nPING\r\n",
		"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n*2\r\n$4\r\nECHO\r\n$3\r\nab",
		"*1\r\n$3\r\nabcde\r\n",
		"*17\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxArg: 64, MaxArgs: 8, MaxRequest: 128}.withDefaults()
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, endWhole := readAllCommands(t, newRESPReader(bytes.NewReader(in), lim))
		bytewise, endBytewise := readAllCommands(t, newRESPReader(iotest.OneByteReader(bytes.NewReader(in)), lim))
		if endWhole != endBytewise || !slices.Equal(whole, bytewise) {
			t.Fatalf("at once: %q, %s; byte by byte: %q, %s", whole, endWhole, bytewise, endBytewise)
		}

		node := newFakeNode()
		node.queue("pending", "j1", nil)
		node.mu.Lock()
		node.held["j1"] = true
		node.queues["pending"] = nil
		node.mu.Unlock()
		b := New(Config{Node: node, RetryFor: 1, Limits: lim})
		mc := &memConn{in: iotest.HalfReader(bytes.NewReader(in))}
		if !b.track(mc) {
			t.Fatal("connection refused")
		}
		b.serveConn(mc) // returns when the input ends (EOF) or is refused
		b.Close()       // and the subscriber's goroutines, if it subscribed
		if n := b.Stats()["panic"]; n > 0 {
			t.Fatalf("%d panics recovered", n)
		}
		if len(in) > 0 && in[0] != '*' && len(node.callList()) > 0 {
			t.Fatalf("input that is not RESP reached the node: %q", node.callList())
		}
	})
}

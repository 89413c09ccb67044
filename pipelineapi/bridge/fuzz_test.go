package bridge

import (
	"io"
	"net"
	"strings"
	"testing"

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

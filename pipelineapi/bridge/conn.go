package bridge

// The bridge's connections: its own accept loop and a bounded RESP
// reader, with redcon's Writer and Command types for the rest.
//
// redcon's server (v1.6.4) cannot face an untrusted client: its reader
// takes "$9223372036854775805" and overflows an index (a panic nobody
// recovers: the process ends), grows its buffer to whatever length a
// client announces, recurses once per network read while a command is
// incomplete, and runs inline (telnet-style) commands, so an HTTP request
// sent to the bridge by a web page ran its body's lines as commands.
// None of that can be fixed from outside redcon's Serve, so the bridge
// reads requests itself, as the embedded Redis's patched miniredis does
// (third_party/miniredis/server/limits.go): lengths are checked before
// anything is allocated, inline commands end the connection (an HTTP
// request line or Host: header as Redis's own "Possible SECURITY ATTACK"
// check), and a panic in one connection ends that connection only.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
)

// Limits bound what a client can make the bridge read and hold. Zero
// fields take the defaults below (flags of `archivebot bridge`).
type Limits struct {
	// MaxArg is the longest argument of a command, in bytes (Redis's
	// proto-max-bulk-len). Default 512 KiB: upstream's pipeline sends
	// nothing near it (a log entry over wire.MaxLogEntry is refused with
	// its own error, so the limit sits above that).
	MaxArg int
	// MaxArgs is the largest number of arguments of one command; default
	// 1024 (the pipeline's largest is its report, about 40).
	MaxArgs int
	// MaxRequest bounds the lengths of one command's arguments together;
	// default 2 × MaxArg.
	MaxRequest int
	// MaxClients is the most connections served at once; default 64 (a
	// pipeline uses about three per running job). Another one is answered
	// Redis's "ERR max number of clients reached" and closed.
	MaxClients int
	// SubscriberQueue is how many messages a subscribed connection may
	// have waiting to be written; default 256. One that falls that far
	// behind is closed, as Redis's client-output-buffer-limit pubsub does:
	// a subscriber that stops reading never stalls the others or the
	// control stream.
	SubscriberQueue int
	// WriteTimeout bounds each write to a client; default 30 s. A client
	// that does not read for that long is closed.
	WriteTimeout time.Duration
}

// Default limits.
const (
	DefaultMaxArg          = 512 << 10
	DefaultMaxArgs         = 1024
	DefaultMaxClients      = 64
	DefaultSubscriberQueue = 256
	DefaultWriteTimeout    = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxArg <= 0 {
		l.MaxArg = DefaultMaxArg
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxRequest <= 0 {
		l.MaxRequest = 2 * l.MaxArg
	}
	if l.MaxClients <= 0 {
		l.MaxClients = DefaultMaxClients
	}
	if l.SubscriberQueue <= 0 {
		l.SubscriberQueue = DefaultSubscriberQueue
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	return l
}

// maxHeader is the longest "*N" or "$N" line, CRLF included: a sign and
// 19 digits are all an int64 has.
const maxHeader = 32

// protoError is a request the bridge refuses: the connection is closed
// after reply (if any) is sent. stat names its counter.
type protoError struct {
	stat, reply, why string
}

func (e *protoError) Error() string { return e.why }

func protoErr(stat, why string) *protoError {
	return &protoError{stat: stat, why: why, reply: "ERR Protocol error: " + why}
}

// httpPrefixes are the starts of lines of an HTTP request, which Redis
// (securityWarningCommand) treats as an attack: a web page can make a
// browser send a POST whose body is Redis commands.
var httpPrefixes = [][]byte{[]byte("get "), []byte("post "), []byte("put "), []byte("head "), []byte("delete "),
	[]byte("options "), []byte("patch "), []byte("connect "), []byte("trace "), []byte("host:")}

// notRESP is the error for data that is not a RESP array: an inline
// command, or an HTTP request. It is told apart by the first 8 bytes or
// the first line if shorter: nil until they are there, so that the
// answer does not depend on how the bytes arrive.
func notRESP(b []byte) *protoError {
	head := b[:min(len(b), 8)]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	} else if len(head) < 8 {
		return nil
	}
	head = bytes.ToLower(head)
	for _, p := range httpPrefixes {
		if bytes.HasPrefix(head, p[:min(len(p), len(head))]) {
			// As Redis: no reply, the connection is closed.
			return &protoError{stat: "http", why: "an HTTP request was sent to the bridge (cross-protocol attack?)"}
		}
	}
	return protoErr("inline", "inline commands are refused by the ArchiveBot bridge: send RESP arrays (as redis-py does)")
}

// respReader reads commands within Limits. Like redcon's reader it
// returns all the complete commands buffered (a pipelined batch), so
// that PeekPipeline sees the rest of a batch; unlike it, it refuses a
// length over the limits before reading or allocating for it, and reads
// in a loop rather than recursing.
type respReader struct {
	r          io.Reader
	lim        Limits
	buf        []byte
	start, end int
	err        error // refused after the commands before it
}

// bufferCap is the most a connection buffers: one command at its limit,
// its headers, and a read's worth.
func (rd *respReader) bufferCap() int {
	return rd.lim.MaxRequest + rd.lim.MaxArgs*maxHeader + maxHeader + 64<<10
}

func newRESPReader(r io.Reader, lim Limits) *respReader {
	return &respReader{r: r, lim: lim, buf: make([]byte, 4096)}
}

// readCommands returns the next complete commands, reading until there
// is at least one, or the error that ends the connection.
func (rd *respReader) readCommands() ([]redcon.Command, error) {
	for {
		if rd.err != nil {
			return nil, rd.err
		}
		cmds, err := rd.parse()
		if err != nil {
			rd.err = err
		}
		if len(cmds) > 0 {
			return cmds, nil
		}
		if err != nil {
			return nil, err
		}
		if rd.start == rd.end {
			rd.start, rd.end = 0, 0
			if len(rd.buf) > 64<<10 { // a large command is done: give its buffer back
				rd.buf = make([]byte, 4096)
			}
		}
		if rd.end == len(rd.buf) {
			if rd.start > 0 {
				rd.end = copy(rd.buf, rd.buf[rd.start:rd.end])
				rd.start = 0
			} else {
				n := min(2*len(rd.buf), rd.bufferCap())
				if n <= len(rd.buf) {
					// parse refuses anything longer: cannot happen.
					return nil, protoErr("too_large", "request too large")
				}
				nb := make([]byte, n)
				copy(nb, rd.buf[:rd.end])
				rd.buf = nb
			}
		}
		n, err := rd.r.Read(rd.buf[rd.end:])
		rd.end += n
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// parse takes the complete commands off the buffer.
func (rd *respReader) parse() ([]redcon.Command, error) {
	var cmds []redcon.Command
	for rd.start < rd.end {
		cmd, n, err := parseCommand(rd.buf[rd.start:rd.end], rd.lim)
		if err != nil {
			return cmds, err
		}
		if n == 0 {
			break
		}
		rd.start += n
		if len(cmd.Args) > 0 {
			cmds = append(cmds, cmd)
		}
	}
	return cmds, nil
}

// header reads a "*N" or "$N" line at b: its number and length, n 0 when
// the line is not complete.
func header(b []byte, kind byte) (v int64, n int, err error) {
	i := bytes.IndexByte(b[:min(len(b), maxHeader)], '\n')
	if i < 0 {
		if len(b) >= maxHeader {
			return 0, 0, protoErr("bad_length", "too big "+string(kind)+" line")
		}
		return 0, 0, nil
	}
	if i < 2 || b[i-1] != '\r' {
		return 0, 0, protoErr("bad_length", "expected CRLF at the end of a line")
	}
	v, perr := strconv.ParseInt(string(b[1:i-1]), 10, 64)
	if perr != nil {
		if kind == '*' {
			return 0, 0, protoErr("bad_length", "invalid multibulk length")
		}
		return 0, 0, protoErr("bad_length", "invalid bulk length")
	}
	return v, i + 1, nil
}

// parseCommand parses one command at the start of b: the command and its
// length in bytes, n 0 when b holds only part of it. An empty array
// (*0, *-1) is a command with no arguments, as Redis skips it.
func parseCommand(b []byte, lim Limits) (cmd redcon.Command, n int, err error) {
	if b[0] != '*' {
		if e := notRESP(b); e != nil {
			return cmd, 0, e
		}
		return cmd, 0, nil
	}
	count, i, err := header(b, '*')
	if err != nil || i == 0 {
		return cmd, 0, err
	}
	if count <= 0 {
		return cmd, i, nil
	}
	if count > int64(lim.MaxArgs) {
		return cmd, 0, protoErr("too_large", fmt.Sprintf("%d arguments: the bridge takes at most %d", count, lim.MaxArgs))
	}
	marks := make([]int, 0, 2*min(count, 64))
	total := 0
	for range count {
		if i >= len(b) {
			return cmd, 0, nil
		}
		if b[i] != '$' {
			return cmd, 0, protoErr("bad_length", fmt.Sprintf("expected '$', got %q", b[i]))
		}
		size, k, err := header(b[i:], '$')
		if err != nil || k == 0 {
			return cmd, 0, err
		}
		if size < 0 {
			return cmd, 0, protoErr("bad_length", "invalid bulk length")
		}
		if size > int64(lim.MaxArg) {
			return cmd, 0, protoErr("too_large", fmt.Sprintf("an argument of %d bytes: the bridge takes at most %d", size, lim.MaxArg))
		}
		if total += int(size); total > lim.MaxRequest {
			return cmd, 0, protoErr("too_large", fmt.Sprintf("a command of more than %d bytes", lim.MaxRequest))
		}
		i += k
		end := i + int(size)
		if end+2 > len(b) {
			return cmd, 0, nil
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			return cmd, 0, protoErr("bad_length", "expected CRLF after a bulk string")
		}
		marks = append(marks, i, end)
		i = end + 2
	}
	cmd.Raw = append([]byte(nil), b[:i]...)
	cmd.Args = make([][]byte, len(marks)/2)
	for h := 0; h < len(marks); h += 2 {
		cmd.Args[h/2] = cmd.Raw[marks[h]:marks[h+1]:marks[h+1]]
	}
	return cmd, i, nil
}

// deadlineWriter bounds each write to the connection.
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.nc.Write(p)
}

// conn is one client connection: redcon.Conn over the bounded reader.
type conn struct {
	nc       net.Conn
	addr     string
	wr       *redcon.Writer
	rd       *respReader
	ctx      any
	cmds     []redcon.Command
	closed   bool
	detached bool
}

var _ redcon.Conn = (*conn)(nil)

func (c *conn) RemoteAddr() string                           { return c.addr }
func (c *conn) Close() error                                 { c.wr.Flush(); c.closed = true; return c.nc.Close() }
func (c *conn) WriteError(msg string)                        { c.wr.WriteError(msg) }
func (c *conn) WriteString(s string)                         { c.wr.WriteString(s) }
func (c *conn) WriteBulk(b []byte)                           { c.wr.WriteBulk(b) }
func (c *conn) WriteBulkString(s string)                     { c.wr.WriteBulkString(s) }
func (c *conn) WriteInt(n int)                               { c.wr.WriteInt(n) }
func (c *conn) WriteInt64(n int64)                           { c.wr.WriteInt64(n) }
func (c *conn) WriteUint64(n uint64)                         { c.wr.WriteUint64(n) }
func (c *conn) WriteArray(n int)                             { c.wr.WriteArray(n) }
func (c *conn) WriteNull()                                   { c.wr.WriteNull() }
func (c *conn) WriteRaw(b []byte)                            { c.wr.WriteRaw(b) }
func (c *conn) WriteAny(v any)                               { c.wr.WriteAny(v) }
func (c *conn) Context() any                                 { return c.ctx }
func (c *conn) SetContext(v any)                             { c.ctx = v }
func (c *conn) SetReadBuffer(int)                            {}
func (c *conn) NetConn() net.Conn                            { return c.nc }
func (c *conn) WriteBulkFrom(n int64, rb io.Reader)          { c.wr.WriteBulkFrom(n, rb) }
func (c *conn) PeekPipeline() []redcon.Command               { return c.cmds }
func (c *conn) ReadPipeline() []redcon.Command               { p := c.cmds; c.cmds = nil; return p }
func (c *conn) Detach() redcon.DetachedConn                  { c.detached = true; return &detachedConn{conn: c} }
func (d *detachedConn) Flush() error                         { return d.wr.Flush() }
func (d *detachedConn) Close() error                         { return d.nc.Close() }
func (d *detachedConn) ReadCommand() (redcon.Command, error) { return d.next() }

// detachedConn is a connection that left the command loop (SUBSCRIBE):
// its own goroutine reads the rest of its commands.
type detachedConn struct{ *conn }

func (d *detachedConn) next() (redcon.Command, error) {
	for len(d.cmds) == 0 {
		cmds, err := d.rd.readCommands()
		if err != nil {
			return redcon.Command{}, err
		}
		d.cmds = cmds
	}
	cmd := d.cmds[0]
	d.cmds = d.cmds[1:]
	return cmd, nil
}

// acceptBackoff is the wait after a failed accept, as net/http's: 5 ms
// doubling to 1 s.
var acceptBackoff = retry.Backoff{Min: 5 * time.Millisecond, Max: time.Second}

// Serve answers pipelines on ln until Close; it starts the control
// stream on first use.
func (b *Bridge) Serve(ln net.Listener) error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return net.ErrClosed
	}
	b.lns = append(b.lns, ln)
	first := len(b.lns) == 1
	b.mu.Unlock()
	if first {
		b.wg.Add(1)
		go b.controlLoop()
	}
	failures := 0 // accepts failed in a row
	for {
		nc, err := ln.Accept()
		if err != nil {
			b.mu.Lock()
			closing := b.closing
			b.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors, say: wait as net/http does, not spin.
			wait := acceptBackoff.Wait(failures)
			failures++
			b.logLimited("accept", "bridge: accept failed; retrying", "err", err, "in", wait)
			time.Sleep(wait)
			continue
		}
		failures = 0
		if !b.track(nc) {
			continue
		}
		go b.serveConn(nc)
	}
}

// track counts a new connection in, or refuses it over MaxClients (or
// when closing).
func (b *Bridge) track(nc net.Conn) bool {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		nc.Close()
		return false
	}
	if len(b.conns) >= b.lim.MaxClients {
		b.stats["refused:max_clients"]++
		b.mu.Unlock()
		b.logLimited("max_clients", "bridge: connection refused: too many clients", "max", b.lim.MaxClients, "from", nc.RemoteAddr().String())
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(nc, "-ERR max number of clients reached\r\n")
		nc.Close()
		return false
	}
	b.conns[nc] = struct{}{}
	b.mu.Unlock()
	return true
}

func (b *Bridge) untrack(nc net.Conn) {
	b.mu.Lock()
	delete(b.conns, nc)
	b.mu.Unlock()
}

// serveConn runs one connection's commands until it closes, detaches
// (SUBSCRIBE), sends what the bridge refuses to read, or panics.
func (b *Bridge) serveConn(nc net.Conn) {
	c := &conn{nc: nc, addr: nc.RemoteAddr().String(), wr: redcon.NewWriter(deadlineWriter{nc, b.lim.WriteTimeout}),
		rd: newRESPReader(nc, b.lim)}
	defer func() {
		if c.detached {
			return // the subscriber's goroutine owns it now
		}
		nc.Close()
		b.untrack(nc)
	}()
	b.guardConn("command", c.addr, func() {
		c.wr.SetBuffer(nil)
		c.wr.WriteError("ERR internal error in the ArchiveBot bridge; this connection is closed")
		c.wr.Flush()
	}, func() {
		for {
			cmds, err := c.rd.readCommands()
			if err != nil {
				b.readFailed(c, err)
				return
			}
			c.cmds = cmds
			// Once detached, c.cmds belongs to the subscriber's goroutine.
			for !c.detached && !c.closed && len(c.cmds) > 0 {
				cmd := c.cmds[0]
				c.cmds = c.cmds[1:]
				b.serveRESP(c, cmd)
			}
			if c.detached || c.closed {
				return
			}
			if err := c.wr.Flush(); err != nil {
				return
			}
		}
	})
}

// readFailed answers a refused request (and counts it) before the
// connection is closed: what the client sent after it is read and
// dropped for a moment, so that the reply is not lost to a reset.
func (b *Bridge) readFailed(c *conn, err error) {
	var pe *protoError
	if !errors.As(err, &pe) {
		return
	}
	b.count("refused:protocol_"+pe.stat, 1)
	b.logLimited("protocol_"+pe.stat, "bridge: connection closed: request refused", "why", pe.why, "from", c.addr)
	if pe.reply == "" {
		return
	}
	c.wr.WriteError(pe.reply)
	if c.wr.Flush() == nil {
		c.nc.SetReadDeadline(time.Now().Add(time.Second))
		io.CopyN(io.Discard, c.nc, 1<<20)
	}
}

// guardConn runs fn, a connection's work, under the panic guard: a panic
// ends that connection only, logged with its stack and counted as
// "panic", and tell (when not nil) says so to the client.
func (b *Bridge) guardConn(where, addr string, tell func(), fn func()) {
	run.GuardThen(b.log, "bridge "+where+" "+addr, fn, func(any) {
		b.count("panic", 1)
		if tell != nil {
			tell()
		}
	})
}

// logLimited logs msg at most every 10 s per key (keys are a fixed set:
// the counters say how many were not logged).
func (b *Bridge) logLimited(key, msg string, args ...any) {
	now := time.Now()
	b.logMu.Lock()
	last, seen := b.logged[key]
	if seen && now.Sub(last) < 10*time.Second {
		b.logMu.Unlock()
		return
	}
	b.logged[key] = now
	b.logMu.Unlock()
	b.log.Warn(msg, args...)
}

package server

// archivebot patch: a request reader that bounds what a client can make the
// server allocate, as Redis's proto-max-bulk-len and its limits on
// unauthenticated clients do. See ../PATCHES.md.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Limits bound the requests the server reads. A request over a limit gets
// an "ERR Protocol error: ..." reply and the connection is closed, as Redis
// does; nothing of it is dispatched.
type Limits struct {
	// MaxLine is the longest line: the "*N" and "$N" headers, and any
	// line that is not a RESP array (inline commands are not supported).
	MaxLine int
	// MaxBulk is the longest argument (Redis's proto-max-bulk-len). Commands
	// that build strings (SETRANGE, SETBIT, APPEND) keep them within it too.
	MaxBulk int
	// MaxArgs is the largest number of arguments of one command.
	MaxArgs int
	// MaxRequest bounds the sum of the lengths of one command's arguments.
	MaxRequest int
	// PreAuthMaxBulk and PreAuthMaxArgs, when not zero, apply instead to a
	// connection that has not authenticated (Peer.SetAuthenticated), as
	// Redis does for clients that have not sent AUTH.
	PreAuthMaxBulk int
	PreAuthMaxArgs int
}

// DefaultLimits are the limits of a new server: Redis's defaults.
var DefaultLimits = Limits{
	MaxLine:    64 << 10,
	MaxBulk:    512 << 20,
	MaxArgs:    1 << 20,
	MaxRequest: 1 << 30,
}

// ProtocolError is a request the server refuses to read.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protoErr(msg string) error { return &ProtocolError{msg} }

// SetLimits sets the limits for the requests read from now on, on all
// connections. Fields left zero keep their DefaultLimits value, except the
// pre-auth ones.
func (s *Server) SetLimits(l Limits) {
	d := DefaultLimits
	if l.MaxLine <= 0 {
		l.MaxLine = d.MaxLine
	}
	if l.MaxBulk <= 0 {
		l.MaxBulk = d.MaxBulk
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = d.MaxArgs
	}
	if l.MaxRequest <= 0 {
		l.MaxRequest = d.MaxRequest
	}
	s.limits.Store(&l)
}

// Limits returns the limits in force.
func (s *Server) Limits() Limits {
	if l := s.limits.Load(); l != nil {
		return *l
	}
	return DefaultLimits
}

// SetAuthenticated marks the connection as authenticated: the pre-auth
// limits no longer apply to it.
func (c *Peer) SetAuthenticated() { c.authed.Store(true) }

// Authenticated says whether SetAuthenticated was called.
func (c *Peer) Authenticated() bool { return c.authed.Load() }

// readChunk is the most read into memory at once for a bulk argument: a
// longer one grows as its bytes arrive, so that announcing a length costs
// nothing until the bytes are sent.
const readChunk = 64 << 10

// readCommand reads one command, an array of bulk strings. Empty arrays
// are skipped, as Redis does. Errors are io errors or *ProtocolError.
func readCommand(rd *bufio.Reader, lim Limits, preAuth bool) ([]string, error) {
	maxBulk, maxArgs := lim.MaxBulk, lim.MaxArgs
	if preAuth {
		maxBulk, maxArgs = lim.PreAuthMaxBulk, lim.PreAuthMaxArgs
	}
	for {
		line, err := readLine(rd, lim.MaxLine)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 || line[0] != '*' {
			return nil, protoErr("expected '*', got an inline command; send commands as RESP arrays")
		}
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return nil, protoErr("invalid multibulk length")
		}
		if n > int64(maxArgs) {
			if preAuth {
				return nil, protoErr("unauthenticated multibulk length")
			}
			return nil, protoErr("invalid multibulk length")
		}
		if n <= 0 {
			continue
		}
		args := make([]string, 0, min(n, 1024))
		total := 0
		for range n {
			line, err := readLine(rd, lim.MaxLine)
			if err != nil {
				return nil, err
			}
			if len(line) == 0 || line[0] != '$' {
				got := "nothing"
				if len(line) > 0 {
					got = strconv.QuoteRune(rune(line[0]))
				}
				return nil, protoErr("expected '$', got " + got)
			}
			l, err := strconv.ParseInt(string(line[1:]), 10, 64)
			if err != nil || l < 0 || l > int64(maxBulk) {
				if preAuth && err == nil && l > 0 {
					return nil, protoErr("unauthenticated bulk length")
				}
				return nil, protoErr("invalid bulk length")
			}
			if total += int(l); total > lim.MaxRequest {
				return nil, protoErr("request too large")
			}
			b, err := readBulk(rd, int(l))
			if err != nil {
				return nil, err
			}
			args = append(args, b)
		}
		return args, nil
	}
}

// readLine reads a line ending in CRLF, without it, of at most max bytes.
func readLine(rd *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := rd.ReadSlice('\n')
		if len(line)+len(frag) > max+2 {
			return nil, protoErr("too big request line")
		}
		line = append(line, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return nil, protoErr("expected CRLF at the end of a line")
	}
	return line[:len(line)-2], nil
}

// readBulk reads n bytes and the CRLF after them, growing the buffer as
// the bytes arrive.
func readBulk(rd *bufio.Reader, n int) (string, error) {
	buf := make([]byte, 0, min(n, readChunk))
	for len(buf) < n {
		k := min(n-len(buf), max(len(buf), readChunk))
		if cap(buf)-len(buf) < k {
			nb := make([]byte, len(buf), len(buf)+k)
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(rd, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+m]
		if err != nil {
			return "", unexpected(err)
		}
	}
	var crlf [2]byte
	if _, err := io.ReadFull(rd, crlf[:]); err != nil {
		return "", unexpected(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return "", protoErr("expected CRLF after a bulk string")
	}
	return string(buf), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

package embeddedredis

// The snapshot (snapshot.go): the in-process connection capture talks
// through.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
)

// localConn is a client connection that runs commands on the server
// in-process, without a socket: it dispatches them the way a network
// connection does, so they take the same locks.
type localConn struct {
	s    *Server
	srv  *server.Server
	peer *server.Peer
	w    *bufio.Writer
	sink sinkWriter
}

// sinkWriter discards what is written to it unless buf is set.
type sinkWriter struct{ buf *bytes.Buffer }

func (w *sinkWriter) Write(p []byte) (int, error) {
	if w.buf == nil {
		return len(p), nil
	}
	return w.buf.Write(p)
}

func (s *Server) localConn() (*localConn, error) {
	c := &localConn{s: s, srv: s.srv}
	c.w = bufio.NewWriterSize(&c.sink, 64<<10)
	c.peer = server.NewPeer(c.w)
	s.internal.Store(c.peer, struct{}{}) // not logged (see Server.hook)
	if s.password != "" {
		if _, err := c.do("AUTH", s.password); err != nil {
			c.close()
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return c, nil
}

// close forgets the connection.
func (c *localConn) close() { c.s.internal.Delete(c.peer) }

// send runs a command and discards its reply (e.g. QUEUED).
func (c *localConn) send(args ...string) {
	c.srv.Dispatch(c.peer, args)
}

// do runs a command and returns its parsed reply; an error reply is
// returned as an error.
func (c *localConn) do(args ...string) (any, error) {
	c.w.Flush() // the discarded replies of earlier sends
	var buf bytes.Buffer
	c.sink.buf = &buf
	c.srv.Dispatch(c.peer, args)
	c.w.Flush()
	c.sink.buf = nil
	return server.ParseReply(bufio.NewReader(&buf))
}

// replyReader walks the items of an array reply.
type replyReader struct {
	items []any
	err   error
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

func (r *replyReader) more() bool { return len(r.items) > 0 }

func (r *replyReader) next() any {
	if len(r.items) == 0 {
		if r.err == nil {
			r.err = errors.New("reply shorter than expected")
		}
		return nil
	}
	v := r.items[0]
	r.items = r.items[1:]
	return v
}

func (r *replyReader) strings() ([]string, error) {
	v := r.next()
	if v == nil && r.err != nil {
		return nil, r.err
	}
	out, ok := stringItems(v)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	return out, nil
}

// parseTime turns the two parts of a TIME reply into unix milliseconds.
func parseTime(sec, usec any) (int64, error) {
	ss, ok1 := sec.(string)
	us, ok2 := usec.(string)
	s, err1 := strconv.ParseInt(ss, 10, 64)
	u, err2 := strconv.ParseInt(us, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected TIME reply %v %v", sec, usec)
	}
	return s*1000 + u/1000, nil
}

package web

// The per-client queue of the live stream (doc/web.md, Live stream,
// Backpressure). One design for both protocols and for both of its jobs:
// memory bounded whatever clients do (frames and bytes per client, bytes
// across all clients) and latency bounded (a log frame older than the
// hub's MaxAge is shed rather than sent late). Log frames sit in a ring
// that drops its oldest in O(1); job events and notices, which are never
// dropped, in a FIFO of their own; the writer merges the two in push
// order. Every dropped log entry is counted, and told to clients of our
// protocol ({"dropped":K} before their next frame).

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// qframe is one queued frame: n log entries (0 for an event or notice),
// size bytes of payload, at when its oldest entry was read, seq its push
// order.
type qframe struct {
	pm    *websocket.PreparedMessage // shared by several clients
	raw   []byte                     // or one client's frame, unprepared
	event bool
	n     int
	size  int
	at    time.Time
	seq   uint64
	note  string // a notice's key (hello, subscribed, error)
}

// ring is a FIFO of frames with O(1) push, pop and drop-oldest; it grows
// by doubling up to max frames, so an idle client holds a few slots.
type ring struct {
	buf     []qframe
	head, n int
}

func (r *ring) len() int { return r.n }

func (r *ring) push(f qframe, limit int) {
	if r.n == len(r.buf) {
		size := min(max(16, 2*len(r.buf)), limit)
		if size <= r.n {
			size = r.n + 1
		}
		nb := make([]qframe, size)
		for i := range r.n {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = f
	r.n++
}

// peek returns the oldest frame; the ring must not be empty.
func (r *ring) peek() *qframe { return &r.buf[r.head] }

// pop removes and returns the oldest frame; the ring must not be empty.
func (r *ring) pop() qframe {
	f := r.buf[r.head]
	r.buf[r.head] = qframe{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	return f
}

// queueLimits are the bounds of one client's queue.
type queueLimits struct {
	frames int           // log frames, and (separately) events
	bytes  int           // bytes of queued frames
	total  *atomic.Int64 // bytes queued across all clients
	maxTot int64
	maxAge time.Duration
}

// batchConn is the client's network connection with writes gathered: while
// the writer drains its queue every frame is appended to one buffer, sent
// in one system call when the queue is empty (or the buffer holds 64 KiB).
// Control frames the reader answers (pong, close) go through the same
// lock.
type batchConn struct {
	net.Conn
	mu       sync.Mutex
	batching bool
	buf      []byte

	// written counts the bytes written to the connection (gathered or
	// sent): the offsets progress pings carry.
	written uint64
}

const batchFlushAt = 64 << 10

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.batching {
		if len(b.buf) > 0 {
			if err := b.flushLocked(); err != nil {
				return 0, err
			}
		}
		n, err := b.Conn.Write(p)
		b.written += uint64(n)
		return n, err
	}
	b.written += uint64(len(p))
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchFlushAt {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	if cap(b.buf) > 4*batchFlushAt {
		b.buf = nil // an unusually large burst: do not keep its buffer
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// sent returns the bytes written to the connection so far.
func (b *batchConn) sent() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// begin gathers writes until end, which sends them.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.batching = true
	b.mu.Unlock()
}

func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batching = false
	return b.flushLocked()
}

// hijackWriter hands the upgrader a batchConn instead of the raw
// connection.
type hijackWriter struct {
	http.ResponseWriter
	conn *batchConn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &batchConn{Conn: c}
	return w.conn, brw, nil
}

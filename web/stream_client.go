package web

// One live-stream client: its queue (stream_queue.go) fed by the hub, its
// writer with the in-flight bound, its reader (doc/web.md, Live stream).

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/gorilla/websocket"
)

// client is one WebSocket connection.
type client struct {
	hub  *Hub
	conn *websocket.Conn
	bc   *batchConn
	v2   bool
	lim  queueLimits

	mu         sync.Mutex
	logs       ring     // log frames: the oldest is dropped when full
	events     []qframe // job events and notices: never dropped
	bytes      int      // queued in logs and events
	seq        uint64   // push order
	dropped    int      // log entries lost and not told yet
	closing    bool
	closeCode  int
	closeText  string
	all        bool
	subs       []string
	errorsOnly bool
	key        string
	signal     chan struct{}
	done       chan struct{}

	// readTo is the offset in the connection's bytes up to which the
	// client has read, as the payload of its last pong to a progress ping
	// says; pingedAt (writer only) the offset of the last progress ping.
	// held is set while the writer waits for the client to read what it
	// was sent (HubOptions.InflightBytes); heldTimes counts those waits.
	readTo    atomic.Uint64
	pingedAt  uint64
	held      atomic.Bool
	heldTimes atomic.Int64
}

func (c *client) filter() (key string, all bool, subs []string, errorsOnly bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key, c.all, c.subs, c.errorsOnly
}

func (c *client) setFilter(all bool, subs []string, errorsOnly bool) {
	subs = slices.Clone(subs)
	slices.Sort(subs)
	subs = slices.Compact(subs)
	key := "s"
	if all {
		key = "a"
		subs = nil
	}
	if errorsOnly {
		key += "e"
	}
	key += "|" + strings.Join(subs, ",")
	c.mu.Lock()
	c.all, c.subs, c.errorsOnly, c.key = all, subs, errorsOnly, key
	c.mu.Unlock()
}

// push queues one frame (see pushLogs).
func (c *client) push(f qframe) {
	if f.event {
		c.pushEvent(f)
		return
	}
	c.pushLogs([]qframe{f})
}

// pushEvent queues an event or notice. They are never dropped: when the
// client already holds its limit of them it is closed (1008) and must
// resync.
func (c *client) pushEvent(f qframe) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if len(c.events) >= c.lim.frames {
		c.closing, c.closeCode, c.closeText = true, CloseOverflow, "too slow: job events would be lost; reload /jobs and reconnect"
		metrics.StreamClientClosed()
		c.hub.refusals.Refused("stream_too_slow", c.remote(), "events_queued", len(c.events))
		c.mu.Unlock()
		c.wakeWriter()
		return
	}
	c.seq++
	f.seq = c.seq
	c.events = append(c.events, f)
	c.bytes += f.size
	c.lim.total.Add(int64(f.size))
	c.mu.Unlock()
	c.wakeWriter()
}

// pushLogs queues log frames under one lock. To make room the client
// loses its oldest log frames: while it holds its limit of frames or of
// bytes, or all clients together hold theirs. A frame that still does not
// fit is lost itself. Every lost entry is counted (and told to clients of
// our protocol).
func (c *client) pushLogs(fs []qframe) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	lost := 0
	for _, f := range fs {
		// What the writer would shed as too old when it got to it is shed
		// now: a client that does not read holds about one latency budget
		// of frames, not its byte limit.
		for c.logs.len() > 0 && c.lim.maxAge > 0 && f.at.Sub(c.logs.peek().at) > c.lim.maxAge {
			lost += c.dropOldestLocked()
		}
		for c.logs.len() > 0 && (c.logs.len() >= c.lim.frames || c.bytes+f.size > c.lim.bytes ||
			c.lim.total.Load()+int64(f.size) > c.lim.maxTot) {
			lost += c.dropOldestLocked()
		}
		if c.bytes+f.size > c.lim.bytes || c.lim.total.Load()+int64(f.size) > c.lim.maxTot {
			lost += f.n
			continue
		}
		c.seq++
		f.seq = c.seq
		c.logs.push(f, c.lim.frames)
		c.bytes += f.size
		c.lim.total.Add(int64(f.size))
	}
	c.dropped += lost
	c.mu.Unlock()
	if lost > 0 {
		metrics.StreamDroppedEntries(lost)
	}
	c.wakeWriter()
}

// dropOldestLocked drops the oldest log frame and returns its entries.
func (c *client) dropOldestLocked() int {
	f := c.logs.pop()
	c.bytes -= f.size
	c.lim.total.Add(-int64(f.size))
	return f.n
}

// next takes the next frame to write, in push order, shedding log frames
// older than the hub's MaxAge (counted as dropped). ok is false when the
// queue is empty; dropped is what the client should be told first.
func (c *client) next(now time.Time) (f qframe, dropped int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	shed := 0
	for c.logs.len() > 0 && c.lim.maxAge > 0 && now.Sub(c.logs.peek().at) > c.lim.maxAge {
		shed += c.dropOldestLocked()
	}
	if shed > 0 {
		c.dropped += shed
		metrics.StreamDroppedEntries(shed)
	}
	switch {
	case len(c.events) > 0 && (c.logs.len() == 0 || c.events[0].seq < c.logs.peek().seq):
		f = c.events[0]
		c.events[0] = qframe{}
		c.events = c.events[1:]
		if len(c.events) == 0 {
			c.events = nil
		}
	case c.logs.len() > 0:
		f = c.logs.pop()
	default:
		return f, 0, false
	}
	c.bytes -= f.size
	c.lim.total.Add(-int64(f.size))
	dropped = c.dropped
	c.dropped = 0
	return f, dropped, true
}

func (c *client) wakeWriter() {
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// close asks the writer to send a close frame and end the connection.
func (c *client) close(code int, text string) {
	c.mu.Lock()
	if !c.closing {
		c.closing, c.closeCode, c.closeText = true, code, text
	}
	c.mu.Unlock()
	c.wakeWriter()
}

// writeLoop sends queued frames until the client closes: all that is
// queued goes out in as few system calls as fit (batchConn), at once.
func (c *client) writeLoop() {
	defer c.conn.Close()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	// A client that answers pings would otherwise stay for ever: at
	// HubOptions.MaxStreamAge it is closed with 1001 (going away), after
	// what it was queued, and reconnects (the dashboard does at once).
	var expire <-chan time.Time
	if d := c.hub.opt.MaxStreamAge; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		expire = t.C
	}
	for {
		select {
		case <-expire:
			expire = nil
			c.mu.Lock()
			if !c.closing {
				c.closing, c.closeCode, c.closeText = true, websocket.CloseGoingAway, "stream lifetime reached (http.stream_max_age): reconnect"
				metrics.StreamExpired()
			}
			c.mu.Unlock()
		case <-c.signal:
		case <-ping.C:
			c.conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				c.abandon()
				return
			}
			continue
		case <-c.done:
			return
		}
		if !c.drain() {
			c.abandon()
			return
		}
	}
}

// The in-flight bound (HubOptions.InflightBytes). The queue sheds frames
// older than the latency budget, but what the writer has handed to the
// connection is past that check: socket buffers on both sides grow to
// megabytes when a client reads slower than the stream comes. So the
// writer sends a progress ping (a WebSocket ping whose payload is the
// offset of the connection's bytes written so far) every quarter of the
// bound, and a client's pong, which it sends when its reader got that far,
// tells how much it has read. While more than the bound is unread the
// writer waits for the next pong; frames stay in the queue, where they are
// shed by age and counted. Every WebSocket client answers pings (RFC 6455;
// browsers do it below the page's script); one that does not is already
// closed after pongWait.

// overBudget tells whether the client has more than InflightBytes unread;
// if so it makes sure a progress ping is on its way.
func (c *client) overBudget() bool {
	limit := c.inflightLimit()
	if c.bc == nil || limit < 0 {
		return false
	}
	sent := c.bc.sent()
	if sent-min(c.readTo.Load(), sent) <= uint64(limit) {
		return false
	}
	c.progressPing(sent)
	return true
}

// inflightLimit is the client's HubOptions.InflightBytes(Upstream).
func (c *client) inflightLimit() int {
	if c.v2 {
		return c.hub.opt.InflightBytes
	}
	return c.hub.opt.InflightBytesUpstream
}

// progressPing sends a ping carrying the offset sent, unless one already
// covers it.
func (c *client) progressPing(sent uint64) {
	if c.pingedAt >= sent {
		return
	}
	c.pingedAt = sent
	c.conn.WriteControl(websocket.PingMessage, strconv.AppendUint(nil, sent, 10), time.Now().Add(writeWait))
}

// pong takes the client's answer to a progress ping (other pongs carry
// no offset) and wakes a writer that waits for it.
func (c *client) pong(payload string) {
	n, err := strconv.ParseUint(payload, 10, 64)
	if err != nil {
		return
	}
	for {
		old := c.readTo.Load()
		if n <= old || c.readTo.CompareAndSwap(old, n) {
			break
		}
	}
	if c.held.Load() {
		c.wakeWriter()
	}
}

// drain writes what is queued; false when the connection is done. It
// stops early, leaving the rest queued, while the client has more than
// HubOptions.InflightBytes unread.
func (c *client) drain() bool {
	if c.bc != nil {
		c.bc.begin()
	}
	ok := true
	for ok {
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if !closing && c.overBudget() {
			if !c.held.Swap(true) {
				c.heldTimes.Add(1)
			}
			break
		}
		c.held.Store(false)
		f, dropped, have := c.next(c.hub.opt.Now())
		if !have {
			c.mu.Lock()
			closing, code, text := c.closing, c.closeCode, c.closeText
			c.mu.Unlock()
			if closing {
				c.conn.SetWriteDeadline(time.Now().Add(writeWait))
				c.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, text))
				ok = false
			}
			break
		}
		if fn := c.hub.beforeWrite.Load(); fn != nil {
			if c.bc != nil {
				c.bc.end() // a test holding the writer sees what came before
			}
			(*fn)(c)
			if c.bc != nil {
				c.bc.begin()
			}
		}
		c.conn.SetWriteDeadline(time.Now().Add(writeWait))
		if dropped > 0 && c.v2 {
			if err := c.conn.WriteMessage(websocket.TextMessage,
				[]byte(`{"seq":0,"n":0,"dropped":`+strconv.Itoa(dropped)+`}`)); err != nil {
				ok = false
				break
			}
		}
		var err error
		if f.pm != nil {
			err = c.conn.WritePreparedMessage(f.pm)
		} else {
			err = c.conn.WriteMessage(websocket.TextMessage, f.raw)
		}
		if err != nil {
			ok = false
		}
		if lim := c.inflightLimit(); ok && c.bc != nil && lim > 0 {
			if sent := c.bc.sent(); sent-c.pingedAt >= uint64(lim/4) {
				c.progressPing(sent)
			}
		}
	}
	if c.bc != nil {
		if err := c.bc.end(); err != nil {
			ok = false
		}
	}
	return ok
}

// abandon removes the client from the hub and gives back what it queued.
func (c *client) abandon() {
	c.mu.Lock()
	c.closing = true
	c.lim.total.Add(-int64(c.bytes))
	c.logs, c.events, c.bytes = ring{}, nil, 0
	c.mu.Unlock()
	h := c.hub
	h.mu.Lock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		proto := "upstream"
		if c.v2 {
			proto = "v2"
		}
		metrics.StreamClients(proto, -1)
	}
	h.mu.Unlock()
	c.conn.Close()
}

// readMessage reads one client message of at most maxClientMsg bytes
// once decompressed (the connection's read limit counts the bytes on the
// wire, which permessage-deflate can multiply a thousandfold): a longer
// one closes the connection with 1009 before more is inflated.
func (c *client) readMessage() ([]byte, error) {
	_, r, err := c.conn.NextReader()
	if err != nil {
		return nil, err
	}
	msg, err := io.ReadAll(io.LimitReader(r, maxClientMsg+1))
	if err != nil {
		return nil, err
	}
	if len(msg) > maxClientMsg {
		c.hub.refusals.Refused("stream_message_too_big", c.remote(), "limit_bytes", maxClientMsg)
		c.conn.SetWriteDeadline(time.Now().Add(writeWait))
		c.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseMessageTooBig, "message too big (64 KiB at most, decompressed)"),
			time.Now().Add(writeWait))
		return nil, websocket.ErrReadLimit
	}
	return msg, nil
}

// readLoop reads the client's messages (subscriptions) until it closes.
func (c *client) readLoop() {
	defer close(c.done)
	defer c.abandon()
	c.conn.SetReadLimit(maxClientMsg)
	c.conn.SetReadDeadline(time.Now().Add(pongWait))
	c.conn.SetPongHandler(func(p string) error {
		c.pong(p)
		return c.conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		msg, err := c.readMessage()
		if err != nil {
			return
		}
		c.conn.SetReadDeadline(time.Now().Add(pongWait))
		if !c.v2 {
			continue // upstream's protocol is server to client only
		}
		c.handleMsg(msg)
	}
}

// serveStream upgrades r to a stream client: our protocol with v=2, else
// upstream's. Our protocol takes its first filter from the query:
// jobs=IDENT,IDENT (default: all) and errors=1.
func (h *Hub) serveStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v2 := false
	switch q.Get("v") {
	case "", "1":
	case "2":
		v2 = true
	default:
		jsonError(w, http.StatusBadRequest, `unknown stream protocol: v must be 1 (upstream's frames) or 2 (batches)`)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		jsonError(w, http.StatusUpgradeRequired, "this is a WebSocket endpoint (ws://HOST/stream, or ?v=2 for batches; see doc/web.md)")
		return
	}
	all, subs, errorsOnly := true, []string(nil), false
	if j := q.Get("jobs"); j != "" && j != "all" && j != "*" {
		all, subs = false, strings.Split(j, ",")
	}
	if e := q.Get("errors"); e == "1" || e == "true" {
		errorsOnly = true
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		jsonError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	hw := &hijackWriter{ResponseWriter: w}
	conn, err := h.upgrader.Upgrade(hw, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c := &client{hub: h, conn: conn, bc: hw.conn, v2: v2,
		lim: queueLimits{frames: h.opt.QueueUpstream, bytes: h.opt.ClientBytes, total: &h.queued,
			maxTot: h.opt.TotalBytes, maxAge: h.opt.MaxAge},
		signal: make(chan struct{}, 1), done: make(chan struct{})}
	proto := "upstream"
	if v2 {
		c.lim.frames = h.opt.QueueV2
		proto = "v2"
	}
	c.setFilter(all, subs, errorsOnly)
	if v2 {
		hello := c.filterDoc()
		hello["protocol"] = 2
		hello["queue"] = c.lim.frames
		hello["flush_ms"] = h.opt.FlushInterval.Milliseconds()
		c.sendNotice("hello", hello)
	}
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	metrics.StreamClients(proto, 1)
	if h.onJoin != nil {
		h.onJoin()
	}
	run.Go(&h.clientLoops, h.log, "stream client writer", c.writeLoop)
	run.Go(&h.clientLoops, h.log, "stream client reader", c.readLoop)
}

// remote is the client's address without the port, for the log.
func (c *client) remote() string {
	a := c.conn.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

package web

// The live log stream over WebSocket (doc/web.md, Live stream).
//
// Library: github.com/gorilla/websocket. Its PreparedMessage encodes (and
// compresses, with permessage-deflate) a frame once and then sends the
// same bytes to every client, which is what fan-out to many dashboards
// needs; its Upgrader takes a CheckOrigin function, so the read-only
// stream can be opened from upstream's dashboard on another origin.
// coder/websocket compresses per connection and refuses cross-origin
// handshakes unless told every allowed origin.
//
// Two protocols share one hub:
//   - upstream's (/stream): one text frame per log entry of type download,
//     ignore or stdout, the entry merged with "job_data" (the raw job hash
//     plus "ident"), as upstream's firehose and WebSocket server sent them;
//     a client keeps at most 1000 frames and loses its oldest.
//   - ours (/stream?v=2): one frame per batch (at most every FlushInterval)
//     starting with {"seq":S,"n":N,"t":MS,…}; per-job subscription and an
//     errors-only filter chosen by the client; job events in frames of
//     their own that are never dropped: a client whose queue is full loses
//     its oldest log frames (and is told how many entries it lost); if
//     only events are queued it is closed (code 1008) and resyncs.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/store"
)

// Stream defaults.
const (
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultQueueV2 frames per client of our protocol (about 25 s of
	// batches).
	DefaultQueueV2 = 256
	// DefaultQueueUpstream frames per upstream client, as upstream.
	DefaultQueueUpstream = 1000
	// DefaultClientBytes bounds the bytes one client's queue holds
	// (http.stream_queue_bytes).
	DefaultClientBytes = config.DefaultStreamQueueBytes
	// DefaultTotalBytes bounds the bytes all clients' queues hold
	// (http.stream_total_bytes).
	DefaultTotalBytes = config.DefaultStreamTotalBytes
	// DefaultInflightBytes bounds the bytes written to a client that it
	// has not read yet (confirmed by its pongs to progress pings): what
	// socket buffers hold past the queue's age check. About 0.2 s of the
	// full upstream stream at 2,000 entries/s, compressed; with 100 ms of
	// round trip it still carries 2.5 MB/s. Upstream's clients get a
	// quarter: their frames are one entry each and dashboard.js renders far
	// fewer than 64 KiB a round trip carries, and on TestStreamLoad the
	// smaller bound took p99 at 2,000 entries/s from about 1.5 s to 1 s.
	DefaultInflightBytes         = config.DefaultStreamUnreadBytes
	DefaultInflightBytesUpstream = config.DefaultStreamUnreadBytesUpstream
	// DefaultMaxAge is the latency budget: a log frame whose oldest entry
	// was read longer ago is dropped rather than sent late.
	DefaultMaxAge = time.Second
	// maxFrameEntries and maxFrameBytes bound one log frame of our
	// protocol (a larger batch is split over several frames).
	maxFrameEntries = 500
	maxFrameBytes   = 256 << 10
	// DefaultMinFlushGap is the wait between two batches while the stream
	// is quiet; a batch of CoalesceAbove entries or more means load, and
	// the next waits FlushInterval.
	DefaultMinFlushGap = 5 * time.Millisecond
	CoalesceAbove      = 500
	// CloseOverflow is the close code of a client whose queue held only job
	// events: it must resync from /jobs.
	CloseOverflow = websocket.ClosePolicyViolation
	writeWait     = 10 * time.Second
	pingEvery     = 30 * time.Second
	pongWait      = 75 * time.Second
	maxClientMsg  = 64 << 10
)

// HubOptions configures a Hub; zero values take defaults.
type HubOptions struct {
	// FlushInterval between two batches under load; MinFlushGap when
	// quiet.
	FlushInterval time.Duration
	MinFlushGap   time.Duration
	// QueueV2 and QueueUpstream are the most log frames a client queues
	// (and, apart, the most job events and notices).
	QueueV2       int
	QueueUpstream int
	// ClientBytes and TotalBytes bound the bytes queued per client and
	// across clients.
	ClientBytes int
	TotalBytes  int64
	// MaxAge is the latency budget (negative: none).
	MaxAge time.Duration
	// InflightBytes and InflightBytesUpstream bound the bytes sent to a
	// client (of our protocol, of upstream's) and not read by it yet
	// (negative: no bound beyond the kernels').
	InflightBytes         int
	InflightBytesUpstream int
	Logger                *slog.Logger
	Now                   func() time.Time
}

// Hub fans the firehose out to WebSocket clients. It implements
// coordinator.StreamSink.
type Hub struct {
	opt      HubOptions
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu      sync.Mutex
	entries []streamEntry
	events  []coordinator.JobEvent
	clients map[*client]struct{}
	seq     uint64
	wake    chan struct{}
	closed  bool

	// queued is the bytes all clients' queues hold.
	queued atomic.Int64

	// beforeWrite, when set (tests), is called by a client's writer before
	// each frame it writes; onJoin when a client was added.
	beforeWrite atomic.Pointer[func(c *client)]
	onJoin      func()
}

// NewHub returns a hub; Run flushes it.
func NewHub(opt HubOptions) *Hub {
	if opt.FlushInterval <= 0 {
		opt.FlushInterval = DefaultFlushInterval
	}
	if opt.QueueV2 <= 0 {
		opt.QueueV2 = DefaultQueueV2
	}
	if opt.QueueUpstream <= 0 {
		opt.QueueUpstream = DefaultQueueUpstream
	}
	if opt.MinFlushGap <= 0 {
		opt.MinFlushGap = min(DefaultMinFlushGap, opt.FlushInterval)
	}
	if opt.ClientBytes <= 0 {
		opt.ClientBytes = DefaultClientBytes
	}
	if opt.TotalBytes <= 0 {
		opt.TotalBytes = DefaultTotalBytes
	}
	if opt.MaxAge == 0 {
		opt.MaxAge = DefaultMaxAge
	}
	if opt.InflightBytes == 0 {
		opt.InflightBytes = DefaultInflightBytes
	}
	if opt.InflightBytesUpstream == 0 {
		opt.InflightBytesUpstream = DefaultInflightBytesUpstream
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	h := &Hub{opt: opt, log: opt.Logger.With("service", "stream"), clients: map[*client]struct{}{},
		wake: make(chan struct{}, 1)}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout:  10 * time.Second,
		EnableCompression: true,
		// The stream is read-only and public: upstream's dashboard opens it
		// from the web app's origin on another port.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return h
}

// jobRef is a job record as one firehose read saw it, encoded once.
type jobRef struct {
	ident string
	job   *store.Job
	// upstream is the hash as read plus "ident", as job_data of upstream
	// frames; raw is the hash alone (v2 "jobs"): both echo what the
	// pipeline wrote, byte for byte.
	upstream, raw []byte
}

func (j *jobRef) encode() {
	if j.raw != nil {
		return
	}
	hash := j.job.Fields
	j.raw, _ = marshalCompact(hash)
	m := make(map[string]string, len(hash)+1)
	for k, v := range hash {
		m[k] = v
	}
	m["ident"] = j.ident
	// Counters the analyzer and the pipeline have not written yet read as
	// "0": dashboard.js adds them up with parseInt, and NaN would stick.
	for _, k := range store.JobCounterFields {
		if _, ok := m[k]; !ok {
			m[k] = "0"
		}
	}
	j.upstream, _ = marshalCompact(m)
}

func marshalCompact(v any) ([]byte, error) {
	b, err := marshal(v)
	return bytes.TrimRight(b, "\n"), err
}

// streamEntry is one log entry on its way to clients.
type streamEntry struct {
	job   *jobRef
	doc   []byte // the entry, a JSON object, trimmed
	typ   string
	isErr bool
	at    time.Time // when the firehose read it
	score float64   // its score in the job's log: clients show each once
}

// upstreamTypes are the entry types upstream's dashboard.js renders (it
// asserts on any other).
func upstreamType(t string) bool { return t == "download" || t == "ignore" || t == "stdout" }

// StreamLog queues a job's new entries for the next batch. Entries that
// are not JSON objects, and oversized ones, are left out (the analyzer
// counts them). The entries come decoded (store.LogEntry).
func (h *Hub) StreamLog(job *store.Job, entries []store.LogEntry) {
	ref := &jobRef{ident: job.Ident, job: job}
	now := h.opt.Now()
	out := make([]streamEntry, 0, len(entries))
	for _, e := range entries {
		if e.Kind != store.EntryObject {
			continue
		}
		out = append(out, streamEntry{job: ref, doc: []byte(e.Doc), typ: e.Type, isErr: e.IsError, at: now, score: e.Score})
	}
	if len(out) == 0 {
		return
	}
	h.mu.Lock()
	h.entries = append(h.entries, out...)
	h.mu.Unlock()
	h.poke()
}

// StreamEvent queues a job event for the next batch.
func (h *Hub) StreamEvent(ev coordinator.JobEvent) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
	h.poke()
}

func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run sends a batch as soon as entries or events come while the stream
// is quiet (MinFlushGap apart), and at most every FlushInterval under load
// (a batch of CoalesceAbove entries or more), until ctx ends; then it
// closes every client (going away).
func (h *Hub) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			h.shutdown()
			return
		case <-h.wake:
		}
		gap := h.opt.MinFlushGap
		if h.Flush() >= CoalesceAbove {
			gap = h.opt.FlushInterval
		}
		t := time.NewTimer(gap)
		select {
		case <-ctx.Done():
			t.Stop()
			h.shutdown()
			return
		case <-t.C:
		}
	}
}

func (h *Hub) shutdown() {
	h.mu.Lock()
	h.closed = true
	cs := make([]*client, 0, len(h.clients))
	for c := range h.clients {
		cs = append(cs, c)
	}
	h.mu.Unlock()
	for _, c := range cs {
		c.close(websocket.CloseGoingAway, "server shutting down")
	}
}

// Clients returns the number of connected clients of each protocol.
func (h *Hub) Clients() (upstream, v2 int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if c.v2 {
			v2++
		} else {
			upstream++
		}
	}
	return
}

// Flush sends what was queued since the last batch; it returns the
// number of log entries in it.
func (h *Hub) Flush() int {
	h.mu.Lock()
	entries, events := h.entries, h.events
	h.entries, h.events = nil, nil
	if len(entries) == 0 && len(events) == 0 {
		h.mu.Unlock()
		return 0
	}
	h.seq++
	seq := h.seq
	var ups, v2s []*client
	for c := range h.clients {
		if c.v2 {
			v2s = append(v2s, c)
		} else {
			ups = append(ups, c)
		}
	}
	h.mu.Unlock()

	if len(ups) > 0 {
		// One prepared message per entry, shared by every client; it is
		// compressed when the first client that negotiated compression
		// writes it, once, and never when every client dropped it.
		fs := make([]qframe, 0, len(entries))
		for i := range entries {
			e := &entries[i]
			if !upstreamType(e.typ) {
				continue
			}
			e.job.encode()
			b := upstreamFrame(e.doc, e.job.upstream)
			pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
			if err != nil {
				continue
			}
			fs = append(fs, qframe{pm: pm, n: 1, size: len(b), at: e.at})
		}
		if len(fs) > 0 {
			for _, c := range ups {
				c.pushLogs(fs)
			}
		}
	}
	if len(v2s) == 0 {
		return len(entries)
	}
	if len(events) > 0 {
		b := eventFrame(seq, h.opt.Now(), events)
		if pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b); err == nil {
			for _, c := range v2s {
				c.pushEvent(qframe{pm: pm, event: true, size: len(b)})
			}
		}
	}
	if len(entries) == 0 {
		return 0
	}
	byJob := map[string][]int{}
	for i, e := range entries {
		byJob[e.job.ident] = append(byJob[e.job.ident], i)
	}
	// A frame several clients share is prepared once (compressed at most
	// once); a frame only one client gets is kept as its bytes alone and
	// compressed as it is written: a prepared message would also hold a
	// full uncompressed copy for as long as the frame waits. Only shared
	// frames are kept for the rest of the flush, and no frame carries more
	// than maxFrameEntries entries or about maxFrameBytes: a batch that
	// piled up while the stream lagged, built for many clients with their
	// own subscriptions, must not be held whole in memory at once.
	type filterOf struct {
		key       string
		all, errs bool
		subs      []string
	}
	filters := make([]filterOf, len(v2s))
	sharing := map[string]int{}
	for i, c := range v2s {
		key, all, subs, errorsOnly := c.filter()
		filters[i] = filterOf{key: key, all: all, subs: subs, errs: errorsOnly}
		sharing[key]++
	}
	shared := map[string][]qframe{}
	for ci, c := range v2s {
		flt := filters[ci]
		fs, ok := shared[flt.key]
		if !ok {
			var idx []int
			if flt.all {
				for i := range entries {
					idx = append(idx, i)
				}
			} else {
				for _, id := range flt.subs {
					idx = append(idx, byJob[id]...)
				}
				slices.Sort(idx)
			}
			if flt.errs {
				idx = slices.DeleteFunc(idx, func(i int) bool { return !entries[i].isErr })
			}
			fs = nil
			for len(idx) > 0 {
				n, size := 0, 0
				for n < len(idx) && n < maxFrameEntries && size < maxFrameBytes {
					size += len(entries[idx[n]].doc)
					n++
				}
				b, oldest := logFrame(seq, entries, idx[:n])
				idx = idx[n:]
				if sharing[flt.key] == 1 {
					fs = append(fs, qframe{raw: b, n: n, size: len(b), at: oldest})
				} else if pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b); err == nil {
					fs = append(fs, qframe{pm: pm, n: n, size: len(b), at: oldest})
				}
			}
			if sharing[flt.key] > 1 {
				shared[flt.key] = fs
			}
		}
		if len(fs) > 0 {
			c.pushLogs(fs)
		}
	}
	return len(entries)
}

// upstreamFrame is entry merged with "job_data", as /logs/recent merges
// it (a job_data the entry already had is replaced).
func upstreamFrame(doc, jobData []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(doc) + len(jobData) + 16)
	appendWithJobData(&b, doc, jobData)
	return b.Bytes()
}

// eventFrame: {"seq":S,"n":0,"t":MS,"events":[…]}.
func eventFrame(seq uint64, now time.Time, events []coordinator.JobEvent) []byte {
	var b bytes.Buffer
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.FormatUint(seq, 10))
	b.WriteString(`,"n":0,"t":`)
	b.WriteString(strconv.FormatInt(now.UnixMilli(), 10))
	b.WriteString(`,"events":`)
	ev, _ := marshalCompact(events)
	b.Write(ev)
	b.WriteByte('}')
	return b.Bytes()
}

// logFrame: {"seq":S,"n":N,"t":MS,"entries":[{"ident":…,…entry}],
// "jobs":{IDENT:{raw hash}}}; t is when the oldest entry was read.
func logFrame(seq uint64, entries []streamEntry, idx []int) ([]byte, time.Time) {
	oldest := entries[idx[0]].at
	for _, i := range idx {
		if entries[i].at.Before(oldest) {
			oldest = entries[i].at
		}
	}
	// Sized up front: a frame is held until sent, and a buffer grown by
	// doubling would hold up to twice its bytes (and leave the smaller
	// ones as garbage).
	size := 64
	seen := map[string]bool{}
	for _, i := range idx {
		e := entries[i]
		size += len(e.doc) + len(e.job.ident) + 48
		if !seen[e.job.ident] {
			seen[e.job.ident] = true
			e.job.encode()
			size += len(e.job.ident) + len(e.job.raw) + 8
		}
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.FormatUint(seq, 10))
	b.WriteString(`,"n":`)
	b.WriteString(strconv.Itoa(len(idx)))
	b.WriteString(`,"t":`)
	b.WriteString(strconv.FormatInt(oldest.UnixMilli(), 10))
	b.WriteString(`,"entries":[`)
	jobs := map[string]*jobRef{}
	var order []string
	for k, i := range idx {
		e := entries[i]
		if k > 0 {
			b.WriteByte(',')
		}
		id, _ := marshalCompact(e.job.ident)
		b.WriteString(`{"ident":`)
		b.Write(id)
		inner := bytes.TrimSpace(e.doc[1 : len(e.doc)-1])
		if len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner)
		}
		if !math.IsInf(e.score, 0) && !math.IsNaN(e.score) {
			// Last, so it wins over a "score" the pipeline wrote.
			b.WriteString(`,"score":`)
			b.WriteString(strconv.FormatFloat(e.score, 'f', -1, 64))
		}
		b.WriteByte('}')
		if _, ok := jobs[e.job.ident]; !ok {
			order = append(order, e.job.ident)
		}
		jobs[e.job.ident] = e.job // the latest hash read wins
	}
	b.WriteString(`],"jobs":{`)
	for k, id := range order {
		if k > 0 {
			b.WriteByte(',')
		}
		j := jobs[id]
		j.encode()
		name, _ := marshalCompact(id)
		b.Write(name)
		b.WriteByte(':')
		b.Write(j.raw)
	}
	b.WriteString(`}}`)
	return b.Bytes(), oldest
}

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
	for {
		select {
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
		c.conn.SetWriteDeadline(time.Now().Add(writeWait))
		c.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseMessageTooBig, "message too big (64 KiB at most, decompressed)"),
			time.Now().Add(writeWait))
		return nil, websocket.ErrReadLimit
	}
	return msg, nil
}

// clientMsg is what a client of our protocol may send:
// {"subscribe":["IDENT",…] or "all"} and/or {"errors_only":true}.
type clientMsg struct {
	Subscribe  json.RawMessage `json:"subscribe"`
	ErrorsOnly *bool           `json:"errors_only"`
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

// handleMsg applies one client message of our protocol: a new filter
// (answered "subscribed") or, for anything else, an "error" notice that
// changes nothing.
func (c *client) handleMsg(msg []byte) {
	var m clientMsg
	if err := json.Unmarshal(msg, &m); err != nil {
		c.sendError("not a JSON object: " + err.Error())
		return
	}
	_, all, subs, errorsOnly := c.filter()
	if m.Subscribe != nil {
		var list []string
		var word string
		switch {
		case json.Unmarshal(m.Subscribe, &word) == nil && (word == "all" || word == "*"):
			all, subs = true, nil
		case json.Unmarshal(m.Subscribe, &list) == nil && len(list) <= 10000:
			all, subs = false, list
		default:
			c.sendError(`"subscribe" must be "all" or a list of at most 10000 idents`)
			return
		}
	}
	if m.ErrorsOnly != nil {
		errorsOnly = *m.ErrorsOnly
	}
	c.setFilter(all, subs, errorsOnly)
	c.sendNotice("subscribed", c.filterDoc())
}

// sendError queues an error notice for the client (never dropped).
func (c *client) sendError(text string) { c.sendNotice("error", text) }

// sendNotice queues {"seq":0,"n":0,KEY:VALUE} for this client alone; like
// an event it is never dropped.
func (c *client) sendNotice(key string, value any) {
	b, _ := marshalCompact(map[string]any{"seq": 0, "n": 0, key: value})
	if pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b); err == nil {
		c.pushEvent(qframe{pm: pm, event: true, size: len(b), note: key})
	}
}

// filterDoc is the client's filter as told to it.
func (c *client) filterDoc() map[string]any {
	_, all, subs, errorsOnly := c.filter()
	doc := map[string]any{"errors_only": errorsOnly}
	if all {
		doc["subscribe"] = "all"
	} else {
		doc["subscribe"] = append([]string{}, subs...)
	}
	return doc
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
	go c.writeLoop()
	go c.readLoop()
}

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
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/refusal"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
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
	// MaxStreamAge closes a connection that old with 1001 (going away):
	// the client reconnects (http.stream_max_age). 0: no bound.
	MaxStreamAge time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Hub fans the firehose out to WebSocket clients. It implements
// news.StreamSink.
type Hub struct {
	opt HubOptions
	log *slog.Logger
	// clientLoops counts the clients' reader and writer goroutines
	// (run.Go: a panic in one is logged, not fatal).
	clientLoops sync.WaitGroup
	upgrader    websocket.Upgrader

	mu      sync.Mutex
	entries []streamEntry
	events  []news.JobEvent
	// relayDropped is, per job ident, the entries the API log's publisher
	// dropped before they reached this node (StreamDropped), to be told
	// with the next batch.
	relayDropped map[string]int
	clients      map[*client]struct{}
	// refusals logs the clients it closes for cause, rate-limited.
	refusals *refusal.Log
	seq      uint64
	wake     chan struct{}
	closed   bool

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
	h.refusals = refusal.New(h.log, 0)
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
	job   *record.Job
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
	for _, k := range record.CounterFields {
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

// StreamLog queues a job's new entries for the next batch. Entries that
// are not JSON objects, and oversized ones, are left out (the analyzer
// counts them). The entries come decoded (record.LogEntry).
func (h *Hub) StreamLog(job *record.Job, entries []record.LogEntry) {
	ref := &jobRef{ident: job.Ident, job: job}
	now := h.opt.Now()
	out := make([]streamEntry, 0, len(entries))
	for _, e := range entries {
		if e.Kind != record.EntryObject {
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

// StreamDropped is told, per job ident, how many entries the API log's
// publisher dropped before they reached this node's stream
// (coordinator.DropSink). With the next batch, before its log frames,
// every client of our protocol subscribed to one of those jobs gets a
// notice {"seq":0,"n":0,"relay_dropped":{IDENT:K,…}} with the counts of
// its jobs (an errors-only client too: which of them were errors is not
// known). It is not the "dropped" frame, which counts the client's own
// queue's losses. Upstream's protocol cannot say it.
func (h *Hub) StreamDropped(dropped map[string]int) {
	if len(dropped) == 0 {
		return
	}
	h.mu.Lock()
	if h.relayDropped == nil {
		h.relayDropped = map[string]int{}
	}
	for id, n := range dropped {
		if n > 0 {
			h.relayDropped[id] += n
		}
	}
	h.mu.Unlock()
	h.poke()
}

// StreamEvent queues a job event for the next batch.
func (h *Hub) StreamEvent(ev news.JobEvent) {
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
	entries, events, relayDropped := h.entries, h.events, h.relayDropped
	h.entries, h.events, h.relayDropped = nil, nil, nil
	if len(entries) == 0 && len(events) == 0 && len(relayDropped) == 0 {
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
	if len(relayDropped) > 0 {
		for _, c := range v2s {
			tellRelayDropped(c, relayDropped)
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

// tellRelayDropped queues for c a relay_dropped notice with the counts of
// the jobs it is subscribed to (none: no notice).
func tellRelayDropped(c *client, dropped map[string]int) {
	_, all, subs, _ := c.filter()
	mine := dropped
	if !all {
		mine = map[string]int{}
		for _, id := range subs {
			if n, ok := dropped[id]; ok {
				mine[id] = n
			}
		}
	}
	if len(mine) > 0 {
		c.sendNotice("relay_dropped", mine)
	}
}

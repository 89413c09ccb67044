package coordinator

// The pipeline API's log entries on their way to the live stream of every
// node (doc/pipeline-api.md, Logs off Redis). They reach the leader in
// HTTP requests and are in no Redis list the firehose could read, while
// every node, standbys too, serves a dashboard. One path for all of them,
// the leader's own stream included: the API hands them to the
// APILogPublisher, which publishes them in bounded batches on
// store.ChannelAPILog; every node's APILogListener hands what it hears
// to its stream hub. The publisher never blocks the API: what does not
// fit its queue, or cannot be published in time, is dropped and counted
// (doc/reliability.md).

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/record"
)

// LogSink receives a job's log entries, in score order, with its record:
// the live stream's hub (the log half of StreamSink).
type LogSink interface {
	StreamLog(job *record.Job, entries []record.LogEntry)
}

// Bounds of the API log relay (APILogConfig's defaults).
const (
	DefaultAPILogQueueEntries = 20_000
	DefaultAPILogQueueBytes   = 16 << 20
	// DefaultAPILogMessageBytes bounds one message on the channel, sent or
	// accepted: an entry is at most 64 KiB (384 KiB escaped, at worst),
	// so one always fits with its job's record.
	DefaultAPILogMessageBytes   = 512 << 10
	DefaultAPILogMessageEntries = 500
	// maxIdentBytes bounds an ident in a message heard on the channel.
	maxIdentBytes = 256
)

// APILogConfig bounds the relay; zero values take the defaults.
type APILogConfig struct {
	// QueueEntries and QueueBytes bound what waits to be published; an
	// update that does not fit is dropped (counted: queue_full).
	QueueEntries, QueueBytes int
	// MessageBytes and MessageEntries bound one published message; a
	// listener refuses a larger message (bad_message).
	MessageBytes, MessageEntries int
}

func (c *APILogConfig) defaults() {
	if c.QueueEntries <= 0 {
		c.QueueEntries = DefaultAPILogQueueEntries
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultAPILogQueueBytes
	}
	if c.MessageBytes <= 0 {
		c.MessageBytes = DefaultAPILogMessageBytes
	}
	if c.MessageEntries <= 0 {
		c.MessageEntries = DefaultAPILogMessageEntries
	}
}

// apiLogMessage is one message on store.ChannelAPILog: the records of the
// jobs whose entries it carries, and the entries in the order they came.
type apiLogMessage struct {
	Jobs    map[string]map[string]string `json:"jobs"`
	Entries []apiLogEntry                `json:"entries"`
}

type apiLogEntry struct {
	Ident string  `json:"ident"`
	Score float64 `json:"score"`
	Doc   string  `json:"doc"`
}

// apiLogUpdate is what one StreamLog call queued.
type apiLogUpdate struct {
	job     *record.Job
	entries []record.LogEntry
	bytes   int
}

// APILogPublisher publishes the API's log entries on
// store.ChannelAPILog. StreamLog (the API's request path) only queues;
// Run publishes, one message at a time: while Redis is slow or away the
// queue fills up to its bound, and what does not fit is dropped.
type APILogPublisher struct {
	store Store
	cfg   APILogConfig
	log   *slog.Logger

	mu            sync.Mutex
	queue         []apiLogUpdate
	queuedEntries int
	queuedBytes   int
	wake          chan struct{}
	dropped       *dropLog
}

// NewAPILogPublisher returns a publisher; Run publishes what it queued.
func NewAPILogPublisher(st Store, cfg APILogConfig, log *slog.Logger) *APILogPublisher {
	cfg.defaults()
	l := serviceLog(log, "api-log")
	return &APILogPublisher{store: st, cfg: cfg, log: l, wake: make(chan struct{}, 1), dropped: newDropLog(l)}
}

// StreamLog queues a job's new entries to be published; it never blocks.
// What does not fit the queue is dropped and counted.
func (p *APILogPublisher) StreamLog(job *record.Job, entries []record.LogEntry) {
	if job == nil || job.Ident == "" || len(entries) == 0 {
		return
	}
	n := 0
	for _, e := range entries {
		n += len(e.Doc) + 32
	}
	p.mu.Lock()
	if p.queuedEntries+len(entries) > p.cfg.QueueEntries || p.queuedBytes+n > p.cfg.QueueBytes {
		p.mu.Unlock()
		metrics.APILogDropped("queue_full", len(entries))
		p.dropped.add("queue_full", len(entries), "API log entries wait to be published beyond the queue's bound (Redis slow or away): dropped from the live stream")
		return
	}
	p.queue = append(p.queue, apiLogUpdate{job: job, entries: entries, bytes: n})
	p.queuedEntries += len(entries)
	p.queuedBytes += n
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run publishes the queued entries until ctx ends: all that waits, in
// messages of at most MessageEntries entries and MessageBytes bytes, one
// PUBLISH each; what comes while one is published waits for the next
// round (batching under load, no added delay when quiet).
func (p *APILogPublisher) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		q := p.queue
		p.queue, p.queuedEntries, p.queuedBytes = nil, 0, 0
		p.mu.Unlock()
		for _, m := range p.messages(q) {
			p.publish(ctx, m)
		}
	}
}

// encodedMessage is a message ready to publish.
type encodedMessage struct {
	body    string
	entries int
}

// messages encodes q into messages within the bounds; an entry that does
// not fit a message even alone (with its job's record) is dropped.
func (p *APILogPublisher) messages(q []apiLogUpdate) []encodedMessage {
	return encodeLogMessages(q, p.cfg.MessageEntries, p.cfg.MessageBytes, func() {
		metrics.APILogDropped("too_large", 1)
		p.dropped.add("too_large", 1, "an API log entry with its job's record is larger than a message on the channel may be: dropped from the live stream")
	})
}

// encodeLogMessages encodes q into apiLogMessage documents of at most
// maxEntries entries and maxBytes bytes, in q's order; tooLarge is called
// for each entry that does not fit a message even alone (with its job's
// record), which is left out. The API log's publisher and the firehose's
// relay share it.
func encodeLogMessages(q []apiLogUpdate, maxEntries, maxBytes int, tooLarge func()) []encodedMessage {
	var out []encodedMessage
	var jobs, entries []string
	seen := map[string]bool{}
	size := 0
	flush := func() {
		if len(entries) == 0 {
			return
		}
		out = append(out, encodedMessage{
			body:    `{"jobs":{` + strings.Join(jobs, ",") + `},"entries":[` + strings.Join(entries, ",") + `]}`,
			entries: len(entries)})
		jobs, entries, size = nil, nil, 0
		clear(seen)
	}
	const overhead = len(`{"jobs":{},"entries":[]}`)
	for _, u := range q {
		var job string
		for _, e := range u.entries {
			eb, _ := json.Marshal(apiLogEntry{Ident: u.job.Ident, Score: e.Score, Doc: e.Doc})
			if job == "" {
				k, _ := json.Marshal(u.job.Ident)
				v, _ := json.Marshal(u.job.Fields)
				job = string(k) + ":" + string(v)
			}
			newJob := !seen[u.job.Ident]
			need := len(eb) + 1
			if newJob {
				need += len(job) + 1
			}
			if len(entries) >= maxEntries || overhead+size+need > maxBytes {
				flush()
				newJob, need = true, len(eb)+1+len(job)+1
			}
			if overhead+need > maxBytes {
				tooLarge()
				continue
			}
			if newJob {
				seen[u.job.Ident] = true
				jobs = append(jobs, job)
			}
			entries = append(entries, string(eb))
			size += need
		}
	}
	flush()
	return out
}

// publish publishes one message; a PUBLISH that fails (within the Redis
// client's timeouts: about 5 s against a server that does not answer)
// drops its entries, counted as publish_failed.
func (p *APILogPublisher) publish(ctx context.Context, m encodedMessage) {
	heard, err := p.store.PublishAPILog(ctx, m.body)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		metrics.APILogDropped("publish_failed", m.entries)
		p.dropped.add("publish_failed", m.entries, "cannot publish API log entries: dropped from the live stream", "err", err)
		return
	}
	metrics.APILogRelayed("published", m.entries)
	if heard == 0 {
		metrics.APILogRelayed("published_unheard", m.entries)
	}
}

// APILogListener hands the API log entries published on
// store.ChannelAPILog to a node's live stream.
type APILogListener struct {
	store   Store
	sink    LogSink
	cfg     APILogConfig
	log     *slog.Logger
	dropped *dropLog

	ready     chan struct{}
	readyOnce sync.Once
}

// NewAPILogListener returns a listener feeding sink; Run listens.
func NewAPILogListener(st Store, sink LogSink, cfg APILogConfig, log *slog.Logger) *APILogListener {
	cfg.defaults()
	l := serviceLog(log, "api-log")
	return &APILogListener{store: st, sink: sink, cfg: cfg, log: l, dropped: newDropLog(l), ready: make(chan struct{})}
}

// Ready is closed once the listener was subscribed the first time.
func (l *APILogListener) Ready() <-chan struct{} { return l.ready }

// Run listens until ctx ends, reconnecting with backoff (entries
// published while the subscription is down do not reach this node's
// stream; /logs/recent still has the last of them).
func (l *APILogListener) Run(ctx context.Context) {
	run.Reconnect(ctx, l.log, "API log subscription", run.PubSubBackoff, func(ctx context.Context) (bool, error) {
		return l.store.ListenAPILog(ctx, func() { l.readyOnce.Do(func() { close(l.ready) }) }, l.handle)
	})
}

// handle checks one message (anyone who can write to Redis can publish
// on the channel) and hands its entries to the sink, job by job, in
// order.
func (l *APILogListener) handle(msg string) {
	bad := func(n int, why string) {
		metrics.APILogDropped("bad_message", n)
		l.dropped.add("bad_message", n, "ignoring API log entries that are not ones", "why", why, "msg", text.Cut(msg, 200))
	}
	if len(msg) > l.cfg.MessageBytes {
		bad(1, "message too large")
		return
	}
	var m apiLogMessage
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		bad(1, "not JSON: "+err.Error())
		return
	}
	if len(m.Entries) > l.cfg.MessageEntries {
		bad(1, "too many entries")
		return
	}
	order, by, n, refused := splitLogMessage(m)
	if refused > 0 {
		bad(refused, "entries without a job record, ident, score or with a document too large")
	}
	for _, id := range order {
		l.sink.StreamLog(record.DecodeJob(id, m.Jobs[id]), by[id])
	}
	if n > 0 {
		metrics.APILogRelayed("received", n)
	}
}

// splitLogMessage checks m's entries and groups the good ones by job, in
// the order of their first entry: n good, refused the others (no ident or
// job record, a bad score, a document too large).
func splitLogMessage(m apiLogMessage) (order []string, by map[string][]record.LogEntry, n, refused int) {
	by = map[string][]record.LogEntry{}
	for _, e := range m.Entries {
		fields, ok := m.Jobs[e.Ident]
		if e.Ident == "" || len(e.Ident) > maxIdentBytes || !ok || fields == nil ||
			e.Score <= 0 || math.IsInf(e.Score, 0) || math.IsNaN(e.Score) || len(e.Doc) > record.MaxLogEntryBytes {
			refused++
			continue
		}
		if _, ok := by[e.Ident]; !ok {
			order = append(order, e.Ident)
		}
		by[e.Ident] = append(by[e.Ident], record.NewLogEntry(e.Doc, e.Score))
		n++
	}
	return order, by, n, refused
}

// dropLog logs drops of one kind at most every dropLogEvery, with the
// count since the last line.
type dropLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]time.Time
	n    map[string]int
}

const dropLogEvery = 10 * time.Second

func newDropLog(log *slog.Logger) *dropLog {
	return &dropLog{log: log, last: map[string]time.Time{}, n: map[string]int{}}
}

func (d *dropLog) add(reason string, n int, msg string, args ...any) {
	d.mu.Lock()
	d.n[reason] += n
	now := time.Now()
	if now.Sub(d.last[reason]) < dropLogEvery {
		d.mu.Unlock()
		return
	}
	d.last[reason] = now
	total := d.n[reason]
	d.n[reason] = 0
	d.mu.Unlock()
	d.log.Warn(msg, append([]any{"reason", reason, "entries", total}, args...)...)
}

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
// (doc/reliability.md), and the count per job is carried by its next
// message to every node's hub, which tells its clients.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
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

// DropSink is a LogSink that is also told, per job ident, how many of the
// job's entries the publisher dropped before they reached the channel
// (the live stream's hub tells its clients; doc/pipeline-api.md, Logs off
// Redis). The listener tells it before it hands over the entries of the
// message that carried the count.
type DropSink interface {
	StreamDropped(dropped map[string]int)
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
	// maxDroppedCount bounds one job's count of dropped entries in a
	// message (the publisher's count stops there; a listener refuses a
	// larger one).
	maxDroppedCount = 1 << 40
	// apiLogRetry is the wait before a publisher whose publish failed
	// tries again to tell its counts of dropped entries when nothing else
	// comes.
	apiLogRetry = time.Second
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
// jobs whose entries it carries, and the entries in the order they came;
// Dropped (optional, absent from older publishers' messages) how many
// entries of each job the publisher dropped since its last message,
// {"IDENT":N,…}, checked by parseDropped.
type apiLogMessage struct {
	Jobs    map[string]map[string]string `json:"jobs"`
	Entries []apiLogEntry                `json:"entries"`
	Dropped json.RawMessage              `json:"dropped,omitempty"`
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
	// untold is, per job ident, the entries dropped (any reason) and not
	// yet told in a message that was published.
	untold map[string]int
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
		p.untoldLocked(job.Ident, len(entries))
		p.mu.Unlock()
		metrics.APILogDropped("queue_full", len(entries))
		p.dropped.add("queue_full", len(entries), "API log entries wait to be published beyond the queue's bound (Redis slow or away): dropped from the live stream")
		p.poke()
		return
	}
	p.queue = append(p.queue, apiLogUpdate{job: job, entries: entries, bytes: n})
	p.queuedEntries += len(entries)
	p.queuedBytes += n
	p.mu.Unlock()
	p.poke()
}

// queued reports whether updates wait to be published.
func (p *APILogPublisher) queued() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) > 0
}

func (p *APILogPublisher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// untoldLocked adds n dropped entries of ident to the count to tell.
func (p *APILogPublisher) untoldLocked(ident string, n int) {
	if p.untold == nil {
		p.untold = map[string]int{}
	}
	p.untold[ident] = min(p.untold[ident]+n, maxDroppedCount)
}

// untell puts counts taken for a message that was not published back.
func (p *APILogPublisher) untell(counts map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, n := range counts {
		p.untoldLocked(id, n)
	}
}

// takeUntold takes counts to tell, at most maxIdents jobs in at most
// budget bytes: the "dropped" member to add to a message ("" when none)
// and the counts it carries.
func (p *APILogPublisher) takeUntold(maxIdents, budget int) (string, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.untold) == 0 {
		return "", nil
	}
	const overhead = len(`,"dropped":{}`)
	var b strings.Builder
	taken := map[string]int{}
	for id, n := range p.untold {
		k, _ := json.Marshal(id)
		item := string(k) + ":" + strconv.Itoa(n)
		if len(taken) >= maxIdents || overhead+b.Len()+len(item)+1 > budget {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
		taken[id] = n
	}
	if len(taken) == 0 {
		return "", nil
	}
	for id := range taken {
		delete(p.untold, id)
	}
	return `,"dropped":{` + b.String() + `}`, taken
}

// Run publishes the queued entries until ctx ends: all that waits, in
// messages of at most MessageEntries entries and MessageBytes bytes, one
// PUBLISH each; what comes while one is published waits for the next
// round (batching under load, no added delay when quiet).
//
// Every message carries the counts of entries dropped (any reason) since
// the last one that was published and not told yet; when the round's
// messages are out and counts are left (drops while nothing else was
// queued), messages with no entries carry them. A message that cannot be
// published gives its counts back, with its own entries, to the next
// one: a count may be told twice, never lost; after a failure the next
// try comes with the next update or apiLogRetry later.
func (p *APILogPublisher) Run(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry:
		}
		retry = nil
		p.mu.Lock()
		q := p.queue
		p.queue, p.queuedEntries, p.queuedBytes = nil, 0, 0
		p.mu.Unlock()
		ok := true
		for _, m := range p.messages(q) {
			ok = p.publish(ctx, m) && ok
		}
		for ok && !p.queued() {
			// Counts left over: told alone while nothing else waits (the
			// next round's messages carry them otherwise).
			const empty = `{"jobs":{},"entries":[]}`
			d, counts := p.takeUntold(p.cfg.MessageEntries, p.cfg.MessageBytes-len(empty))
			if counts == nil {
				break
			}
			ok = p.publish(ctx, encodedMessage{body: empty, told: d, counts: counts})
		}
		if !ok && ctx.Err() == nil {
			retry = time.After(apiLogRetry)
		}
	}
}

// encodedMessage is a message ready to publish: entries entries, perJob
// of them per job ident; told, when not "", the "dropped" member to add
// (counts, the counts it carries).
type encodedMessage struct {
	body    string
	entries int
	perJob  map[string]int
	told    string
	counts  map[string]int
}

// messages encodes q into messages within the bounds; an entry that does
// not fit a message even alone (with its job's record) is dropped.
func (p *APILogPublisher) messages(q []apiLogUpdate) []encodedMessage {
	return encodeLogMessages(q, p.cfg.MessageEntries, p.cfg.MessageBytes, func(ident string) {
		p.mu.Lock()
		p.untoldLocked(ident, 1)
		p.mu.Unlock()
		metrics.APILogDropped("too_large", 1)
		p.dropped.add("too_large", 1, "an API log entry with its job's record is larger than a message on the channel may be: dropped from the live stream")
	})
}

// encodeLogMessages encodes q into apiLogMessage documents of at most
// maxEntries entries and maxBytes bytes, in q's order; tooLarge is called
// with the job's ident for each entry that does not fit a message even
// alone (with its job's record), which is left out. The API log's
// publisher and the firehose's relay share it.
func encodeLogMessages(q []apiLogUpdate, maxEntries, maxBytes int, tooLarge func(ident string)) []encodedMessage {
	var out []encodedMessage
	var jobs, entries []string
	seen := map[string]bool{}
	perJob := map[string]int{}
	size := 0
	flush := func() {
		if len(entries) == 0 {
			return
		}
		out = append(out, encodedMessage{
			body:    `{"jobs":{` + strings.Join(jobs, ",") + `},"entries":[` + strings.Join(entries, ",") + `]}`,
			entries: len(entries), perJob: perJob})
		jobs, entries, size = nil, nil, 0
		clear(seen)
		perJob = map[string]int{}
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
				tooLarge(u.job.Ident)
				continue
			}
			if newJob {
				seen[u.job.Ident] = true
				jobs = append(jobs, job)
			}
			entries = append(entries, string(eb))
			perJob[u.job.Ident]++
			size += need
		}
	}
	flush()
	return out
}

// publish publishes one message, with the counts of dropped entries not
// told yet that fit it (unless it carries some already); a PUBLISH that
// fails (within the Redis client's timeouts: about 5 s against a server
// that does not answer) drops its entries, counted as publish_failed, and
// gives its counts back with them. It reports whether it published.
func (p *APILogPublisher) publish(ctx context.Context, m encodedMessage) bool {
	if m.counts == nil {
		m.told, m.counts = p.takeUntold(p.cfg.MessageEntries, p.cfg.MessageBytes-len(m.body))
	}
	body := m.body
	if m.told != "" {
		body = body[:len(body)-1] + m.told + "}"
	}
	heard, err := p.store.PublishAPILog(ctx, body)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		p.untell(m.counts)
		p.untell(m.perJob)
		if m.entries > 0 {
			metrics.APILogDropped("publish_failed", m.entries)
			p.dropped.add("publish_failed", m.entries, "cannot publish API log entries: dropped from the live stream", "err", err)
		}
		return false
	}
	if m.entries == 0 {
		return true
	}
	metrics.APILogRelayed("published", m.entries)
	if heard == 0 {
		metrics.APILogRelayed("published_unheard", m.entries)
	}
	return true
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
	if dropped, err := parseDropped(m.Dropped, l.cfg.MessageEntries); err != nil {
		bad(1, "dropped: "+err.Error())
	} else if ds, ok := l.sink.(DropSink); ok && len(dropped) > 0 {
		ds.StreamDropped(dropped)
	}
	for _, id := range order {
		l.sink.StreamLog(record.DecodeJob(id, m.Jobs[id]), by[id])
	}
	if n > 0 {
		metrics.APILogRelayed("received", n)
	}
}

// parseDropped checks a message's "dropped" member (absent or null: no
// counts): an object of at most maxIdents job idents, each a count from 1
// to maxDroppedCount.
func parseDropped(raw json.RawMessage, maxIdents int) (map[string]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.Number
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not an object of counts")
	}
	if len(m) > maxIdents {
		return nil, fmt.Errorf("%d jobs, at most %d", len(m), maxIdents)
	}
	out := make(map[string]int, len(m))
	for id, v := range m {
		if id == "" || len(id) > maxIdentBytes {
			return nil, fmt.Errorf("an ident empty or over %d bytes", maxIdentBytes)
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 1 || n > maxDroppedCount {
			return nil, fmt.Errorf("count %q of %q is not a whole number from 1 to %d", text.Cut(string(v), 40), text.Cut(id, 40), int64(maxDroppedCount))
		}
		out[id] = int(n)
	}
	return out, nil
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

package coordinator

// The live stream's relay under ha.enabled (doc/architecture.md, The
// follower's stream). Every node serves the dashboard and the streams,
// but only the leader runs the firehose: it moves the broadcast bookmarks,
// a write. So the leader's firehose sends nothing to its own hub; it
// appends each batch it reads (the entries, as the API log's messages)
// and the job events it emits to the Redis stream store.KeyStreamRelay,
// in the script that moves the bookmarks (store.RelayBroadcast), and
// every node, the leader included, runs a RelayReader that reads the
// stream after the last message it handed on (XREAD BLOCK, no write)
// and feeds its hub. When the leadership moves, the readers go on from
// their place in the one stream, and the new leader's firehose resumes
// from the bookmarks the old one moved with its last append.

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
)

// Bounds of one relay message: the API log's (a message always holds one
// entry with its job's record).
const (
	relayMessageEntries = DefaultAPILogMessageEntries
	relayMessageBytes   = DefaultAPILogMessageBytes
	// relayReadCount is the most messages one read takes (at most 16 MiB
	// of messages of 512 KiB).
	relayReadCount = 32
	// relayBlock is how long one read waits for a message (and so the
	// longest a stop waits for the reader).
	relayBlock = 2 * time.Second
)

// relayMessage is one message of the relay: the API log's shape (the
// records of the jobs whose entries it carries, the entries in order) or
// job events.
type relayMessage struct {
	Jobs    map[string]map[string]string `json:"jobs,omitempty"`
	Entries []apiLogEntry                `json:"entries,omitempty"`
	Events  []news.JobEvent              `json:"events,omitempty"`
}

// relayEventsBody encodes job events as one relay message.
func relayEventsBody(evs []news.JobEvent) string {
	b, _ := json.Marshal(relayMessage{Events: evs})
	return string(b)
}

// RelayReader feeds a node's live stream from the relay. It only reads.
type RelayReader struct {
	store Store
	sink  news.StreamSink
	log   *slog.Logger
	lost  *dropLog

	// last is the ID of the last message handed on and seq its number
	// (its goroutine only).
	last string
	seq  int64

	mu      sync.Mutex
	ok      bool   // the last read succeeded
	problem string // why not

	ready     chan struct{}
	readyOnce sync.Once
}

// NewRelayReader returns a reader feeding sink; Run reads.
func NewRelayReader(st Store, sink news.StreamSink, log *slog.Logger) *RelayReader {
	l := serviceLog(log, "stream-relay")
	return &RelayReader{store: st, sink: sink, log: l, lost: newDropLog(l), ready: make(chan struct{}),
		problem: "not read yet"}
}

// Ready is closed once the reader knows where the relay ends (what is
// appended after that reaches the sink).
func (r *RelayReader) Ready() <-chan struct{} { return r.ready }

// Health reports whether the reader's last read of the relay succeeded,
// and if not, why (for /readyz: a node whose reader fails serves viewers
// a stream that stopped).
func (r *RelayReader) Health() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.problem
}

func (r *RelayReader) setHealth(err error) {
	r.mu.Lock()
	r.ok = err == nil
	r.problem = ""
	if err != nil {
		r.problem = err.Error()
	}
	r.mu.Unlock()
}

// Run reads the relay until ctx ends, from where it ends at the first
// read; after a failure it goes on from the last message it handed on,
// with backoff. Messages it missed (trimmed by the relay's bound before it
// read them) show as a gap in their numbers, and are counted.
func (r *RelayReader) Run(ctx context.Context) {
	run.Reconnect(ctx, r.log, "stream relay", run.PubSubBackoff, func(ctx context.Context) (bool, error) {
		if r.last == "" {
			_, last, err := r.store.RelayEnds(ctx)
			if err != nil {
				r.setHealth(err)
				return false, err
			}
			r.last = last
			if r.last == "" {
				r.last = "0-0"
			}
		}
		r.setHealth(nil)
		r.readyOnce.Do(func() { close(r.ready) })
		up := false
		for {
			msgs, err := r.store.ReadRelay(ctx, r.last, relayReadCount, relayBlock)
			if err != nil {
				r.setHealth(err)
				return up, err
			}
			up = true
			r.setHealth(nil)
			for _, m := range msgs {
				r.checkSeq(m.Seq)
				r.handle(m.Body)
				r.last = m.ID
			}
		}
	})
}

// checkSeq counts the messages missed before one numbered seq.
func (r *RelayReader) checkSeq(seq int64) {
	if r.seq > 0 && seq > r.seq+1 {
		n := int(seq - r.seq - 1)
		metrics.RelayLost("trimmed", n)
		r.lost.add("trimmed", n, "relay messages were trimmed before this node read them (it fell further behind than the relay's bound): their entries are missing from this node's stream")
	}
	r.seq = seq // a smaller number: the counter was reset
}

// handle checks one message (anyone who can write to Redis can append to
// the stream) and hands its entries to the sink, job by job, in order,
// then its events.
func (r *RelayReader) handle(msg string) {
	bad := func(n int, why string) {
		metrics.RelayLost("bad_message", n)
		r.lost.add("bad_message", n, "ignoring relay messages or entries that are not ones", "why", why, "msg", text.Cut(msg, 200))
	}
	if len(msg) > relayMessageBytes {
		bad(1, "message too large")
		return
	}
	var m relayMessage
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		bad(1, "not JSON: "+err.Error())
		return
	}
	if len(m.Entries) > relayMessageEntries || len(m.Events) > relayMessageEntries {
		bad(1, "too many entries")
		return
	}
	order, by, n, refused := splitLogMessage(apiLogMessage{Jobs: m.Jobs, Entries: m.Entries})
	if refused > 0 {
		bad(refused, "entries without a job record, ident, score or with a document too large")
	}
	for _, id := range order {
		r.sink.StreamLog(record.DecodeJob(id, m.Jobs[id]), by[id])
	}
	events := 0
	for _, ev := range m.Events {
		if ev.Ident == "" || len(ev.Ident) > maxIdentBytes || ev.Event == "" {
			bad(1, "an event without an ident or a name")
			continue
		}
		r.sink.StreamEvent(ev)
		events++
	}
	if n+events > 0 {
		metrics.RelayEntries("received", n+events)
	}
}

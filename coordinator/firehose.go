package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
)

// JobEvent is one change of a job, as the bot publishes it on
// ChannelJobEvents (see doc/protocol.md, Live stream):
// {"ts":…,"ident":"…","event":"queued|settings|…","by":"…","detail":{…}}.
type JobEvent struct {
	TS     float64         `json:"ts"`
	Ident  string          `json:"ident"`
	Event  string          `json:"event"`
	By     string          `json:"by,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// The job events are the history's (coordinator/store/history.go). The firehose
// derives started, finished, aborted and failed itself as well (from
// `working`, the job hash and the failure record), so they are never
// missed even when a publication is.

// isEndEvent reports whether e ends a job.
func isEndEvent(e string) bool {
	return e == store.EventFinished || e == store.EventAborted || e == store.EventFailed
}

// StreamSink receives what the firehose reads. Both methods are called
// from the firehose's goroutines and must not block for long.
type StreamSink interface {
	// StreamLog gets a job's new log entries, in score order, with its raw
	// hash as read just before them.
	StreamLog(ident string, job map[string]string, entries []store.LogEntry)
	// StreamEvent gets a job event; a lifecycle event (queued, started,
	// finished, aborted, failed, expired) comes once per run of a job.
	StreamEvent(ev JobEvent)
}

// FirehoseConfig configures the firehose; zero values take defaults.
type FirehoseConfig struct {
	// Batch is the most entries of one job one read takes (default 5000).
	Batch int
	// WorkingInterval between two looks at `working`, which is how jobs
	// starting and ending are seen (default 1 s).
	WorkingInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Firehose is upstream's log firehose inside the node: for every ident on
// `updates` it reads the job's log entries past
// last_broadcasted_log_entry, hands them to the sink with the job hash and
// moves the bookmark. It also watches `working` and listens to
// ChannelJobEvents, so the sink learns of every job starting and ending.
type Firehose struct {
	store *store.Store
	sink  StreamSink
	cfg   FirehoseConfig
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}

	seenMu sync.Mutex
	seen   map[string]*seenEvents

	// working state of the watcher (its goroutine only).
	working map[string]bool
	ending  map[string]int // left working, end not known yet: tries
	primed  bool

	badKeys onceLog

	// ready is closed once the job events subscription is up and `working`
	// was looked at once (Ready).
	ready                 chan struct{}
	readyOnce             sync.Once
	eventsUp, workingSeen bool
	readyMu               sync.Mutex

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type seenEvents struct {
	events map[string]bool
	ended  bool
	at     time.Time
}

// NewFirehose returns a firehose feeding sink; Start runs it.
func NewFirehose(store *store.Store, sink StreamSink, cfg FirehoseConfig, log *slog.Logger) *Firehose {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	if cfg.WorkingInterval <= 0 {
		cfg.WorkingInterval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Firehose{store: store, sink: sink, cfg: cfg, log: log.With("service", "firehose"),
		pending: map[string]struct{}{}, wake: make(chan struct{}, 1), seen: map[string]*seenEvents{},
		working: map[string]bool{}, ending: map[string]int{}, ready: make(chan struct{})}
}

// Ready is closed once the firehose listens to job events and has taken
// its first look at `working`: jobs starting after that are reported.
func (f *Firehose) Ready() <-chan struct{} { return f.ready }

func (f *Firehose) markReady(events, working bool) {
	f.readyMu.Lock()
	f.eventsUp = f.eventsUp || events
	f.workingSeen = f.workingSeen || working
	both := f.eventsUp && f.workingSeen
	f.readyMu.Unlock()
	if both {
		f.readyOnce.Do(func() { close(f.ready) })
	}
}

// Notify asks for ident's new log entries to be streamed soon. It never
// blocks: register it with Updates.OnUpdate.
func (f *Firehose) Notify(_ context.Context, ident string) {
	if ident == "" {
		return
	}
	f.mu.Lock()
	f.pending[ident] = struct{}{}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// CatchUp notifies every job in `working`: register it with
// Updates.OnSubscribe, so entries announced while the subscription was
// down are streamed too.
func (f *Firehose) CatchUp(ctx context.Context) {
	ids, err := f.store.WorkingJobs(ctx)
	if err != nil {
		f.log.Warn("catch-up: cannot list working", "err", err)
		return
	}
	for _, id := range ids {
		f.Notify(ctx, id)
	}
}

// Start runs the firehose until ctx ends or Stop.
func (f *Firehose) Start(ctx context.Context) {
	ctx, f.cancel = context.WithCancel(ctx)
	run.Go(&f.wg, f.log, "firehose", func() { f.work(ctx) })
	run.Go(&f.wg, f.log, "firehose working watcher", func() {
		run.Every(ctx, f.log, "firehose-working", run.Schedule{Interval: f.cfg.WorkingInterval, Now: true},
			func(ctx context.Context) { f.watchWorking(ctx) })
	})
	run.Go(&f.wg, f.log, "job events listener", func() { f.listenEvents(ctx) })
}

// Stop ends the firehose and waits for it.
func (f *Firehose) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
}

func (f *Firehose) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		batch := f.pending
		f.pending = map[string]struct{}{}
		f.mu.Unlock()
		for ident := range batch {
			if ctx.Err() != nil {
				return
			}
			if err := f.Broadcast(ctx, ident); err != nil && ctx.Err() == nil {
				var naj *store.NotAJobError
				if errors.As(err, &naj) {
					if f.badKeys.first(naj.Key) {
						f.log.Warn("skipping a key that is not a job", "ident", ident)
					}
					continue
				}
				f.log.Warn("stream failed", "ident", ident, "err", err)
			}
		}
		f.badKeys.endCycle(f.log, "working (keys that are not jobs, not streamed)", time.Now())
	}
}

// Broadcast streams every log entry of ident past its broadcast bookmark
// and moves the bookmark; when the hash shows the job ended, the end event
// follows its last entries.
func (f *Firehose) Broadcast(ctx context.Context, ident string) error {
	for {
		u, err := f.store.ReadUnbroadcast(ctx, ident, f.cfg.Batch)
		if err != nil || u.Job == nil {
			return err
		}
		if len(u.Entries) > 0 {
			f.sink.StreamLog(ident, u.Job, u.Entries)
			last := u.Entries[len(u.Entries)-1].Score
			moved, err := f.store.MarkBroadcast(ctx, ident, u.Bookmark, last, unixFloat(f.cfg.Now()))
			if err != nil {
				return err
			}
			if !moved {
				return nil // another node streams this job too, or it expired
			}
		}
		if len(u.Entries) < f.cfg.Batch {
			if ev, ok := endFromHash(ident, u.Job, nil); ok {
				f.emit(ev)
			}
			return nil
		}
	}
}

func unixFloat(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// endFromHash tells from a job hash (and its failure record) whether and
// how the job ended.
func endFromHash(ident string, job map[string]string, fail *store.Failure) (JobEvent, bool) {
	ev := JobEvent{Ident: ident}
	detail := map[string]any{}
	switch {
	case fail != nil || job["failed"] == "true":
		ev.Event = store.EventFailed
		reason := job["failed_reason"]
		if fail != nil {
			reason = fail.Reason
			ev.By = fail.FailedBy
			ev.TS = fail.FailedAt
		}
		detail["reason"] = reason
	case job["finished_at"] != "":
		ev.Event = store.EventFinished
		if job["aborted"] == "true" {
			ev.Event = store.EventAborted
		}
		ev.TS, _ = strconv.ParseFloat(job["finished_at"], 64)
	default:
		return ev, false
	}
	if u := job["url"]; u != "" {
		detail["url"] = u
	} else if fail != nil {
		detail["url"] = fail.URL
	}
	ev.Detail, _ = json.Marshal(detail)
	return ev, true
}

// watchWorking compares `working` with the last look: a new ident started,
// a gone one ended (how is read from its hash and failure record; when
// neither tells yet, it is looked at again for a few rounds).
func (f *Firehose) watchWorking(ctx context.Context) {
	ids, err := f.store.WorkingJobs(ctx)
	if err != nil {
		f.log.Warn("cannot list working", "err", err)
		return
	}
	now := map[string]bool{}
	for _, id := range ids {
		now[id] = true
		if !f.working[id] && f.primed {
			st, err := f.store.ReadEndState(ctx, id)
			if err != nil {
				f.log.Warn("cannot read a started job", "ident", id, "err", err)
				return
			}
			detail := map[string]any{}
			if st.Job != nil {
				detail["url"] = st.Job["url"]
				detail["pipeline_id"] = st.Job["pipeline_id"]
			}
			b, _ := json.Marshal(detail)
			f.emit(JobEvent{TS: unixFloat(f.cfg.Now()), Ident: id, Event: store.EventStarted, Detail: b})
		}
		delete(f.ending, id)
	}
	for id := range f.working {
		if !now[id] {
			f.ending[id] = 0
		}
	}
	f.working, f.primed = now, true
	f.markReady(false, true)
	for id, tries := range f.ending {
		st, err := f.store.ReadEndState(ctx, id)
		if err != nil {
			f.log.Warn("cannot read an ended job", "ident", id, "err", err)
			return
		}
		if st.Job != nil && st.Failure == nil && st.Job["failed"] != "true" && st.Job["finished_at"] == "" && tries < 10 {
			f.ending[id] = tries + 1
			continue
		}
		delete(f.ending, id)
		job := st.Job
		if job == nil {
			job = map[string]string{}
		}
		if ev, ok := endFromHash(id, job, st.Failure); ok {
			f.Notify(ctx, id) // stream the last entries first, if any are left
			f.emit(ev)
		}
	}
	f.pruneSeen()
}

// listenEvents follows ChannelJobEvents, reconnecting with backoff.
func (f *Firehose) listenEvents(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		got, err := f.store.ListenJobEvents(ctx, func() { f.markReady(true, false) }, func(doc string) {
			var ev JobEvent
			if err := json.Unmarshal([]byte(doc), &ev); err != nil || ev.Ident == "" || ev.Event == "" {
				f.log.Warn("ignoring a job event that is not one", "doc", text.Cut(doc, 200))
				return
			}
			f.emit(ev)
		})
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = time.Second
		}
		f.log.Warn("job events subscription lost, reconnecting", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// emit hands ev to the sink, once per lifecycle event and run of a job: a
// job's lifecycle events are forgotten when it is queued or started again
// after it ended (the same URL archived again gets the same ident).
func (f *Firehose) emit(ev JobEvent) {
	if ev.TS == 0 {
		ev.TS = unixFloat(f.cfg.Now())
	}
	switch ev.Event {
	case store.EventQueued, store.EventStarted, store.EventFinished, store.EventAborted, store.EventFailed, store.EventExpired:
		f.seenMu.Lock()
		s := f.seen[ev.Ident]
		if s == nil || (s.ended && (ev.Event == store.EventQueued || ev.Event == store.EventStarted)) {
			s = &seenEvents{events: map[string]bool{}}
			f.seen[ev.Ident] = s
		}
		if s.events[ev.Event] || (isEndEvent(ev.Event) && s.ended) {
			f.seenMu.Unlock()
			return
		}
		s.events[ev.Event] = true
		s.ended = s.ended || isEndEvent(ev.Event)
		s.at = f.cfg.Now()
		f.seenMu.Unlock()
	}
	f.sink.StreamEvent(ev)
}

// pruneSeen forgets jobs that ended over an hour ago.
func (f *Firehose) pruneSeen() {
	cut := f.cfg.Now().Add(-time.Hour)
	f.seenMu.Lock()
	defer f.seenMu.Unlock()
	for id, s := range f.seen {
		if s.ended && s.at.Before(cut) {
			delete(f.seen, id)
		}
	}
}

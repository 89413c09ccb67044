package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// The job events are the history's (store/history.go). The firehose
// derives started, finished, aborted and failed itself as well (from
// `working`, the job hash and the failure record), so they are never
// missed even when a publication is.

// isEndEvent reports whether e ends a job.
func isEndEvent(e string) bool {
	return e == store.EventFinished || e == store.EventAborted || e == store.EventFailed
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
	// MaxSeen bounds the jobs whose lifecycle events the firehose
	// remembers (to pass each on once; default 50,000).
	MaxSeen int
	// Relay sends what the firehose streams to the relay
	// (store.KeyStreamRelay, relay.go) instead of the sink, which is then
	// unused: under ha.enabled, where every node's RelayReader feeds its
	// own stream from the relay.
	Relay bool
}

// seenCheckEvery is how often the firehose forgets the jobs it remembers
// that no longer exist (a job event names any ident: what is published on
// the channel is untrusted).
const seenCheckEvery = 30 * time.Second

// Firehose is upstream's log firehose inside the node: for every ident on
// `updates` it reads the job's log entries past
// last_broadcasted_log_entry, hands them to the sink with the job hash and
// moves the bookmark. It also watches `working` and listens to
// ChannelJobEvents, so the sink learns of every job starting and ending.
type Firehose struct {
	store Store
	sink  news.StreamSink
	cfg   FirehoseConfig
	log   *slog.Logger

	notified *wakeSet // jobs to stream soon

	seenMu    sync.Mutex
	seen      map[string]*seenEvents
	seenFull  int // events passed on undeduplicated: MaxSeen reached
	seenCheck time.Time

	// working state of the watcher (its goroutine only).
	working map[string]bool
	ending  map[string]int // left working, end not known yet: tries
	primed  bool

	// badKeys are members of working that are not jobs, met by the
	// stream's reads; badWorking those met by the watcher.
	badKeys, badWorking *badkeys.Summary

	// ready is closed once the job events subscription is up and `working`
	// was looked at once (Ready).
	ready                 chan struct{}
	readyOnce             sync.Once
	eventsUp, workingSeen bool
	readyMu               sync.Mutex

	// relayLost logs what the relay could not append. Under Relay, once
	// started, events wait in evq (at most relayEventQueue) for the
	// events relayer, which appends all that waits in one script call.
	relayLost *dropLog
	evMu      sync.Mutex
	evq       []news.JobEvent
	evRunning bool
	evStopped bool // the events relayer ended: events are counted, not queued
	evWake    chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type seenEvents struct {
	events uint8 // lifecycleBit of each event seen
	ended  bool
	at     time.Time
}

// lifecycleBit is a lifecycle event's bit in seenEvents.events.
func lifecycleBit(e string) uint8 {
	switch e {
	case store.EventQueued:
		return 1
	case store.EventStarted:
		return 2
	case store.EventFinished:
		return 4
	case store.EventAborted:
		return 8
	case store.EventFailed:
		return 16
	case store.EventExpired:
		return 32
	}
	return 0
}

// NewFirehose returns a firehose feeding sink; Start runs it.
func NewFirehose(st Store, sink news.StreamSink, cfg FirehoseConfig, log *slog.Logger) *Firehose {
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	if cfg.WorkingInterval <= 0 {
		cfg.WorkingInterval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxSeen <= 0 {
		cfg.MaxSeen = 50_000
	}
	l := serviceLog(log, "firehose")
	return &Firehose{store: st, sink: sink, cfg: cfg, log: l, relayLost: newDropLog(l), evWake: make(chan struct{}, 1),
		notified: newWakeSet(), seen: map[string]*seenEvents{},
		working: map[string]bool{}, ending: map[string]int{}, ready: make(chan struct{}),
		badKeys:    workingSummary("firehose", "not jobs: not streamed"),
		badWorking: workingSummary("firehose-watcher", "not jobs: no started or ended event")}
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
	f.notified.add(ident)
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
	if f.cfg.Relay {
		f.evMu.Lock()
		f.evRunning, f.evStopped = true, false
		f.evMu.Unlock()
		run.Go(&f.wg, f.log, "firehose events relayer", func() { f.relayEvents(ctx) })
	}
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
	for f.notified.wait(ctx) {
		batch := f.notified.take()
		ids := make([]string, 0, len(batch))
		for ident := range batch {
			ids = append(ids, ident)
		}
		f.streamAll(ctx, ids)
	}
}

// streamAll streams the new entries of ids, firehoseReadJobs at a time:
// one cycle of the stream (the bad members met are summarised at its end).
func (f *Firehose) streamAll(ctx context.Context, ids []string) {
	for len(ids) > 0 && ctx.Err() == nil {
		n := min(len(ids), firehoseReadJobs)
		if err := f.broadcastMany(ctx, ids[:n]); err != nil && ctx.Err() == nil {
			f.log.Warn("stream failed", "jobs", n, "err", err)
		}
		ids = ids[n:]
	}
	f.badKeys.End(f.log, time.Now())
}

// firehoseReadJobs is the most jobs one batched read takes.
const firehoseReadJobs = 500

// Broadcast streams every log entry of ident past its broadcast bookmark
// and moves the bookmark; when the hash shows the job ended, the end event
// follows its last entries.
func (f *Firehose) Broadcast(ctx context.Context, ident string) error {
	return f.broadcastMany(ctx, []string{ident})
}

// broadcastMany is Broadcast for many jobs at once: every read and every
// bookmark move is one pipeline for all of them (three round trips a
// round, whatever the number of jobs; a job with more than Batch new
// entries takes more rounds).
func (f *Firehose) broadcastMany(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		us, errs, err := f.store.ReadUnbroadcastMany(ctx, ids, f.cfg.Batch)
		if err != nil {
			return err
		}
		var marks []store.BroadcastMark
		var relay []apiLogUpdate
		for i, id := range ids {
			var naj *store.NotAJobError
			if errors.As(errs[i], &naj) {
				f.badKeys.Add(id)
				continue
			}
			if u := us[i]; u.Job != nil && len(u.Entries) > 0 {
				if f.cfg.Relay {
					relay = append(relay, apiLogUpdate{job: u.Job, entries: u.Entries})
				} else {
					f.sink.StreamLog(u.Job, u.Entries)
				}
				marks = append(marks, store.BroadcastMark{Ident: id, From: u.Bookmark,
					To: u.Entries[len(u.Entries)-1].Score, Now: unixFloat(f.cfg.Now())})
			}
		}
		var moved []bool
		if f.cfg.Relay {
			moved, err = f.relayBatch(ctx, relay, marks)
		} else {
			moved, err = f.store.MarkBroadcastMany(ctx, marks)
		}
		if err != nil {
			return err
		}
		var ends []news.JobEvent
		var again []string
		k := 0
		for i, id := range ids {
			u := us[i]
			if u.Job == nil {
				continue
			}
			if len(u.Entries) > 0 {
				ok := moved[k]
				k++
				if !ok {
					continue // another node streams this job too, or it expired
				}
			}
			if len(u.Entries) >= f.cfg.Batch {
				again = append(again, id)
				continue
			}
			if ev, ok := endFromHash(id, u.Job, nil); ok {
				ends = append(ends, ev)
			}
		}
		f.emitAll(ends)
		ids = again
	}
	return nil
}

// relayBatch appends the entries of one read to the relay and moves their
// bookmarks (q[i] and marks[i] are one job's), one script call
// (store.RelayBroadcast) per relayCallBytes of entries, whole jobs each:
// a command per batch, whatever the number of entries.
func (f *Firehose) relayBatch(ctx context.Context, q []apiLogUpdate, marks []store.BroadcastMark) ([]bool, error) {
	var moved []bool
	for len(q) > 0 {
		k, size := 0, 0
		for k < len(q) {
			n := 0
			for _, e := range q[k].entries {
				n += len(e.Doc) + 32
			}
			if k > 0 && size+n > relayCallBytes {
				break
			}
			size += n
			k++
		}
		msgs := encodeLogMessages(q[:k], relayMessageEntries, relayMessageBytes, func(string) {
			metrics.RelayLost("too_large", 1)
			f.relayLost.add("too_large", 1, "a log entry with its job's record is larger than a relay message may be: left out of every node's stream")
		})
		bodies := make([]string, len(msgs))
		n := 0
		for i, m := range msgs {
			bodies[i] = m.body
			n += m.entries
		}
		m, err := f.store.RelayBroadcast(ctx, bodies, marks[:k])
		if err != nil {
			return nil, err
		}
		metrics.RelayEntries("relayed", n)
		moved = append(moved, m...)
		q, marks = q[k:], marks[k:]
	}
	return moved, nil
}

// relayCallBytes bounds the entries (their documents) of one relay script
// call: a read takes up to 500 jobs of up to 4 MiB each.
const relayCallBytes = 8 << 20

func unixFloat(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// endFromHash tells from a job record (nil when expired) and its failure
// record whether and how the job ended (record.StateOf).
func endFromHash(ident string, job *record.Job, fail *record.Failure) (news.JobEvent, bool) {
	if job == nil {
		job = record.DecodeJob(ident, nil)
	}
	ev := news.JobEvent{Ident: ident}
	detail := map[string]any{}
	switch record.StateOf(job, fail, false) {
	case record.StateFailed:
		ev.Event = store.EventFailed
		reason := job.FailedReason.Value
		if fail != nil {
			reason = fail.Reason
			ev.By = fail.FailedBy
			ev.TS = fail.FailedAt
		}
		detail["reason"] = reason
	case record.StateFinished:
		ev.Event, ev.TS = store.EventFinished, job.FinishedAt.Float
	case record.StateAborted:
		ev.Event, ev.TS = store.EventAborted, job.FinishedAt.Float
	default:
		return ev, false
	}
	if u := job.URL.Value; u != "" {
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
			if st.NotAJob {
				f.badWorking.Add(id)
				continue
			}
			detail := map[string]any{}
			if st.Job != nil {
				detail["url"] = st.Job.URL.Value
				detail["pipeline_id"] = st.Job.PipelineID.Value
			}
			b, _ := json.Marshal(detail)
			f.emit(news.JobEvent{TS: unixFloat(f.cfg.Now()), Ident: id, Event: store.EventStarted, Detail: b})
		}
		delete(f.ending, id)
	}
	for id := range f.working {
		if !now[id] {
			f.ending[id] = 0
		}
	}
	f.badWorking.End(f.log, time.Now())
	f.working, f.primed = now, true
	f.markReady(false, true)
	for id, tries := range f.ending {
		st, err := f.store.ReadEndState(ctx, id)
		if err != nil {
			f.log.Warn("cannot read an ended job", "ident", id, "err", err)
			return
		}
		if st.Job != nil && !st.State().Ended() && tries < 10 {
			f.ending[id] = tries + 1
			continue
		}
		delete(f.ending, id)
		if ev, ok := endFromHash(id, st.Job, st.Failure); ok {
			f.Notify(ctx, id) // stream the last entries first, if any are left
			f.emit(ev)
		}
	}
	f.pruneSeen(ctx)
}

// listenEvents follows ChannelJobEvents, reconnecting with backoff.
func (f *Firehose) listenEvents(ctx context.Context) {
	run.Reconnect(ctx, f.log, "job events subscription", run.PubSubBackoff, func(ctx context.Context) (bool, error) {
		return f.store.ListenJobEvents(ctx, func() { f.markReady(true, false) }, func(doc string) {
			var ev news.JobEvent
			if err := json.Unmarshal([]byte(doc), &ev); err != nil || ev.Ident == "" || ev.Event == "" {
				f.log.Warn("ignoring a job event that is not one", "doc", text.Cut(doc, 200))
				return
			}
			f.emit(ev)
		})
	})
}

// emit hands ev on (pass), once per lifecycle event and run of a job.
func (f *Firehose) emit(ev news.JobEvent) {
	if f.first(&ev) {
		f.pass([]news.JobEvent{ev})
	}
}

// emitAll is emit for many events: under Relay, one append for all.
func (f *Firehose) emitAll(evs []news.JobEvent) {
	var out []news.JobEvent
	for _, ev := range evs {
		if f.first(&ev) {
			out = append(out, ev)
		}
	}
	f.pass(out)
}

// pass hands events to the sink, or under Relay appends them to the relay
// (one command); events it cannot append are counted and logged.
func (f *Firehose) pass(evs []news.JobEvent) {
	if len(evs) == 0 {
		return
	}
	if !f.cfg.Relay {
		for _, ev := range evs {
			f.sink.StreamEvent(ev)
		}
		return
	}
	f.evMu.Lock()
	if f.evStopped {
		f.evMu.Unlock()
		f.lostAtStop(len(evs))
		return
	}
	if !f.evRunning {
		// Not started (a test's Broadcast): append at once.
		f.evMu.Unlock()
		f.appendEvents(context.Background(), evs)
		return
	}
	if len(f.evq)+len(evs) > relayEventQueue {
		f.evMu.Unlock()
		metrics.RelayLost("event_failed", len(evs))
		f.relayLost.add("event_failed", len(evs), "job events wait to be appended to the stream relay beyond the queue's bound (Redis slow or away, or a flood of events): missing from every node's stream")
		return
	}
	f.evq = append(f.evq, evs...)
	f.evMu.Unlock()
	select {
	case f.evWake <- struct{}{}:
	default:
	}
}

// relayEventQueue bounds the job events waiting to be appended.
const relayEventQueue = 10_000

// relayEvents appends the queued job events until ctx ends: all that
// waits, relayMessageEntries a message, in one script call; what comes
// meanwhile waits for the next round (batching under a flood of events,
// no added delay when quiet).
func (f *Firehose) relayEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			f.evMu.Lock()
			q := f.evq
			f.evq, f.evRunning, f.evStopped = nil, false, true
			f.evMu.Unlock()
			if len(q) > 0 {
				f.lostAtStop(len(q))
			}
			return
		case <-f.evWake:
		}
		f.evMu.Lock()
		q := f.evq
		f.evq = nil
		f.evMu.Unlock()
		f.appendEvents(ctx, q)
	}
}

// appendEvents appends evs to the relay in one script call; what it
// cannot is counted and logged.
func (f *Firehose) appendEvents(ctx context.Context, evs []news.JobEvent) {
	var bodies []string
	for i := 0; i < len(evs); i += relayMessageEntries {
		bodies = append(bodies, relayEventsBody(evs[i:min(i+relayMessageEntries, len(evs))]))
	}
	if len(bodies) == 0 {
		return
	}
	if _, err := f.store.RelayBroadcast(ctx, bodies, nil); err != nil {
		if ctx.Err() != nil {
			f.lostAtStop(len(evs))
			return
		}
		metrics.RelayLost("event_failed", len(evs))
		f.relayLost.add("event_failed", len(evs), "cannot append job events to the stream relay: missing from every node's stream", "err", err)
		return
	}
	metrics.RelayEntries("relayed", len(evs))
}

// lostAtStop counts and logs n job events the firehose stopped (its term
// ended) before it appended them.
func (f *Firehose) lostAtStop(n int) {
	metrics.RelayLost("event_failed", n)
	f.relayLost.add("event_failed", n, "the firehose stopped (its term ended) before these job events were appended to the stream relay: missing from every node's stream")
}

// first stamps ev and reports whether it is to be passed on: once per
// lifecycle event and run of a job (a job's lifecycle events are
// forgotten when it is queued or started again after it ended: the same
// URL archived again gets the same ident).
func (f *Firehose) first(ev *news.JobEvent) bool {
	if ev.TS == 0 {
		ev.TS = unixFloat(f.cfg.Now())
	}
	switch ev.Event {
	case store.EventQueued, store.EventStarted, store.EventFinished, store.EventAborted, store.EventFailed, store.EventExpired:
		f.seenMu.Lock()
		s := f.seen[ev.Ident]
		if s == nil && len(f.seen) >= f.cfg.MaxSeen {
			// Full: pass it on without remembering (a duplicate may
			// follow), and say so once per filling.
			if f.seenFull == 0 {
				f.log.Warn("remembering the events of too many jobs: passing new ones on without removing duplicates until jobs that no longer exist are forgotten",
					"jobs", len(f.seen), "bound", f.cfg.MaxSeen)
			}
			f.seenFull++
			f.seenMu.Unlock()
			return true
		}
		if s == nil || (s.ended && (ev.Event == store.EventQueued || ev.Event == store.EventStarted)) {
			s = &seenEvents{}
			f.seen[ev.Ident] = s
		}
		bit := lifecycleBit(ev.Event)
		if s.events&bit != 0 || (isEndEvent(ev.Event) && s.ended) {
			f.seenMu.Unlock()
			return false
		}
		s.events |= bit
		s.ended = s.ended || isEndEvent(ev.Event)
		s.at = f.cfg.Now()
		f.seenMu.Unlock()
	}
	return true
}

// pruneSeen forgets jobs that ended over an hour ago and, every
// seenCheckEvery, the jobs not running whose record does not exist (an
// event published for an ident that never was a job, or whose record
// expired): the firehose remembers only jobs that exist.
func (f *Firehose) pruneSeen(ctx context.Context) {
	now := f.cfg.Now()
	cut := now.Add(-time.Hour)
	f.seenMu.Lock()
	for id, s := range f.seen {
		if s.ended && s.at.Before(cut) {
			delete(f.seen, id)
		}
	}
	if now.Sub(f.seenCheck) < seenCheckEvery {
		f.seenMu.Unlock()
		return
	}
	f.seenCheck = now
	var check []string
	for id, s := range f.seen {
		if !s.ended && !f.working[id] {
			check = append(check, id)
		}
	}
	f.seenMu.Unlock()
	var gone []string
	for len(check) > 0 {
		n := min(len(check), 1000)
		exist, err := f.store.JobsExist(ctx, check[:n])
		if err != nil {
			f.log.Warn("cannot tell which remembered jobs still exist", "err", err)
			return
		}
		for i, ok := range exist {
			if !ok {
				gone = append(gone, check[i])
			}
		}
		check = check[n:]
	}
	f.seenMu.Lock()
	for _, id := range gone {
		if s := f.seen[id]; s != nil && !s.ended {
			delete(f.seen, id)
		}
	}
	if len(gone) > 0 && f.seenFull > 0 {
		f.log.Info("forgot the events of jobs that no longer exist", "jobs", len(gone),
			"passed_on_undeduplicated", f.seenFull)
		f.seenFull = 0
	}
	f.seenMu.Unlock()
}

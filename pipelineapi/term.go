package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// term is the server's state for one leadership term. Everything in it
// is rebuilt from Redis at the start of a term: the keys, and each key's
// held jobs the first time the key is seen.
type term struct {
	s   *Server
	ctx context.Context

	flushMu sync.Mutex // held by a flush pass (flushNow)

	// onDemand is held by the one refresh a request with a key not known
	// yet waits for (knowKeysSince); lastOnDemand spaces them.
	onDemand     sync.Mutex
	lastOnDemand time.Time

	mu     sync.Mutex
	keysAt time.Time                    // when the read of the keys below began
	keys   map[string]ed25519.PublicKey // active keys
	texts  map[string]string            // their text as stored (the take script compares it)
	revokd map[string]bool
	perKey map[string]*keyState
	jobs   map[string]*heldJob // by ident

	flushWake    chan struct{}
	settingsWake chan struct{}
	settingsDue  map[string]bool // idents whose settings to send

	// releasedTakes are the last holds released with a known take
	// position, for RecheckHolds: another path (a write refused, the
	// control stream's opening) may notice a lost take first.
	releasedTakes []releasedTake
}

type releasedTake struct {
	ident string
	pos   store.ReplPos
	at    time.Time
}

// maxReleasedTakes bounds releasedTakes; a failover is checked within
// seconds, so the last few hundred releases cover it.
const maxReleasedTakes = 256

// keyState is what the node keeps per key during a term.
type keyState struct {
	req, logs *rate.Limiter
	streams   map[*stream]struct{}
	// gone is closed (and replaced) when the key is revoked or
	// replaced: takes waiting under it end.
	gone chan struct{}
	// waiting is how many takes wait for a job.
	waiting int
	loaded  bool // held jobs read from Redis
	loadMu  sync.Mutex

	lastSeen    time.Time
	refusals    int64
	lastRefusal string
	statsDirty  bool
}

// heldJob is a job a key holds, with what is not yet written.
type heldJob struct {
	ident, key string
	rec        *record.Job // the record as last read (DecodeJob), with what was written since
	logScore   int64
	// pos is where the take landed in Redis's replication stream
	// (zero: loaded from Redis, or not tracked): RecheckHolds.
	pos store.ReplPos
	// banDecided: the job's ban check has decided (doc/pipeline-api.md,
	// A ban shows itself); its updates no longer ask Redis.
	banDecided bool

	incr  map[string]int64
	set   map[string]string
	dirty bool

	opMu sync.Mutex // serializes this job's writes (flush, abort, done)
}

// readRetry is the wait before reading again what a term needs from Redis
// (its keys at the start, a held job's settings): a fixed second.
var readRetry = retry.Backoff{Min: time.Second, Max: time.Second}

// Run serves one leadership term until ctx ends: it loads the keys,
// refreshes them every KeyRefresh (closing the control streams of revoked
// keys), writes the batched counters every FlushInterval, and delivers
// settings changes to the control streams. Outside Run every request is
// answered 503. The counters still pending are written when ctx ends (if
// Redis and the fence still allow).
func (s *Server) Run(ctx context.Context) error {
	t := &term{s: s, ctx: ctx, keys: map[string]ed25519.PublicKey{}, texts: map[string]string{}, revokd: map[string]bool{},
		perKey: map[string]*keyState{}, jobs: map[string]*heldJob{},
		flushWake: make(chan struct{}, 1), settingsWake: make(chan struct{}, 1), settingsDue: map[string]bool{}}
	// The keys must be known before the first request is answered.
	for {
		if err := t.refreshKeys(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			s.log.Warn("reading pipeline keys failed; retrying", "err", err)
		}
		if !readRetry.Sleep(ctx, 0) {
			return ctx.Err()
		}
	}
	s.mu.Lock()
	s.term = t
	s.mu.Unlock()
	var wg sync.WaitGroup
	run.Go(&wg, s.log, "pipeline key refresh", func() { t.refreshLoop(ctx) })
	run.Go(&wg, s.log, "pipeline API flush", func() { t.flushLoop(ctx) })
	run.Go(&wg, s.log, "pipeline API settings", func() { t.settingsLoop(ctx) })
	<-ctx.Done()
	s.mu.Lock()
	s.term = nil
	s.mu.Unlock()
	t.closeAllStreams("not_leader", "the node is stopping or no longer the leader; reconnect")
	wg.Wait()
	// Last flush: a clean stop loses nothing accepted.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	t.flushNow(fctx)
	cancel()
	return nil
}

func (t *term) refreshLoop(ctx context.Context) {
	run.Every(ctx, t.s.log, "pipeline key refresh", run.Schedule{Interval: t.s.opt.KeyRefresh}, func(ctx context.Context) {
		if err := t.refreshKeys(ctx); err != nil && ctx.Err() == nil {
			t.s.log.Warn("refreshing pipeline keys failed", "err", err)
		}
	})
}

// refreshKeys reads the keys; streams of keys revoked, removed or
// replaced since are closed.
func (t *term) refreshKeys(ctx context.Context) error {
	began := time.Now()
	active, revoked, err := t.s.store.PipelineKeys(ctx)
	if err != nil {
		return err
	}
	keys := make(map[string]ed25519.PublicKey, len(active))
	texts := make(map[string]string, len(active))
	for name, text := range active {
		if pub := pubKeyOf(text); pub != nil && wire.ValidKeyName(name) {
			keys[name] = pub
			texts[name] = text
		} else {
			t.s.log.Warn("ignoring a pipeline key that does not parse", "key", name)
		}
	}
	rv := make(map[string]bool, len(revoked))
	for name := range revoked {
		if _, ok := keys[name]; !ok {
			rv[name] = true
		}
	}
	var gone []*stream
	t.mu.Lock()
	if began.Before(t.keysAt) {
		// A read begun later (a request's, knowKeysSince) already
		// applied newer keys: this one's are older.
		t.mu.Unlock()
		return nil
	}
	for name, old := range t.keys {
		if pub, ok := keys[name]; !ok || !pub.Equal(old) {
			if ks := t.perKey[name]; ks != nil {
				for st := range ks.streams {
					gone = append(gone, st)
				}
				close(ks.gone)
				ks.gone = make(chan struct{})
			}
		}
	}
	t.keys, t.texts, t.revokd = keys, texts, rv
	t.keysAt = began
	t.mu.Unlock()
	for _, st := range gone {
		st.close("revoked_key", "the key was revoked or replaced")
	}
	return nil
}

// onDemandSpacing is the least time between two reads of the keys for
// requests naming a key not known yet: strangers naming keys that do not
// exist cost Redis at most 20 reads a second.
const onDemandSpacing = 50 * time.Millisecond

// knowKeysSince makes sure the keys were read from Redis after since (a
// request's arrival), reading them now if not: a key registered before
// the request is known to it, whatever the periodic refresh
// (KeyRefresh). One read at a time; the requests waiting meanwhile share
// it.
func (t *term) knowKeysSince(ctx context.Context, since time.Time) {
	t.onDemand.Lock()
	defer t.onDemand.Unlock()
	t.mu.Lock()
	done := !t.keysAt.Before(since)
	t.mu.Unlock()
	if done {
		return
	}
	if wait := onDemandSpacing - time.Since(t.lastOnDemand); wait > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	t.lastOnDemand = time.Now()
	if err := t.refreshKeys(ctx); err != nil && ctx.Err() == nil {
		t.s.log.Warn("reading pipeline keys for a request failed", "err", err)
	}
}

// keyText returns name's public key as stored ("" when not active).
func (t *term) keyText(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.texts[name]
}

// publicKey returns name's key, or whether it is revoked.
func (t *term) publicKey(name string) (ed25519.PublicKey, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keys[name], t.revokd[name]
}

// keyStateLocked returns name's state, made on first use; t.mu held.
func (t *term) keyStateLocked(name string) *keyState {
	ks := t.perKey[name]
	if ks == nil {
		o := t.s.opt
		ks = &keyState{req: rate.NewLimiter(rate.Limit(o.Rate), int(2*o.Rate)),
			logs: rate.NewLimiter(rate.Limit(o.LogRate), int(2*o.LogRate)), streams: map[*stream]struct{}{},
			gone: make(chan struct{})}
		t.perKey[name] = ks
	}
	return ks
}

func (t *term) seen(name string) {
	t.mu.Lock()
	ks := t.keyStateLocked(name)
	ks.lastSeen = t.s.opt.Now()
	ks.statsDirty = true
	t.mu.Unlock()
}

func (t *term) refused(name, reason string) {
	t.mu.Lock()
	ks := t.keyStateLocked(name)
	ks.refusals++
	ks.lastRefusal = reason
	ks.statsDirty = true
	t.mu.Unlock()
}

// rateLimit takes one request from name's budget.
func (t *term) rateLimit(name string) *refusal {
	t.mu.Lock()
	ks := t.keyStateLocked(name)
	t.mu.Unlock()
	now := time.Now()
	r := ks.req.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &refusal{status: http.StatusTooManyRequests, code: "rate_limited",
			reason: "over " + strconv.FormatFloat(t.s.opt.Rate, 'f', -1, 64) + " requests per second", retryAfter: retrySeconds(d)}
	}
	return nil
}

// logBudget takes n log entries from name's budget.
func (t *term) logBudget(name string, n int) *refusal {
	if n == 0 {
		return nil
	}
	t.mu.Lock()
	ks := t.keyStateLocked(name)
	t.mu.Unlock()
	now := time.Now()
	r := ks.logs.ReserveN(now, n)
	if !r.OK() {
		return refuse(http.StatusRequestEntityTooLarge, "too_large", "more log entries than the key's burst in one request; send fewer per request")
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &refusal{status: http.StatusTooManyRequests, code: "rate_limited",
			reason: "over " + strconv.FormatFloat(t.s.opt.LogRate, 'f', -1, 64) + " log entries per second", retryAfter: retrySeconds(d)}
	}
	return nil
}

// loadHeld reads name's held jobs from Redis once per term: the jobs
// taken under the key (by this node or another) that still name its
// pipeline record and are not finished.
func (t *term) loadHeld(ctx context.Context, name string) error {
	t.mu.Lock()
	ks := t.keyStateLocked(name)
	t.mu.Unlock()
	ks.loadMu.Lock()
	defer ks.loadMu.Unlock()
	if ks.loaded {
		return nil
	}
	ids, err := t.s.store.APIHeldJobs(ctx, name)
	if err != nil {
		return err
	}
	pid := store.APIPipelineKey(name)
	for _, id := range ids {
		j, err := t.s.store.APIReadJob(ctx, id)
		var naj *store.NotAJobError
		if errors.As(err, &naj) {
			continue
		}
		if err != nil {
			return err
		}
		if j == nil || j.Record.PipelineID.Value != pid || j.Record.FinishedAt.Value != "" {
			continue
		}
		t.mu.Lock()
		if _, ok := t.jobs[id]; !ok {
			t.jobs[id] = &heldJob{ident: id, key: name, rec: j.Record, logScore: j.Record.LogScore}
		}
		t.mu.Unlock()
	}
	ks.loaded = true
	return nil
}

// held returns the job if name holds it (by this term's knowledge; the
// scripts check again in Redis).
func (t *term) held(ctx context.Context, name, ident string) (*heldJob, *refusal) {
	if err := t.loadHeld(ctx, name); err != nil {
		return nil, storeRefusal(err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.jobs[ident]
	if j == nil || j.key != name {
		return nil, refuse(http.StatusForbidden, "not_held", "job "+ident+" is not held by key "+name)
	}
	return j, nil
}

// release forgets a job the key no longer holds and tells its streams.
func (t *term) release(j *heldJob, reason string) {
	t.mu.Lock()
	if t.jobs[j.ident] == j {
		delete(t.jobs, j.ident)
		if !j.pos.Zero() {
			if len(t.releasedTakes) >= maxReleasedTakes {
				t.releasedTakes = t.releasedTakes[1:]
			}
			t.releasedTakes = append(t.releasedTakes, releasedTake{ident: j.ident, pos: j.pos, at: time.Now()})
		}
	}
	t.mu.Unlock()
	if reason != "" && !strings.HasPrefix(reason, wire.ReleasedLost) && t.takeLost(j) {
		// Whichever path noticed first (a refused write, the settings
		// loop's resync), the pipeline learns why.
		reason = lostTakeReason
	}
	if reason != "" {
		t.sendKey(j.key, wire.EventReleased, wire.Released{Ident: j.ident, Reason: reason})
	}
}

// lostTakeReason is the released event's reason for a take a Redis
// failover lost.
const lostTakeReason = wire.ReleasedLost + " a Redis failover lost this pipeline's take of the job (the new master never had it); stop crawling it"

// takeLost reports whether j's take is one the master Redis now has
// lacks (store.Store.TakeLost; false when positions are not tracked).
func (t *term) takeLost(j *heldJob) bool {
	tl, ok := t.s.store.(interface {
		TakeLost(context.Context, store.ReplPos) bool
	})
	if !ok || j.pos.Zero() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 2*time.Second)
	defer cancel()
	return tl.TakeLost(ctx, j.pos)
}

func (t *term) flushLoop(ctx context.Context) {
	run.Every(ctx, t.s.log, "pipeline API flush", run.Schedule{Interval: t.s.opt.FlushInterval}, t.flushNow)
}

// flushNow writes everything pending (counters, then key statistics),
// one pass at a time: when it returns, whatever requests answered before
// it was called left to write is written.
func (t *term) flushNow(ctx context.Context) {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.flushAll(ctx)
	t.flushStats(ctx)
}

// flushAll writes every job's pending counters: one script per job with
// something pending, so at most one write per job per FlushInterval.
func (t *term) flushAll(ctx context.Context) {
	t.mu.Lock()
	var due []*heldJob
	for _, j := range t.jobs {
		if j.dirty {
			due = append(due, j)
		}
	}
	t.mu.Unlock()
	for _, j := range due {
		if err := t.flush(ctx, j); err != nil && ctx.Err() == nil {
			var nh *store.NotHeldError
			if !errors.As(err, &nh) {
				t.s.log.Warn("writing a job's counters failed; kept for the next write", "ident", j.ident, "key", j.key, "err", err)
			}
		}
	}
}

// flush writes j's pending counters now. A job the key no longer holds
// is released (its pending counters dropped: the job is not the key's to
// count into).
func (t *term) flush(ctx context.Context, j *heldJob) error {
	j.opMu.Lock()
	defer j.opMu.Unlock()
	t.mu.Lock()
	if !j.dirty {
		t.mu.Unlock()
		return nil
	}
	incr, set := j.incr, j.set
	j.incr, j.set, j.dirty = nil, nil, false
	t.mu.Unlock()
	err := t.s.store.APIUpdate(ctx, j.key, j.ident, incr, set)
	var nh *store.NotHeldError
	switch {
	case errors.As(err, &nh):
		t.release(j, t.notHeldReason(ctx, j.ident, nh.Why))
	case err != nil:
		t.mu.Lock()
		for k, v := range incr {
			if j.incr == nil {
				j.incr = map[string]int64{}
			}
			j.incr[k] += v
		}
		for k, v := range set {
			if j.set == nil {
				j.set = map[string]string{}
			}
			if _, newer := j.set[k]; !newer {
				j.set[k] = v
			}
		}
		j.dirty = true
		t.mu.Unlock()
	}
	return err
}

func (t *term) flushStats(ctx context.Context) {
	type st struct {
		name     string
		seen     time.Time
		refusals int64
		last     string
	}
	var due []st
	t.mu.Lock()
	for name, ks := range t.perKey {
		if ks.statsDirty {
			due = append(due, st{name, ks.lastSeen, ks.refusals, ks.lastRefusal})
			ks.refusals, ks.lastRefusal, ks.statsDirty = 0, "", false
		}
	}
	t.mu.Unlock()
	for _, d := range due {
		if err := t.s.store.APIKeyStats(ctx, d.name, d.seen, d.refusals, d.last); err != nil && ctx.Err() == nil {
			t.s.log.Warn("writing pipeline key statistics failed", "key", d.name, "err", err)
		}
	}
}

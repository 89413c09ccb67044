package tweeter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/store"
)

// checkBuffer bounds the idents waiting for a check. When it is full,
// further idents are dropped: the sweep of working finds them later.
const checkBuffer = 1024

// JobUpdated is the hook for the updates listener: call it with every ident
// published on `updates`. It never blocks on Redis: an ident not handled
// yet is handed to the check loop Start runs (see CheckJob); an ident
// already handled, or already waiting, costs a map lookup. Its signature
// fits coordinator.Updates.OnUpdate.
func (t *Tweeter) JobUpdated(_ context.Context, ident string) {
	t.seenMu.Lock()
	defer t.seenMu.Unlock()
	if t.seenLocked(ident) {
		return
	}
	if _, ok := t.pending[ident]; ok {
		return
	}
	select {
	case t.checks <- ident:
		t.pending[ident] = struct{}{}
	default:
		t.log.Debug("check backlog full; the sweep will find the job", "ident", ident)
	}
}

// SweepSoon asks the sweep loop to run now, without waiting: call it when
// the updates subscription is (re)established, since messages published
// while it was down are lost. Its signature fits
// coordinator.Updates.OnSubscribe.
func (t *Tweeter) SweepSoon(context.Context) {
	select {
	case t.sweepNow <- struct{}{}:
	default:
	}
}

// checkJobs runs CheckJob for idents from JobUpdated until ctx ends.
func (t *Tweeter) checkJobs(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ident := <-t.checks:
			t.seenMu.Lock()
			delete(t.pending, ident)
			t.seenMu.Unlock()
			run.Guard(t.log, "job check", func() {
				if err := t.CheckJob(ctx, ident); err != nil && ctx.Err() == nil {
					t.log.Error("job check failed", "ident", ident, "err", err)
				}
			})
		}
	}
}

// CheckJob looks job ident up, unless it was handled within SeenTTL, and
// the first time it is seen running (started_at set, no finished_at,
// neither aborted nor abort requested) queues its "Archiving URL" text —
// atomically with the check that the text is not already queued, posted,
// being posted or given up. Afterwards the ident counts as handled; a job
// not started yet is looked up again next time. Aborted jobs are never
// tweeted.
func (t *Tweeter) CheckJob(ctx context.Context, ident string) error {
	if t.seenRecently(ident) {
		return nil
	}
	job, err := t.store.GetJob(ctx, ident)
	var naj *store.NotAJobError
	if errors.As(err, &naj) {
		// Another program's key listed in working: skip it, and count it
		// in the sweep's summary (it is remembered for SeenTTL).
		t.badKeys.Add(ident)
		t.remember(ident)
		return nil
	}
	if err != nil {
		return fmt.Errorf("tweeter: %w", err)
	}
	switch {
	case job == nil:
		// Gone (an aborted job expires in 5 s): nothing to tweet.
		t.remember(ident)
		return nil
	case job.Finished(), job.Aborted, job.AbortRequested:
		t.remember(ident)
		return nil
	case job.StartedAt.Value == "":
		// Not taken by a pipeline yet: look again on its next update.
		return nil
	}
	text := ArchivingText(job.URL.Value)
	res, err := t.store.QueueTweet(ctx, ident, job.URL.Value, text)
	if err != nil {
		return fmt.Errorf("tweeter: %w", err)
	}
	if res != store.TweetNotStarted {
		t.remember(ident)
	}
	if res == store.TweetQueued {
		t.log.Info("queued", "ident", ident, "text", text)
	} else {
		t.log.Debug("not queued", "ident", ident, "why", res.String())
	}
	return nil
}

// Sweep checks every ident in working (see CheckJob), catching jobs whose
// updates messages were lost while the subscription was down. Idents
// already handled cost nothing.
func (t *Tweeter) Sweep(ctx context.Context) error {
	ids, err := t.store.WorkingJobs(ctx)
	if err != nil {
		return fmt.Errorf("tweeter sweep: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if err := t.CheckJob(ctx, id); err != nil {
			errs = append(errs, err)
			if store.IsUnavailable(err) || ctx.Err() != nil {
				break
			}
		}
	}
	t.badKeys.End(t.log, t.cfg.Now())
	return errors.Join(errs...)
}

type seenEntry struct {
	ident string
	at    time.Time
}

// seenRecently reports whether ident was handled within SeenTTL.
func (t *Tweeter) seenRecently(ident string) bool {
	t.seenMu.Lock()
	defer t.seenMu.Unlock()
	return t.seenLocked(ident)
}

func (t *Tweeter) seenLocked(ident string) bool {
	t.expireSeen()
	_, ok := t.seen[ident]
	return ok
}

// remember marks ident as handled.
func (t *Tweeter) remember(ident string) {
	t.seenMu.Lock()
	defer t.seenMu.Unlock()
	if e, ok := t.seen[ident]; ok {
		t.order.Remove(e)
	}
	t.seen[ident] = t.order.PushBack(seenEntry{ident: ident, at: t.cfg.Now()})
	t.expireSeen()
}

// expireSeen forgets entries older than SeenTTL and the oldest beyond
// SeenMax. Entries are kept in insertion order, so both come off the
// front. The caller holds seenMu.
func (t *Tweeter) expireSeen() {
	cutoff := t.cfg.Now().Add(-t.cfg.SeenTTL)
	for e := t.order.Front(); e != nil; e = t.order.Front() {
		s := e.Value.(seenEntry)
		if len(t.seen) <= t.cfg.SeenMax && s.at.After(cutoff) {
			return
		}
		t.order.Remove(e)
		delete(t.seen, s.ident)
	}
}

// newBadWorking is the summary of the members of working that are not
// jobs (badkeys: one line per sweep at most, not one per key).
func newBadWorking() *badkeys.Summary {
	return badkeys.New(store.KeyWorking, "tweeter", "not jobs: not tweeted")
}

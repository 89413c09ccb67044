package coordinator

import (
	"context"
	"log/slog"

	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// jobWatch logs, at INFO with the ident, each job a pipeline takes and
// each running job that was failed (by the reaper, !fail or `archivebot
// fail`): it compares `working`, as the start notifier reads it every
// cycle, with what it saw last time (one pipeline of HGETs when jobs left
// it). Jobs running
// when the node starts are counted, not listed. Finished and aborted jobs
// are logged by the finish notifier; a queued job that is failed never
// reaches `working` and is not logged here.
type jobWatch struct {
	store *store.Store
	log   *slog.Logger
	seen  map[string]bool
}

func newJobWatch(store *store.Store, log *slog.Logger) *jobWatch {
	return &jobWatch{store: store, log: serviceLog(log, "jobs")}
}

// observe takes the idents in `working` now. It only logs: a failure to
// read why jobs left `working` is a warning, never a reason to hold up the
// start notices read with the same list.
func (w *jobWatch) observe(ctx context.Context, ids []string) {
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		now[id] = true
	}
	if w.seen == nil {
		w.log.Info("jobs running at start", "count", len(now))
	} else {
		for _, id := range ids {
			if !w.seen[id] {
				w.log.Info("job taken by a pipeline", "ident", id)
			}
		}
	}
	var left []string
	for id := range w.seen {
		if !now[id] {
			left = append(left, id)
		}
	}
	w.seen = now
	if len(left) == 0 {
		return
	}
	failed, err := w.store.FailReasons(ctx, left)
	if err != nil {
		w.log.Warn("cannot tell which of the jobs that left working failed", "jobs", len(left), "err", err)
		return
	}
	for id, reason := range failed {
		w.log.Info("job failed", "ident", id, "reason", reason)
	}
}

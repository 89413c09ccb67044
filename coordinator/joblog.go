package coordinator

import (
	"context"
	"log/slog"
)

// jobWatch logs, at INFO with the ident, each job a pipeline takes: it
// compares `working` with what it saw last cycle (one LRANGE per cycle).
// Jobs running when the node starts are counted, not listed. Finished and
// aborted jobs are logged by the finish notifier, failed ones by the
// reaper and the admin notices.
type jobWatch struct {
	store *Store
	log   *slog.Logger
	seen  map[string]bool
}

func newJobWatch(store *Store, log *slog.Logger) *jobWatch {
	return &jobWatch{store: store, log: log.With("service", "jobs")}
}

func (w *jobWatch) runOnce(ctx context.Context) error {
	ids, err := w.store.WorkingJobs(ctx)
	if err != nil {
		return err
	}
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
	w.seen = now
	return nil
}

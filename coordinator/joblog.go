package coordinator

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/store"
)

// workingSummary is the summary of reader's bad members of `working`
// (keys that are not jobs); why says what the reader does with them.
func workingSummary(reader, why string) *badkeys.Summary {
	return badkeys.New(store.KeyWorking, reader, why)
}

// takenLogMax is the most "job taken by a pipeline" lines one scan logs;
// more jobs taken at once are summarised in one line.
const takenLogMax = 100

// jobWatch logs, at INFO with the ident, each job a pipeline takes and
// each running job that was failed (by the reaper, !fail or `archivebot
// fail`): it compares `working`, as the start notifier reads it every
// cycle, with what it saw last time (one pipeline of HGETs when jobs left
// it). Jobs running
// when the node starts are counted, not listed. Finished and aborted jobs
// are logged by the finish notifier; a queued job that is failed never
// reaches `working` and is not logged here.
type jobWatch struct {
	store Store
	log   *slog.Logger
	seen  map[string]bool
}

func newJobWatch(st Store, log *slog.Logger) *jobWatch {
	return &jobWatch{store: st, log: serviceLog(log, "jobs")}
}

// observe takes the idents in `working` now, and those of them the scan
// found not to be jobs (bad: the scan's summary counts them, they are
// never "taken"). It only logs: a failure to read why jobs left `working`
// is a warning, never a reason to hold up the start notices read with the
// same list.
func (w *jobWatch) observe(ctx context.Context, ids, bad []string) {
	skip := make(map[string]bool, len(bad))
	for _, id := range bad {
		skip[id] = true
	}
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !skip[id] {
			now[id] = true
		}
	}
	if w.seen == nil {
		w.log.Info("jobs running at start", "count", len(now))
	} else {
		var taken []string
		for _, id := range ids {
			if now[id] && !w.seen[id] {
				taken = append(taken, id)
				w.seen[id] = true // a duplicate member is taken once
			}
		}
		for i, id := range taken {
			if i == takenLogMax {
				w.log.Info(fmt.Sprintf("%d more jobs taken by pipelines", len(taken)-i), "more", len(taken)-i,
					"first", id)
				break
			}
			w.log.Info("job taken by a pipeline", "ident", id)
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

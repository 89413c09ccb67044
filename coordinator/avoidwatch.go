package coordinator

// The line when every connected pipeline avoids a queued job's site
// (doc/pipeline-api.md, The take rule): no take will ever give the job out
// until a pipeline's rules change, so its channel is told, once.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// Defaults of the avoid watcher.
const (
	DefaultAvoidWatchInterval = time.Minute
	// DefaultAvoidWatchJobs bounds the queued jobs one cycle looks at
	// (the next to run of each queue first): each costs a few round trips.
	DefaultAvoidWatchJobs = 100
	// DefaultAvoidSitePeriod: at most one line per avoided site (the
	// avoid rule) in this period; the site's other jobs are marked as
	// told by it.
	DefaultAvoidSitePeriod = time.Hour
)

// AvoidWatcher looks at queued jobs every Interval and queues the line
// "every pipeline avoids its site" for each job it holds, once per job
// and at most once per site and SitePeriod (store.AllAvoidNotice: the
// markers and the notice in one script, so a restart or a new leader does
// not repeat it). Delivery is the admin
// notices' (at least once).
type AvoidWatcher struct {
	store    Store
	log      *slog.Logger
	Interval time.Duration
	MaxJobs  int
	// SitePeriod bounds the lines per avoided site: one per period.
	SitePeriod time.Duration
}

// NewAvoidWatcher returns an avoid watcher with the defaults.
func NewAvoidWatcher(st Store, log *slog.Logger) *AvoidWatcher {
	return &AvoidWatcher{store: st, log: serviceLog(log, "avoid-watch"),
		Interval: DefaultAvoidWatchInterval, MaxJobs: DefaultAvoidWatchJobs, SitePeriod: DefaultAvoidSitePeriod}
}

// newAvoidWatcherEvery is NewAvoidWatcher with SitePeriod every (0: the
// default; negative: no bound per site).
func newAvoidWatcherEvery(st Store, log *slog.Logger, every time.Duration) *AvoidWatcher {
	a := NewAvoidWatcher(st, log)
	switch {
	case every > 0:
		a.SitePeriod = every
	case every < 0:
		a.SitePeriod = 0
	}
	return a
}

// AllAvoidLine is the channel line for a queued job every connected
// pipeline avoids.
func AllAvoidLine(ident string, w *store.Waiting) string {
	return fmt.Sprintf("Job %s is waiting: every pipeline avoids %s (%s); no pipeline will take it until one may crawl %s",
		ident, w.AvoidRule, strings.Join(w.AvoidedBy, ", "), w.Host)
}

// runOnce looks at up to MaxJobs queued jobs, the heads of the queues
// first, round robin, and queues the line for those every pipeline avoids.
func (a *AvoidWatcher) runOnce(ctx context.Context) error {
	qs, err := a.store.Queues(ctx, a.MaxJobs)
	if err != nil {
		return err
	}
	var jobs []store.QueuedJob
	for i := 0; len(jobs) < a.MaxJobs; i++ {
		more := false
		for _, q := range qs {
			if i < len(q.Jobs) && len(jobs) < a.MaxJobs {
				jobs = append(jobs, q.Jobs[i])
				more = true
			}
		}
		if !more {
			break
		}
	}
	covered := 0
	for _, j := range jobs {
		if j.URL == "" {
			continue
		}
		w, err := a.store.WaitingOf(ctx, j.Ident, j.URL)
		if err != nil {
			return err
		}
		if !w.AllAvoid() {
			continue
		}
		job, err := a.store.GetJob(ctx, j.Ident)
		if err != nil || job == nil {
			continue // gone or not a job: nothing to say
		}
		line := AllAvoidLine(j.Ident, w)
		did, err := a.store.AllAvoidNotice(ctx, j.Ident, w.AvoidRule, a.SitePeriod, store.AdminNotice{Channel: job.StartedIn.Value, Text: line})
		if err != nil {
			return err
		}
		switch did {
		case store.AllAvoidQueued:
			a.log.Info("every pipeline avoids a queued job's site", "ident", j.Ident, "line", line)
		case store.AllAvoidCovered:
			covered++
		}
	}
	if covered > 0 {
		a.log.Info("every pipeline avoids queued jobs' sites already announced this period: no line for them",
			"jobs", covered, "period", a.SitePeriod)
	}
	return nil
}

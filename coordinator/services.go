// Package coordinator holds the background services that run inside the
// control node (reaper, notifiers, analyzer, firehose, updates listener,
// leader lease). They read and write Redis only through package
// coordinator/store.
package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
)

// ServicesConfig holds the settings of the background services. Zero
// values take the defaults of package config.
type ServicesConfig struct {
	Reaper    ReaperConfig
	Finish    FinishConfig
	Start     StartConfig
	Pipelines PipelineNotifierConfig
	Analyzer  AnalyzerConfig
	// QueueIndexRebuild is how often the index of named queues is rebuilt
	// with a SCAN (at start, then this often).
	QueueIndexRebuild time.Duration
}

// Services runs the coordinator's background services inside the bot:
// the reaper, the finish and pipeline notifiers and the analyzer sweep,
// each on its own goroutine around its runOnce (run.Every), plus the
// `updates` listener feeding the analyzer (and whoever else registers with
// Updates.OnUpdate before Start).
//
// A cycle that is still running when its next tick comes is skipped, never
// run twice at once; a panicking cycle is logged and the schedule goes on.
type Services struct {
	Reaper    *Reaper
	Finish    *FinishNotifier
	Starts    *StartNotifier
	Pipelines *PipelineNotifier
	Analyzer  *Analyzer
	Updates   *Updates
	// Admin delivers the lines of the operator's commands.
	Admin *AdminNotifier

	// finishKick is signalled by every `updates` message; finishTrigger
	// starts a finish cycle out of turn (see pushFinish).
	finishKick    chan struct{}
	finishTrigger chan struct{}

	store             *store.Store
	queueIndexRebuild time.Duration
	log               *slog.Logger
	cancel            context.CancelFunc
	wg                sync.WaitGroup
	once              sync.Once
}

// NewServices builds the services over store; ann receives their lines.
func NewServices(store *store.Store, ann Announcer, cfg ServicesConfig, log *slog.Logger) *Services {
	if log == nil {
		log = slog.Default()
	}
	s := &Services{
		Reaper:    NewReaper(store, ann, cfg.Reaper, log),
		Finish:    NewFinishNotifier(store, ann, cfg.Finish, log),
		Starts:    NewStartNotifier(store, ann, cfg.Start, log),
		Pipelines: NewPipelineNotifier(store, ann, cfg.Pipelines, log),
		Analyzer:  NewAnalyzer(store, cfg.Analyzer, log),
		Updates:   NewUpdates(store, log),
		Admin:     NewAdminNotifier(store, ann, log),
		store:     store,
		log:       log,

		finishKick:    make(chan struct{}, 1),
		finishTrigger: make(chan struct{}),
	}
	s.queueIndexRebuild = cfg.QueueIndexRebuild
	orDefault(&s.queueIndexRebuild, config.DefaultQueueIndexRebuild)
	s.Updates.OnUpdate(s.Analyzer.Notify)
	s.Updates.OnUpdate(s.Starts.Notify)
	// A pipeline publishes the ident on `updates` right after it pushed
	// its finish notice: look for notices at once rather than at the next
	// tick (the periodic cycle stays as the safety net for lost messages).
	s.Updates.OnUpdate(func(context.Context, string) {
		select {
		case s.finishKick <- struct{}{}:
		default:
		}
	})
	s.Finish.onNotice = s.Analyzer.Notify
	// Messages published while the subscription was down are lost: catch
	// up on every working job each time it is (re)established.
	s.Updates.OnSubscribe(func(ctx context.Context) {
		run.Go(&s.wg, s.log, "analyzer catch-up", func() {
			if err := s.Analyzer.runOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("analyzer catch-up sweep failed", "service", "analyzer", "err", err)
			}
		})
	})
	return s
}

// Start takes the pipeline notifier's startup snapshot (so pipelines that
// exist now are not announced), delivers finish notices left by an
// earlier run, and starts the schedules, the `updates` listener and the
// analyzer. It returns at once; Stop ends everything.
func (s *Services) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	if err := s.Pipelines.runOnce(ctx); err != nil {
		s.log.Warn("pipeline snapshot at startup failed; the first successful one is the baseline",
			"service", "pipeline-notifier", "err", err)
	}
	s.every(ctx, "reaper", s.Reaper.cfg.Interval, false, s.Reaper.runOnce)
	s.everyOr(ctx, "finish-notifier", s.Finish.cfg.Interval, true, s.finishTrigger, s.Finish.runOnce)
	run.Go(&s.wg, s.log, "finish-push", func() { s.pushFinish(ctx) })
	s.everyOr(ctx, "start-notifier", s.Starts.cfg.Interval, true, s.Starts.trigger, s.Starts.runOnce)
	s.every(ctx, "admin-notices", DefaultAdminNoticeInterval, true, s.Admin.runOnce)
	s.every(ctx, "pipeline-notifier", s.Pipelines.cfg.Interval, false, s.Pipelines.runOnce)
	s.every(ctx, "analyzer-sweep", s.Analyzer.cfg.SweepInterval, false, s.Analyzer.runOnce)
	s.every(ctx, "queue-index", s.queueIndexRebuild, true, func(ctx context.Context) error {
		_, err := s.store.RebuildQueueIndex(ctx)
		return err
	})
	run.Go(&s.wg, s.log, "updates listener", func() { s.Updates.Run(ctx) })
	run.Go(&s.wg, s.log, "analyzer", func() { s.Analyzer.work(ctx) })
}

// every runs runOnce every interval (and at once when now is set) on a
// goroutine of its own. A failing service is logged once, not every cycle,
// and again when it recovers.
func (s *Services) every(ctx context.Context, name string, interval time.Duration, now bool, runOnce func(context.Context) error) {
	s.everyOr(ctx, name, interval, now, nil, runOnce)
}

// pushFinish turns `updates` messages into finish cycles, at most one per
// Finish.cfg.PushGap: a busy crawl publishes on every log entry, and each
// cycle costs two round trips even when there is nothing to report. A
// message that comes during the gap is kept (finishKick holds one) and
// served right after it, so the message of a mark-done is never dropped.
func (s *Services) pushFinish(ctx context.Context) {
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.finishKick:
		}
		select {
		case <-ctx.Done():
			return
		case s.finishTrigger <- struct{}{}:
		}
		gap.Reset(s.Finish.cfg.PushGap)
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
	}
}

// everyOr is every, also running runOnce whenever trigger receives.
func (s *Services) everyOr(ctx context.Context, name string, interval time.Duration, now bool, trigger <-chan struct{}, runOnce func(context.Context) error) {
	var failing bool
	metrics.RegisterService(name, interval)
	run.Go(&s.wg, s.log, name, func() {
		run.Every(ctx, s.log, name, run.Schedule{Interval: interval, Now: now, Trigger: trigger}, func(ctx context.Context) {
			start := time.Now()
			err := runOnce(ctx)
			if ctx.Err() == nil {
				metrics.ServiceCycle(name, start, err)
			}
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				failing = true
				s.log.Warn("cycle failed", "service", name, "err", err)
			case err == nil && failing:
				failing = false
				s.log.Info("cycle succeeded again", "service", name)
			}
		})
	})
}

// Stop ends the services and waits for running cycles. A finish notice
// whose line was not sent stays in Redis for the next start.
func (s *Services) Stop() {
	s.once.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		s.wg.Wait()
	})
}

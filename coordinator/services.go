// Package coordinator holds the background services of the control node,
// and only them (reaper, notifiers, analyzer, firehose, updates listener,
// API log relay, leader lease). They read and write Redis only through
// package store; the words they share with the front ends (Announcer,
// FinishReport, JobEvent, StreamSink, …) are in package news, so only
// cmd/archivebot imports this package (doc/architecture.md, Layers).
package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/news"
)

// ServicesConfig holds the settings of the background services. Zero
// values take the defaults of package config.
type ServicesConfig struct {
	Reaper    ReaperConfig
	Finish    FinishConfig
	Start     StartConfig
	Pipelines PipelineNotifierConfig
	Analyzer  AnalyzerConfig
	// AvoidSiteEvery bounds the avoid watch's lines per site (0: the
	// default; negative: one per job).
	AvoidSiteEvery time.Duration
	// QueueIndexRebuild is how often the index of named queues is rebuilt
	// with a SCAN (at start, then this often).
	QueueIndexRebuild time.Duration
}

// Services is the leader's one list of background work (Work): the
// services of this package, each on its own goroutine around its runOnce
// (run.Every), the `updates` listener feeding the analyzer (and whoever
// else registers with Updates.OnUpdate before Start), and what the caller
// adds (Add: the tweeter, the firehose, the pipeline API's term). Start
// starts all of it under one context, the leader's term; Stop ends it.
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
	// AvoidWatch tells a channel once when every pipeline avoids a queued
	// job's site.
	AvoidWatch *AvoidWatcher

	// finishKick is signalled by every `updates` message; finishTrigger
	// starts a finish cycle out of turn (see pushFinish).
	finishKick    chan struct{}
	finishTrigger chan struct{}

	store  Store
	work   []Work
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewServices builds the services over st; ann receives their lines.
func NewServices(st Store, ann news.Announcer, cfg ServicesConfig, log *slog.Logger) *Services {
	if log == nil {
		log = slog.Default()
	}
	s := &Services{
		Reaper:     NewReaper(st, ann, cfg.Reaper, log),
		Finish:     NewFinishNotifier(st, ann, cfg.Finish, log),
		Starts:     NewStartNotifier(st, ann, cfg.Start, log),
		Pipelines:  NewPipelineNotifier(st, ann, cfg.Pipelines, log),
		Analyzer:   NewAnalyzer(st, cfg.Analyzer, log),
		Updates:    NewUpdates(st, log),
		Admin:      NewAdminNotifier(st, ann, log),
		AvoidWatch: newAvoidWatcherEvery(st, log, cfg.AvoidSiteEvery),
		store:      st,
		log:        log,

		finishKick:    make(chan struct{}, 1),
		finishTrigger: make(chan struct{}),
	}
	queueIndexRebuild := cfg.QueueIndexRebuild
	orDefault(&queueIndexRebuild, config.DefaultQueueIndexRebuild)
	every := func(interval time.Duration, now bool) run.Schedule {
		return run.Schedule{Interval: interval, Now: now}
	}
	s.work = []Work{
		{Name: "reaper", Schedule: every(s.Reaper.cfg.Interval, false), RunOnce: s.Reaper.runOnce},
		{Name: "finish-notifier", Schedule: run.Schedule{Interval: s.Finish.cfg.Interval, Now: true, Trigger: s.finishTrigger}, RunOnce: s.Finish.runOnce},
		{Name: "finish-push", Loop: s.pushFinish},
		{Name: "start-notifier", Schedule: run.Schedule{Interval: s.Starts.cfg.Interval, Now: true, Trigger: s.Starts.trigger}, RunOnce: s.Starts.runOnce},
		{Name: "admin-notices", Schedule: every(DefaultAdminNoticeInterval, true), RunOnce: s.Admin.runOnce},
		{Name: "avoid-watch", Schedule: every(s.AvoidWatch.Interval, false), RunOnce: s.AvoidWatch.runOnce},
		{Name: "pipeline-notifier", Schedule: every(s.Pipelines.cfg.Interval, false), RunOnce: s.Pipelines.runOnce},
		{Name: "analyzer-sweep", Schedule: every(s.Analyzer.cfg.SweepInterval, false), RunOnce: s.Analyzer.runOnce},
		{Name: "queue-index", Schedule: every(queueIndexRebuild, true), RunOnce: func(ctx context.Context) error {
			_, err := s.store.RebuildQueueIndex(ctx)
			return err
		}},
		{Name: "updates listener", Loop: s.Updates.Run},
		{Name: "analyzer", Loop: s.Analyzer.work},
	}
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

// Work is one entry of the leader's list of background work, in one of
// three shapes: a cycle (RunOnce on Schedule, under run.Every: a failing
// service is logged once, not every cycle, and again when it recovers;
// each cycle is counted in the metrics), a loop (Loop runs until its
// context ends), or a component with goroutines of its own (Start, then
// Stop, which waits for them). doc/architecture.md, Goroutines, lists
// every entry.
type Work struct {
	Name string

	Schedule run.Schedule
	RunOnce  func(context.Context) error

	Loop func(context.Context)

	Start func(context.Context)
	Stop  func()
}

// Add appends w to the list; call it before Start.
func (s *Services) Add(w Work) { s.work = append(s.work, w) }

// WorkNames lists the names of the background work, in starting order.
func (s *Services) WorkNames() []string {
	names := make([]string, len(s.work))
	for i, w := range s.work {
		names[i] = w.Name
	}
	return names
}

// Start takes the pipeline notifier's startup snapshot (so pipelines that
// exist now are not announced), then starts every entry of the list, in
// order: the finish notifier's first cycle delivers the notices an earlier
// run left. It returns at once; Stop ends everything.
func (s *Services) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	if err := s.Pipelines.runOnce(ctx); err != nil {
		s.log.Warn("pipeline snapshot at startup failed; the first successful one is the baseline",
			"service", "pipeline-notifier", "err", err)
	}
	for _, w := range s.work {
		switch {
		case w.RunOnce != nil:
			s.cycle(ctx, w.Name, w.Schedule, w.RunOnce)
		case w.Loop != nil:
			run.Go(&s.wg, s.log, w.Name, func() { w.Loop(ctx) })
		case w.Start != nil:
			w.Start(ctx)
		}
	}
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

// cycle runs runOnce as sched says on a goroutine of its own. A failing
// service is logged once, not every cycle, and again when it recovers.
func (s *Services) cycle(ctx context.Context, name string, sched run.Schedule, runOnce func(context.Context) error) {
	var failing bool
	metrics.RegisterService(name, sched.Interval)
	run.Go(&s.wg, s.log, name, func() {
		run.Every(ctx, s.log, name, sched, func(ctx context.Context) {
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

// Stop ends the background work and waits for it: the components added
// last are stopped first (the caller's, such as the tweeter, before the
// services), then running cycles and loops. A finish notice whose line was
// not sent stays in Redis for the next start.
func (s *Services) Stop() {
	s.once.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		for i := len(s.work) - 1; i >= 0; i-- {
			if w := s.work[i]; w.Stop != nil {
				w.Stop()
			}
		}
		s.wg.Wait()
	})
}

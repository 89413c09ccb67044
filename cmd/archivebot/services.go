package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
	"github.com/archiveteam/archivebot-go/web"
)

// startServices starts the leader's one list of background work
// (coordinator.Services): the coordinator services, then the tweeter, the
// firehose feeding hub (when the web server is on) and the pipeline API's
// term (when it is on), reporting to ann. Stop on the result ends it all.
func startServices(ctx context.Context, cfg *config.Config, st *store.Store, ann news.Announcer,
	hub *web.Hub, papi *pipelineapi.Server, logger *slog.Logger) (*coordinator.Services, error) {
	svc := coordinator.NewServices(st, ann, coordinator.ServicesConfig{
		Reaper: coordinator.ReaperConfig{
			Interval:  cfg.Reaper.Interval.Duration,
			Threshold: cfg.Reaper.Threshold,
			AutoFail:  cfg.Reaper.AutoFail,
		},
		Finish: coordinator.FinishConfig{
			Interval: cfg.Notifier.FinishInterval.Duration,
			Batch:    config.DefaultFinishBatch,
		},
		Start: coordinator.StartConfig{
			Interval: cfg.Notifier.StartInterval.Duration,
			Notify:   cfg.Notifier.StartNotices,
			Batch:    config.DefaultFinishBatch,
		},
		Pipelines: coordinator.PipelineNotifierConfig{
			Interval:    cfg.Notifier.PipelineInterval.Duration,
			SilentAfter: cfg.Notifier.PipelineSilentAfter.Duration,
			ChangeEvery: changeEvery(cfg.Notifier.PipelineChangeEvery.Duration),
			Now:         st.Now,
		},
		Analyzer: coordinator.AnalyzerConfig{
			SweepInterval: cfg.Analyzer.SweepInterval.Duration,
			TrimAfter:     cfg.Analyzer.TrimAfter,
			// The node's own live stream needs what it has not sent yet.
			RespectBroadcast: cfg.Analyzer.RespectBroadcast || cfg.HTTP.StreamOn(),
			StreamMaxLag:     streamMaxLag(cfg),
			Batch:            config.DefaultAnalyzerBatch,
			Debounce:         config.DefaultAnalyzerDebounce,
		},
		AvoidSiteEvery:    changeEvery(cfg.Notifier.AvoidSiteEvery.Duration),
		QueueIndexRebuild: config.DefaultQueueIndexRebuild,
	}, logger)
	var networks []tweeter.Network
	if m := cfg.Tweeter.Mastodon; m.On() {
		networks = append(networks, tweeter.MastodonNetwork(m.Server, m.AccessToken, m.Budget, m.BudgetWindow.Duration, nil))
	}
	if b := cfg.Tweeter.Bluesky; b.On() {
		networks = append(networks, tweeter.BlueskyNetwork(b.Service, b.Identifier, b.AppPassword, b.Budget, b.BudgetWindow.Duration, nil))
	}
	tw, err := tweeter.New(st, tweeter.Config{
		Interval:        cfg.Tweeter.Interval.Duration,
		Delay:           cfg.Tweeter.Delay.Duration,
		API:             cfg.Tweeter.API,
		XBudget:         cfg.Tweeter.Budget,
		XWindow:         cfg.Tweeter.BudgetWindow.Duration,
		Networks:        networks,
		DigestSchedule:  cfg.Tweeter.DigestSchedule,
		SummarySchedule: cfg.Tweeter.SummarySchedule,
		Credentials: tweeter.Credentials{
			ConsumerKey:    cfg.Tweeter.ConsumerKey,
			ConsumerSecret: cfg.Tweeter.ConsumerSecret,
			AccessToken:    cfg.Tweeter.AccessToken,
			AccessSecret:   cfg.Tweeter.AccessSecret,
		},
		MaxTries:       config.DefaultTweeterMaxTries,
		RetryBackoff:   config.DefaultTweeterRetryBackoff,
		MaxBackoff:     config.DefaultTweeterMaxBackoff,
		RateLimitPause: config.DefaultTweeterRateLimitPause,
		SweepInterval:  config.DefaultTweeterSweepInterval,
		PruneInterval:  config.DefaultTweeterPruneInterval,
		Retention:      config.DefaultTweeterRetention,
		SeenTTL:        config.DefaultTweeterSeenTTL,
		SeenMax:        config.DefaultTweeterSeenMax,
		Logger:         logger.With("service", "tweeter"),
	})
	if err != nil {
		return nil, fmt.Errorf("tweeter: %w", err)
	}
	svc.Updates.OnUpdate(tw.JobUpdated)
	svc.Updates.OnSubscribe(tw.SweepSoon)
	svc.Add(coordinator.Work{Name: "tweeter", Start: tw.Start, Stop: tw.Stop})
	if hub != nil {
		svc.Add(firehoseWork(st, svc.Updates, hub, cfg.HA.Enabled, logger))
	}
	if papi != nil {
		svc.Add(pipelineAPIWork(papi))
	}
	svc.Start(ctx)
	return svc, nil
}

// streamMaxLag is the trimmer's bound for the live stream: none for an
// external firehose (analyzer.respect_broadcast alone), as before.
func streamMaxLag(cfg *config.Config) int {
	if !cfg.HTTP.StreamOn() {
		return 0
	}
	return cfg.HTTP.StreamMaxLag
}

// runSimulator is `archivebot simulate-pipeline`: a pipeline that does
// exactly what the upstream pipeline does in Redis (doc/protocol.md), for demos
// and tests.
func runSimulator(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("simulate-pipeline", stderr)
	var o pipelinesim.Options
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := pipelinesim.Run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "simulate-pipeline: %v\n", err)
		return 1
	}
	return 0
}

// changeEvery is notifier.pipeline_change_every for the pipeline
// notifier: 0 (written "0s": no limit) is negative there.
func changeEvery(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// running is what startServices started; Stop ends it in order.
type running struct {
	services *coordinator.Services
	tweeter  *tweeter.Tweeter
}

// Stop ends the tweeter, then the coordinator services.
func (r *running) Stop() {
	r.tweeter.Stop()
	r.services.Stop()
}

// startServices starts the coordinator services and the tweeter, reporting
// to ann.
func startServices(ctx context.Context, cfg *config.Config, store *store.Store, ann coordinator.Announcer, logger *slog.Logger) (*running, error) {
	svc := coordinator.NewServices(store, ann, coordinator.ServicesConfig{
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
		QueueIndexRebuild: config.DefaultQueueIndexRebuild,
	}, logger)
	tw, err := tweeter.New(store, tweeter.Config{
		Interval: cfg.Tweeter.Interval.Duration,
		Delay:    cfg.Tweeter.Delay.Duration,
		API:      cfg.Tweeter.API,
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
	svc.Start(ctx)
	tw.Start(ctx)
	return &running{services: svc, tweeter: tw}, nil
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

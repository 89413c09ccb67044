package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// listenPipelines opens the pipeline API's socket (pipelines.listen) before
// anything starts; nil when it is off.
func listenPipelines(cfg *config.Config, stdout io.Writer) (net.Listener, error) {
	if cfg.Pipelines.Listen == "" {
		return nil, nil
	}
	scheme := "http"
	if cfg.Pipelines.TLSCert != "" {
		scheme = "https"
	}
	return listenKey("pipelines.listen", cfg.Pipelines.Listen, "; set pipelines.listen to another address, or leave it out to switch the pipeline API off",
		stdout, "Pipeline API on "+scheme+"://%s/ (doc/pipeline-api.md)\n")
}

// newPipelineAPI builds the pipeline API server and serves it on ln until
// ctx ends; nil when ln is nil. It answers 503 until pipelineAPIWork starts
// a term. leading (nil on a single node) is asked before every request.
func newPipelineAPI(ctx context.Context, wg *sync.WaitGroup, ln net.Listener, cfg *config.Config,
	st *store.Store, leading func() bool, logger *slog.Logger) *pipelineapi.Server {
	if ln == nil {
		return nil
	}
	srv := pipelineapi.New(pipelineapi.Options{
		Store:      st,
		Sink:       startAPILogPublisher(ctx, wg, st, logger),
		Now:        st.Now,
		Leading:    leading,
		Logger:     logger,
		Rate:       cfg.Pipelines.Rate,
		LogRate:    cfg.Pipelines.LogRate,
		MaxStreams: cfg.Pipelines.MaxStreams,
		// The configuration's 0 is "off", the options' -1.
		MaxConns:          offIfZero(cfg.Pipelines.MaxConns),
		MaxConnsPerAddr:   offIfZero(cfg.Pipelines.MaxConnsPerAddr),
		MaxWaitingTakes:   offIfZero(cfg.Pipelines.MaxWaitingTakes),
		ReadTimeout:       offIfZero(cfg.Pipelines.ReadTimeout.Duration),
		IdleTimeout:       offIfZero(cfg.Pipelines.IdleTimeout.Duration),
		WriteTimeout:      offIfZero(cfg.Pipelines.WriteTimeout.Duration),
		BanCheck:          offIfZero(cfg.Jobs.BanCheckResponses),
		BodyBudget:        offIfZero(int64(cfg.Pipelines.BodyBudget)),
		BodyBudgetPerAddr: offIfZero(int64(cfg.Pipelines.BodyBudgetPerAddr)),
		BodyBudgetPerKey:  offIfZero(int64(cfg.Pipelines.BodyBudgetPerKey)),
	})
	irun.Go(wg, logger, "pipeline API", func() {
		if err := srv.Serve(ctx, ln, cfg.Pipelines.TLSCert, cfg.Pipelines.TLSKey); err != nil {
			logger.Error("pipeline API stopped", "service", "pipelineapi", "err", err)
		}
	})
	return srv
}

// offIfZero maps a limit the configuration switched off (0) to the
// options' "off" (-1).
func offIfZero[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// pipelineAPIWork is one term of the pipeline API (the whole run on a
// single node, each leadership term under ha.enabled), as an entry of the
// leader's background work. Its log entries go to every node's stream
// through Redis (startAPILogPublisher, startAPILogListener).
func pipelineAPIWork(srv *pipelineapi.Server) coordinator.Work {
	return coordinator.Work{Name: "pipeline API term", Loop: func(ctx context.Context) { srv.Run(ctx) }}
}

// recentAPI is what /logs/recent asks for the API's in-memory entries.
func recentAPI(srv *pipelineapi.Server) func(string, int) []record.LogEntry {
	if srv == nil {
		return nil
	}
	return srv.Recent
}

// startFailoverCheck runs the failover check (coordinator.FailoverCheck)
// on a node behind Sentinel, whether it leads or not (leading: the
// lease's Valid; nil for a single node).
func startFailoverCheck(ctx context.Context, wg *sync.WaitGroup, st *store.Store, papi *pipelineapi.Server, leading func() bool, logger *slog.Logger) {
	if st.Positions() == nil {
		return
	}
	var holds coordinator.HoldRechecker
	if papi != nil {
		holds = papi
	}
	fc := coordinator.NewFailoverCheck(st, st.Positions(), holds, logger)
	fc.Leading = leading
	irun.Go(wg, logger, "failover check", func() { fc.Run(ctx) })
}

package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/archiveteam/archivebot-go/coordinator"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// The pipeline API's log entries reach every node's live stream through
// Redis (doc/pipeline-api.md, Logs off Redis): the API hands them to the
// publisher (on every node with the API on; only the leader's accepts
// entries), and every node with a stream hub listens, the leader too.

// startAPILogPublisher runs the publisher of the API's log entries until
// ctx ends.
func startAPILogPublisher(ctx context.Context, wg *sync.WaitGroup, st *store.Store, logger *slog.Logger) *coordinator.APILogPublisher {
	p := coordinator.NewAPILogPublisher(st, coordinator.APILogConfig{}, logger)
	irun.Go(wg, logger, "API log publisher", func() { p.Run(ctx) })
	return p
}

// The hub tells its clients of the entries the publisher dropped.
var _ coordinator.DropSink = (*web.Hub)(nil)

// startAPILogListener feeds hub with the API's log entries until ctx
// ends.
func startAPILogListener(ctx context.Context, wg *sync.WaitGroup, st *store.Store, hub *web.Hub, logger *slog.Logger) *coordinator.APILogListener {
	l := coordinator.NewAPILogListener(st, hub, coordinator.APILogConfig{}, logger)
	irun.Go(wg, logger, "API log listener", func() { l.Run(ctx) })
	return l
}

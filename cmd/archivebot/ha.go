package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// haFrontEnd is what the web server sees of an HA node: the IRC client
// of the current term, if this node leads.
type haFrontEnd struct {
	lease *coordinator.Lease
	mu    sync.Mutex
	cur   *botirc.Client
}

func (h *haFrontEnd) set(c *botirc.Client) {
	h.mu.Lock()
	h.cur = c
	h.mu.Unlock()
}

// Connected reports whether this node leads and its IRC client is registered.
func (h *haFrontEnd) Connected() bool {
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	return c != nil && c.Connected() && h.lease.Valid()
}

// Role is "leader" or "standby" (for /readyz).
func (h *haFrontEnd) Role() string {
	if h.lease.Valid() {
		return "leader"
	}
	return "standby"
}

// ClockProblem says why this node's clock keeps it from leading (for
// /readyz).
func (h *haFrontEnd) ClockProblem() string { return h.lease.ClockProblem() }

// Announce and Run make haFrontEnd a frontEnd for startWeb; services get
// the term's client, never this.
func (h *haFrontEnd) Announce(ctx context.Context, channel, text string) error {
	return errors.New("not the leader")
}
func (h *haFrontEnd) Run(ctx context.Context) error { return nil }
func (h *haFrontEnd) Channels() []string            { return nil }

// serveHA runs an active/standby node (ha.enabled): it campaigns for the
// leader lease; while it holds it, it connects to IRC (its lines gated by
// the lease's local deadline) and runs the services under the fencing
// token; otherwise it only serves the web API. See doc/architecture.md,
// High availability.
func serveHA(ctx context.Context, cfg *config.Config, logger *slog.Logger, st *store.Store, lease *coordinator.Lease,
	b *bot.Bot, catalog *bot.Catalog, webLn, streamLn, apiLn net.Listener, signIn *webSignIn) error {
	fe := &haFrontEnd{lease: lease}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	irun.Go(&wg, logger, "catalog", func() { catalog.Watch(runCtx, 5*time.Second) })
	// The pipeline API listens on every node; a standby answers 503.
	papi := newPipelineAPI(runCtx, &wg, apiLn, cfg, st, lease.Valid, logger)
	startFailoverCheck(runCtx, &wg, st, papi, lease.Valid, logger)
	hub := startWeb(runCtx, &wg, webLn, streamLn, st, catalog, fe, logger, recentAPI(papi), hubOptions(cfg), cfg.HTTP.RecentMaxBytes,
		actionOptions(cfg, b, st, fe, logger, signIn.secret), signIn,
		web.ConnLimits{Total: cfg.HTTP.MaxConns, PerAddr: cfg.HTTP.MaxConnsPerAddr})
	logger.Info("high availability: campaigning for the leader lease", "node", cfg.HA.NodeID, "lease_ttl", cfg.HA.LeaseTTL.Duration)

	var fatal error
	if cfg.HA.IRCStandby {
		fatal = leadHot(runCtx, cancel, cfg, logger, st, lease, b, fe, hub, papi, signIn)
	} else {
		fatal = leadCold(runCtx, cancel, cfg, logger, st, lease, b, fe, hub, papi, signIn)
	}
	logger.Info("shutting down")
	cancel()
	wg.Wait()
	forgetNodeURL(cfg, st, logger)
	return fatal
}

// leadCold is serveHA's campaign without ha.irc_standby: the node
// connects to IRC in each term, once it holds the lease.
func leadCold(runCtx context.Context, cancel context.CancelFunc, cfg *config.Config, logger *slog.Logger, st *store.Store,
	lease *coordinator.Lease, b *bot.Bot, fe *haFrontEnd, hub *web.Hub, papi *pipelineapi.Server, signIn *webSignIn) error {
	var fatal error
	lease.Run(runCtx, func(leadCtx context.Context) {
		c := botirc.New(cfg.IRC, b, logger.With("service", "irc", "node", cfg.HA.NodeID))
		c.Gate = lease.Valid
		c.OnPresenceEnd(signIn.presenceEnded)
		services, err := startServices(leadCtx, cfg, st, c, hub, papi, logger)
		if err != nil {
			fatal = err
			cancel()
			return
		}
		fe.set(c)
		if err := c.Run(leadCtx); err != nil && !errors.Is(err, context.Canceled) {
			fatal = err
			cancel()
		}
		fe.set(nil)
		services.Stop()
	})
	return fatal
}

// forgetNodeURL removes this node's dashboard address from
// archivebot:web:nodes (actionOptions wrote it at start) on a clean
// shutdown, so a node taken out of service leaves no address behind. A
// node that is killed leaves its entry until it starts again under the
// same node id (which rewrites it); a standby names the address only for
// the node that holds the lease.
func forgetNodeURL(cfg *config.Config, st *store.Store, log *slog.Logger) {
	if cfg.HTTP.PublicURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := st.SetNodeURL(ctx, cfg.HA.NodeID, ""); err != nil {
		log.Warn("could not remove this node's dashboard address", "err", err)
	}
}

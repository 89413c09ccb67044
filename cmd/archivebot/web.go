package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// listenWeb opens the web server's socket before the front end and the
// services start, so that a taken port stops the process at once with a
// message naming the key, and prints the address to open. It returns nil
// when http.listen is "".
func listenWeb(cfg *config.Config, stdout io.Writer) (net.Listener, error) {
	if cfg.HTTP.Listen == "" {
		return nil, nil
	}
	return listenKey("http.listen", cfg.HTTP.Listen, fmt.Sprintf(" (another archivebot, or upstream's dashboard?); set http.listen (or -http-listen, %s) to another address, or listen = \"\" to switch the web server off", config.EnvHTTPListen),
		stdout, "Web API on http://%s/ (/status, /jobs/IDENT, /metrics, /readyz)\n")
}

// listenStream opens the second listener of the live stream
// (http.stream_listen, upstream's port 4568); nil when it is off.
func listenStream(cfg *config.Config, stdout io.Writer) (net.Listener, error) {
	if !cfg.HTTP.StreamOn() || cfg.HTTP.StreamListen == "" {
		return nil, nil
	}
	return listenKey("http.stream_listen", cfg.HTTP.StreamListen, fmt.Sprintf(" (upstream's dashboard WebSocket server?); set http.stream_listen (or -stream-listen, %s) to another address, or stream_listen = \"\" to switch it off", config.EnvStreamListen),
		stdout, "Live stream for upstream's dashboard on ws://%s/stream\n")
}

// listenKey opens addr, the value of the configuration key key (the web
// server's, the live stream's or the pipeline API's socket), and prints
// announce (a format of the address) to stdout. Its errors name the key;
// a taken port says so, followed by hint (what else may hold the port,
// and what to set instead).
func listenKey(key, addr, hint string, stdout io.Writer, announce string) (net.Listener, error) {
	ln, err := web.Listen(addr)
	if errors.Is(err, web.ErrAddrInUse) {
		return nil, &addrInUseError{key: key, addr: addr, hint: hint}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	fmt.Fprintf(stdout, announce, ln.Addr())
	return ln, nil
}

// addrInUseError is a listen address another program holds: the web
// server's, the live stream's or the pipeline API's. -check-config
// -allow-in-use reports it as a warning (before a switch-over, upstream's
// web app and websocket.py hold 4567 and 4568 until the node replaces
// them: doc/migrating.md).
type addrInUseError struct {
	key, addr string
	hint      string // what else may hold it, and what to set instead
}

func (e *addrInUseError) Error() string {
	return fmt.Sprintf("%s: %s is already in use%s", e.key, e.addr, e.hint)
}

func (e *addrInUseError) Unwrap() error { return web.ErrAddrInUse }

// hubOptions are the live stream's limits from the configuration.
func hubOptions(cfg *config.Config) web.HubOptions {
	// The configuration's 0 is "no bound"; the hub's is "the default".
	unread := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	return web.HubOptions{ClientBytes: int(cfg.HTTP.StreamQueueBytes), TotalBytes: cfg.HTTP.StreamTotalBytes,
		InflightBytes: unread(cfg.HTTP.StreamUnreadBytes), InflightBytesUpstream: unread(cfg.HTTP.StreamUnreadBytesUpstream),
		MaxStreamAge: cfg.HTTP.StreamMaxAge.Duration}
}

// startWeb serves the HTTP API on ln and the live stream (its hub, on ln
// and on streamLn) until ctx ends (wg waits for the graceful shutdown). It
// returns the hub for the firehose (firehoseWork), nil when the web server is off.
func startWeb(ctx context.Context, wg *sync.WaitGroup, ln, streamLn net.Listener, st *store.Store,
	catalog *bot.Catalog, fe frontEnd, logger *slog.Logger, recent func(string, int) []record.LogEntry, hubOpt web.HubOptions,
	recentMaxBytes int, actions *web.ActionOptions, signIn *webSignIn, conns web.ConnLimits) *web.Hub {
	if ln == nil {
		return nil
	}
	hubOpt.Logger = logger
	hub := web.NewHub(hubOpt)
	irun.Go(wg, logger, "stream hub", func() { hub.Run(ctx) })
	startAPILogListener(ctx, wg, st, hub, logger)
	var relay *coordinator.RelayReader
	if _, ha := fe.(interface{ Role() string }); ha {
		// ha.enabled (the front end has a role): every node's stream,
		// the leader's included, is fed from the leader's relay.
		relay = startRelayReader(ctx, wg, st, hub, logger)
	}
	opt := web.Options{
		Store:     st,
		Hub:       hub,
		Logger:    logger,
		RecentAPI: recent,
		// The configuration's 0 is "no cap", as the option's.
		RecentMaxBytes: recentMaxBytes,
		// Dashboard sign-in and actions (nil: off, http.public_url unset).
		Actions: actions,
		Conns:   conns,
		IgnoreSets: func() map[string][]string {
			sets := map[string][]string{}
			for _, name := range catalog.SetNames() {
				if ps, ok := catalog.Set(name); ok {
					sets[name] = ps
				}
			}
			return sets
		},
	}
	if c, ok := fe.(interface{ Connected() bool }); ok {
		opt.IRCConnected = c.Connected
	}
	if r, ok := fe.(interface{ Role() string }); ok {
		opt.Role = r.Role
	}
	if c, ok := fe.(interface{ ClockProblem() string }); ok {
		opt.ClockProblem = c.ClockProblem
	}
	if relay != nil {
		opt.Relay = relay.Health
	}
	srv := web.New(opt)
	signIn.setServer(srv)
	if actions != nil {
		irun.Go(wg, logger, "web presence ends", func() { srv.RunPresenceEnds(ctx) })
	}
	logger.Info("web server listening", "service", "web", "addr", ln.Addr().String())
	irun.Go(wg, logger, "web", func() {
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("web server stopped", "service", "web", "err", err)
		}
	})
	if streamLn != nil {
		irun.Go(wg, logger, "stream listener", func() {
			if err := srv.ServeStream(ctx, streamLn); err != nil {
				logger.Error("stream listener stopped", "service", "web", "err", err)
			}
		})
	}
	return hub
}

// firehoseWork is the firehose feeding hub from the job logs, following
// updates, as an entry of the leader's background work: it writes the
// broadcast bookmarks, so under ha.enabled only the leader runs it (one per
// term); the hub and its clients stay. Under ha.enabled (relay) it feeds
// no hub itself: it appends to the relay, which every node's relay
// reader, its own included, hands to its hub (startRelayReader).
func firehoseWork(st *store.Store, updates *coordinator.Updates, hub *web.Hub, relay bool, logger *slog.Logger) coordinator.Work {
	fh := coordinator.NewFirehose(st, hub, coordinator.FirehoseConfig{Relay: relay}, logger)
	updates.OnUpdate(fh.Notify)
	updates.OnSubscribe(fh.CatchUp)
	return coordinator.Work{Name: "firehose", Start: func(ctx context.Context) {
		fh.Start(ctx)
		fh.CatchUp(ctx) // the subscription may already be up
	}, Stop: fh.Stop}
}

// startRelayReader feeds hub from the leader's relay until ctx ends, on
// every node of ha.enabled, leading or not (doc/architecture.md, The
// follower's stream).
func startRelayReader(ctx context.Context, wg *sync.WaitGroup, st *store.Store, hub *web.Hub, logger *slog.Logger) *coordinator.RelayReader {
	r := coordinator.NewRelayReader(st, hub, logger)
	irun.Go(wg, logger, "stream relay reader", func() { r.Run(ctx) })
	return r
}

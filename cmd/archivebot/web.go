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
	ln, err := web.Listen(cfg.HTTP.Listen)
	if errors.Is(err, web.ErrAddrInUse) {
		return nil, fmt.Errorf("http.listen: %s is already in use (another archivebot, or upstream's dashboard?); set http.listen to another address, or listen = \"\" to switch the web server off", cfg.HTTP.Listen)
	}
	if err != nil {
		return nil, fmt.Errorf("http.listen: %w", err)
	}
	fmt.Fprintf(stdout, "Web API on http://%s/ (/status, /jobs/IDENT, /metrics, /readyz)\n", ln.Addr())
	return ln, nil
}

// startWeb serves the HTTP API on ln until ctx ends (wg waits for the
// graceful shutdown).
func startWeb(ctx context.Context, wg *sync.WaitGroup, ln net.Listener, store *coordinator.Store,
	catalog *bot.Catalog, fe frontEnd, logger *slog.Logger) {
	if ln == nil {
		return
	}
	opt := web.Options{
		Store:  store,
		Logger: logger,
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
	srv := web.New(opt)
	logger.Info("web server listening", "service", "web", "addr", ln.Addr().String())
	irun.Go(wg, logger, "web", func() {
		if err := srv.Serve(ctx, ln); err != nil {
			logger.Error("web server stopped", "service", "web", "err", err)
		}
	})
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/coordinator/embedded"
)

// frontEnd is the IRC client or the console.
type frontEnd interface {
	coordinator.Announcer
	Run(ctx context.Context) error
}

// serve runs the control node until ctx ends (SIGINT/SIGTERM) or, on the
// console, until stdin reaches EOF.
//
// Shutdown order: stop taking commands (the front end returns), stop the
// services (a finish report being sent completes or stays in Redis), close
// the Redis client, then stop the embedded server (final snapshot). The
// web server stops with the services (requests in flight get 5 s).
func serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	rdb, srv, err := openRedis(cfg, logger, stdout)
	if err != nil {
		return err
	}
	defer func() {
		if srv != nil {
			if err := srv.Close(); err != nil {
				logger.Error("embedded redis: final save failed", "err", err)
			} else {
				logger.Info("embedded redis saved and stopped")
			}
		}
	}()
	defer rdb.Close()
	webLn, err := listenWeb(cfg, stdout)
	if err != nil {
		return err
	}
	if webLn != nil {
		defer webLn.Close()
	}
	streamLn, err := listenStream(cfg, stdout)
	if err != nil {
		return err
	}
	if streamLn != nil {
		defer streamLn.Close()
	}

	store := coordinator.NewStore(rdb)
	if err := store.Ping(ctx); err != nil {
		// Not fatal: Redis going away is normal, commands answer
		// "backend unavailable" until it is back.
		logger.Warn("redis is not answering yet; commands will say the backend is unavailable until it does", "err", err)
	}
	catalog, err := bot.LoadCatalog(cfg.Jobs.IgnoreSetsDir, cfg.Jobs.UserAgentsDir, logger.With("service", "catalog"))
	if err != nil {
		return fmt.Errorf("ignore sets / user agents: %w", err)
	}
	b := bot.New(store, bot.Options{
		Schemes:      cfg.Jobs.Schemes,
		PendingLimit: cfg.Jobs.PendingLimit,
		Catalog:      catalog,
		Logger:       logger.With("service", "bot"),
		OutcomeWait:  cfg.Bot.OutcomeWait.Duration,
	})
	// Runs after the front end has stopped: no command is left to follow
	// up (deferred calls run in reverse order, before Redis closes).
	defer b.Close()

	var fe frontEnd
	if cfg.Console() {
		fe = &bot.Console{Bot: b, User: localUser(), In: stdin, Out: stdout}
		fmt.Fprintln(stdout, "ArchiveBot console. Type !help for the commands, !a URL to archive; Ctrl-D or Ctrl-C quits.")
	} else {
		fe = botirc.New(cfg.IRC, b, logger.With("service", "irc"))
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goSafe(&wg, logger, "catalog", func() { catalog.Watch(runCtx, 5*time.Second) })

	services, err := startServices(runCtx, cfg, store, fe, logger)
	if err != nil {
		return err
	}
	startWeb(runCtx, &wg, webLn, streamLn, store, services.services.Updates, catalog, fe, logger)

	feErr := fe.Run(runCtx)
	logger.Info("front end stopped; shutting down")
	cancel()
	services.Stop()
	wg.Wait()
	if feErr != nil && !errors.Is(feErr, context.Canceled) {
		return feErr
	}
	return nil
}

// openRedis connects to the configured Redis or starts the embedded one.
func openRedis(cfg *config.Config, logger *slog.Logger, stdout io.Writer) (*redis.Client, *embedded.Server, error) {
	if !cfg.Embedded() {
		opt, err := redis.ParseURL(cfg.Redis.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("redis.url: %w", err)
		}
		logger.Info("using redis", "url", redactURL(cfg.Redis.URL))
		return redis.NewClient(opt), nil, nil
	}
	srv, err := embedded.Start(embedded.Options{
		Addr:         cfg.Redis.Listen,
		DataDir:      cfg.Redis.DataDir,
		Password:     cfg.Redis.Password,
		SaveInterval: cfg.Redis.SaveInterval.Duration,
		Logger:       logger.With("service", "embedded-redis"),
	})
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stdout, "Embedded Redis listening; pipelines connect with REDIS_URL=%s\n", srv.URL())
	logger.Info("embedded redis started", "addr", srv.Addr(), "data_dir", cfg.Redis.DataDir)
	return redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: cfg.Redis.Password}), srv, nil
}

// goSafe runs fn in a goroutine that recovers panics, logs the stack and
// keeps the process alive.
func goSafe(wg *sync.WaitGroup, logger *slog.Logger, name string, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				logger.Error("goroutine panicked", "service", name, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		fn()
	}()
}

// redactURL hides a password in a Redis URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// checkConfig loads everything a real start would, without starting.
func checkConfig(cfg *config.Config, logger *slog.Logger) error {
	if _, err := bot.LoadCatalog(cfg.Jobs.IgnoreSetsDir, cfg.Jobs.UserAgentsDir, logger); err != nil {
		return fmt.Errorf("ignore sets / user agents: %w", err)
	}
	if cfg.IRC.TLSCA != "" {
		if _, err := os.ReadFile(cfg.IRC.TLSCA); err != nil {
			return fmt.Errorf("irc.tls_ca: %w", err)
		}
	}
	return nil
}

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/embeddedredis"
	"github.com/archiveteam/archivebot-go/internal/clock"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// frontEnd is the IRC client or the console.
type frontEnd interface {
	news.Announcer
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
	apiLn, err := listenPipelines(cfg, stdout)
	if err != nil {
		return err
	}
	if apiLn != nil {
		defer apiLn.Close()
	}

	// With ha.enabled, the commands a deposed leader still had buffered
	// are refused too: their writes carry the lease's command fence. The
	// lease is made over the store, so the store asks for it through lease.
	var lease *coordinator.Lease
	opts := []store.Option{
		// The node's wall clock where it matters across nodes; a test
		// harness may skew it (internal/clock, doc/soak.md).
		store.WithClock(clock.FromEnv()),
		store.WithLogger(logger),
		store.WithWait(cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout.Duration),
	}
	if len(cfg.Redis.Sentinels) > 0 {
		// A node behind Sentinel notes where its writes land in the
		// replication stream, for the leader's failover check
		// (coordinator.FailoverCheck; doc/reliability.md, A failover that
		// loses writes).
		opts = append(opts, store.WithPositions(store.NewPositions()))
	}
	if cfg.HA.Enabled {
		opts = append(opts, store.WithCommandFence(func() string { return lease.CommandFence() }))
	}
	st := store.New(rdb, opts...)
	if cfg.HA.Enabled {
		lease = coordinator.NewLease(st, cfg.HA.NodeID, cfg.HA.LeaseTTL.Duration, logger)
		lease.MaxClockSkew = cfg.HA.MaxClockSkew.Duration
	}
	st.SetTakeRules(takeRules(cfg))
	if err := st.Ping(ctx); err != nil {
		// Not fatal: Redis going away is normal, commands answer
		// "backend unavailable" until it is back.
		logger.Warn("redis is not answering yet; commands will say the backend is unavailable until it does", "err", err)
	}
	// A pattern, agent or file the node cannot use is refused alone, with
	// a warning; only a directory that cannot be read stops the start.
	catalog, err := bot.LoadCatalog(cfg.Jobs.IgnoreSetsDir, cfg.Jobs.UserAgentsDir, logger.With("service", "catalog"))
	if err != nil {
		return fmt.Errorf("ignore sets / user agents: %w", err)
	}
	fmt.Fprintln(stdout, catalog.Describe())
	logger.Info("ignore sets and user agents loaded", "service", "catalog", "catalog", catalog.Source(), "sets", len(catalog.SetNames()), "refused", len(catalog.Problems()))
	signIn := &webSignIn{}
	login, logout := signIn.botHooks(cfg)
	if login != nil {
		if signIn.secret, err = loadWebSecret(cfg, logger); err != nil {
			return err
		}
	}
	b := bot.New(st, bot.Options{
		PublicURL:           cfg.HTTP.PublicURL,
		Login:               login,
		Logout:              logout,
		Schemes:             cfg.Jobs.Schemes,
		PendingLimit:        cfg.Jobs.PendingLimit,
		PerUserPendingLimit: cfg.Jobs.PerUserPendingLimit,
		RequireAccount:      cfg.Jobs.RequireAccount,
		StartNotices:        cfg.Notifier.StartNotices,
		Catalog:             catalog,
		Logger:              logger.With("service", "bot"),
		OutcomeWait:         cfg.Bot.OutcomeWait.Duration,
	})
	if login != nil {
		b.AddWhoisNote(signIn.whoisNote)
	}
	// Runs after the front end has stopped: no command is left to follow
	// up (deferred calls run in reverse order, before Redis closes).
	defer b.Close()

	if cfg.HA.Enabled {
		return serveHA(ctx, cfg, logger, st, lease, b, catalog, webLn, streamLn, apiLn, signIn)
	}
	metrics.SetLeader(true, time.Now()) // a single node leads

	var fe frontEnd
	if cfg.Console() {
		fe = &bot.Console{Bot: b, User: localUser(), In: stdin, Out: stdout}
		fmt.Fprintln(stdout, "ArchiveBot console. Type !help for the commands, !a URL to archive; Ctrl-D or Ctrl-C quits.")
	} else {
		c := botirc.New(cfg.IRC, b, logger.With("service", "irc"))
		c.OnPresenceEnd(signIn.presenceEnded)
		fe = c
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	irun.Go(&wg, logger, "catalog", func() { catalog.Watch(runCtx, 5*time.Second) })

	papi := newPipelineAPI(runCtx, &wg, apiLn, cfg, st, nil, logger)
	startFailoverCheck(runCtx, &wg, st, papi, nil, logger)
	hub := startWeb(runCtx, &wg, webLn, streamLn, st, catalog, fe, logger, recentAPI(papi), hubOptions(cfg), cfg.HTTP.RecentMaxBytes,
		actionOptions(cfg, b, st, fe, logger, signIn.secret), signIn,
		web.ConnLimits{Total: cfg.HTTP.MaxConns, PerAddr: cfg.HTTP.MaxConnsPerAddr})
	services, err := startServices(runCtx, cfg, st, fe, hub, papi, logger)
	if err != nil {
		return err
	}

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

// openRedis connects to the configured Redis (through Sentinel when
// redis.sentinels is set) or starts the embedded one.
func openRedis(cfg *config.Config, logger *slog.Logger, stdout io.Writer) (*redis.Client, *embeddedredis.Server, error) {
	if len(cfg.Redis.Sentinels) > 0 {
		logger.Info("using redis through sentinel", "master_name", cfg.Redis.MasterName, "sentinels", cfg.Redis.Sentinels, "db", cfg.Redis.DB)
		fo := failoverOptions(cfg)
		fo.ClientName = nodeClientName
		return redis.NewFailoverClient(fo), nil, nil
	}
	if !cfg.Embedded() {
		opt, err := config.ParseRedisURL(cfg.Redis.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("redis.url: %w", err)
		}
		logger.Info("using redis", "url", config.RedactURL(cfg.Redis.URL))
		// Named, so that CLIENT LIST (and archivebot migrate check) tells
		// the node's connections from upstream's processes.
		opt.ClientName = nodeClientName
		return redis.NewClient(opt), nil, nil
	}
	srv, err := embeddedredis.Start(embeddedredis.Options{
		Addr:         cfg.Redis.Listen,
		DataDir:      cfg.Redis.DataDir,
		Password:     cfg.Redis.Password,
		SaveInterval: cfg.Redis.SaveInterval.Duration,
		MaxBulkLen:   cfg.Redis.ProtoMaxBulkLen,
		Logger:       logger.With("service", "embedded-redis"),
	})
	if err != nil {
		return nil, nil, err
	}
	// The password stays out of standard output (logs keep it): the
	// operator knows it from redis.password.
	fmt.Fprintf(stdout, "Embedded Redis listening; pipelines connect with REDIS_URL=%s\n", config.RedactURL(srv.URL()))
	fmt.Fprintf(stdout, "Data directory: %s\n", absPath(cfg.Redis.DataDir))
	logger.Info("embedded redis started", "addr", srv.Addr(), "data_dir", cfg.Redis.DataDir)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: cfg.Redis.Password})
	// Every write of ours is durable before its caller goes on, so what
	// the bot acknowledges survives a crash (pipelines' writes are synced
	// every second).
	rdb.AddHook(srv.SyncHook())
	return rdb, srv, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// checkConfig checks what a run would, short of its side effects, beyond
// what config.Load validates (the Redis URL as go-redis parses it, listen
// addresses resolved, the channels rule): the files (the ignore sets with
// every pattern compiled, the user agents, the IRC CA certificate, the
// pipeline API's certificate and key, the embedded Redis's data directory
// and snapshot); every listen address (the embedded Redis's, the web
// server's, the live stream's, the pipeline API's) bound, all at once as
// a run holds them, then released; the Redis of the configuration (or its
// sentinels) pinged with a short timeout. It logs the warnings a run logs
// (an embedded Redis reachable from other machines without a password).
// It reports every problem it finds, one error per line; a key for which
// invalid reports true failed config's checks already and is skipped.
// It returns the catalog's line (bot.Catalog.Describe); what the catalog
// refuses is logged as a warning, not a problem, since a run starts
// without it.
func checkConfig(ctx context.Context, cfg *config.Config, logger *slog.Logger, invalid func(key string) bool) (catalog string, _ error) {
	var errs []error
	// The directories, each on its own so that the error names its key;
	// then together, as a run loads them: what it refuses is a warning
	// (a run starts without it), and the line says which catalog is in
	// use.
	sets, agents := cfg.Jobs.IgnoreSetsDir, cfg.Jobs.UserAgentsDir
	quiet := slog.New(slog.DiscardHandler)
	if invalid("jobs.ignore_sets_dir") {
		sets = ""
	} else if _, err := bot.LoadCatalog(sets, "", quiet); err != nil {
		errs = append(errs, fmt.Errorf("jobs.ignore_sets_dir: %w", err))
		sets = ""
	}
	if invalid("jobs.user_agents_dir") {
		agents = ""
	} else if _, err := bot.LoadCatalog("", agents, quiet); err != nil {
		errs = append(errs, fmt.Errorf("jobs.user_agents_dir: %w", err))
		agents = ""
	}
	if cat, err := bot.LoadCatalog(sets, agents, logger.With("service", "catalog")); err == nil {
		catalog = cat.Describe()
	}
	if cfg.IRC.TLSCA != "" && !invalid("irc.tls_ca") {
		if _, err := os.ReadFile(cfg.IRC.TLSCA); err != nil {
			errs = append(errs, fmt.Errorf("irc.tls_ca: %w", err))
		}
	}
	if cfg.Pipelines.TLSCert != "" && cfg.Pipelines.TLSKey != "" && !invalid("pipelines.tls_cert") {
		if _, err := tls.LoadX509KeyPair(cfg.Pipelines.TLSCert, cfg.Pipelines.TLSKey); err != nil {
			errs = append(errs, fmt.Errorf("pipelines.tls_cert, pipelines.tls_key: %w", err))
		}
	}
	// Every listener a run opens, held together (two keys naming one
	// address are refused as in a run), then released.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	if cfg.Embedded() {
		ln, embErrs := checkEmbedded(cfg, logger, invalid)
		errs = append(errs, embErrs...)
		if ln != nil {
			held = append(held, ln)
		}
	}
	// The web listeners and the pipeline API's, as the run opens them
	// (same messages).
	for _, l := range []struct {
		key    string
		listen func(*config.Config, io.Writer) (net.Listener, error)
	}{{"http.listen", listenWeb}, {"http.stream_listen", listenStream}, {"pipelines.listen", listenPipelines}} {
		if invalid(l.key) {
			continue
		}
		ln, err := l.listen(cfg, io.Discard)
		if err != nil {
			errs = append(errs, err)
		} else if ln != nil {
			held = append(held, ln)
		}
	}
	if !cfg.Embedded() && !invalid("redis.url") && !invalid("redis.sentinels") && !invalid("redis.master_name") {
		if err := pingRedis(ctx, cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return catalog, errors.Join(errs...)
}

// checkEmbedded checks the embedded Redis's address (bound; the caller
// releases the listener) and data directory, and warns as embedded.Start
// does.
func checkEmbedded(cfg *config.Config, logger *slog.Logger, invalid func(string) bool) (net.Listener, []error) {
	var errs []error
	var held net.Listener
	if !invalid("redis.listen") {
		ln, err := net.Listen("tcp", cfg.Redis.Listen)
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			errs = append(errs, fmt.Errorf("redis.listen: %w: %s is taken, probably by a Redis server that is already running; "+
				"to use that Redis set redis.url (or the REDIS_URL environment variable) to its URL, "+
				"or set redis.listen to another address for the embedded one", embeddedredis.ErrAddrInUse, cfg.Redis.Listen))
		case err != nil:
			errs = append(errs, fmt.Errorf("redis.listen: %w", err))
		default:
			held = ln
			a, _ := ln.Addr().(*net.TCPAddr)
			if a != nil && !a.IP.IsLoopback() && cfg.Redis.Password == "" {
				logger.Warn("embedded redis: listening on a non-loopback address without a password; "+
					"anyone who can reach it can read and change the data (set redis.password)", "addr", a.String())
			}
		}
	}
	if dir := cfg.Redis.DataDir; dir != "" && !invalid("redis.data_dir") {
		if err := checkWritableDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("redis.data_dir: %w", err))
		}
		if who, held := embeddedredis.DataDirHolder(dir); held {
			errs = append(errs, fmt.Errorf("redis.data_dir: %w: %s is held by another process (%s): a second node on it "+
				"would overwrite the other's data; stop that node, or give this one its own redis.data_dir",
				embeddedredis.ErrDataDirInUse, dir, who))
		}
		snap := filepath.Join(dir, embeddedredis.SnapshotFile)
		if f, err := os.Open(snap); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("redis.data_dir: the snapshot cannot be read: %w", err))
		}
	}
	return held, errs
}

// checkWritableDir reports whether the run can write in dir: it exists as
// a writable directory, or the nearest existing parent is one (the run
// creates it). The test file is removed at once.
func checkWritableDir(dir string) error {
	d := dir
	for {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return err
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".archivebot-check-*")
	if err != nil {
		if d != dir {
			return fmt.Errorf("%s does not exist and cannot be created in %s: %w", dir, d, err)
		}
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkRedisTimeout bounds -check-config's ping of Redis.
const checkRedisTimeout = 2 * time.Second

// pingRedis reaches the Redis of cfg (the URL, or the master the
// sentinels name) once, with a short timeout.
func pingRedis(ctx context.Context, cfg *config.Config) error {
	var rdb *redis.Client
	where := "redis.url " + config.RedactURL(cfg.Redis.URL)
	if len(cfg.Redis.Sentinels) > 0 {
		fo := failoverOptions(cfg)
		fo.DialTimeout, fo.MaxRetries = checkRedisTimeout, -1
		rdb = redis.NewFailoverClient(fo)
		where = fmt.Sprintf("the master %q of redis.sentinels %s", cfg.Redis.MasterName, strings.Join(cfg.Redis.Sentinels, ", "))
	} else {
		opt, err := config.ParseRedisURL(cfg.Redis.URL)
		if err != nil {
			return fmt.Errorf("redis.url: %w", err)
		}
		opt.DialTimeout, opt.DialerRetries, opt.MaxRetries = checkRedisTimeout, 1, -1
		rdb = redis.NewClient(opt)
	}
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, checkRedisTimeout+time.Second)
	defer cancel()
	if err := store.New(rdb).Ping(pingCtx); err != nil {
		return fmt.Errorf("redis: %s does not answer: %w (a run would start, but every command would answer \"backend unavailable\" until it does)", where, err)
	}
	return nil
}

// adminStore connects the operator's commands to the Redis of cfg: the
// master the sentinels name, the configured URL, or the embedded Redis of
// a running node at redis.listen (never starting one). It fails, with what
// to do, when Redis does not answer. where names the Redis for messages.
func adminStore(ctx context.Context, cfg *config.Config) (st *store.Store, closeFn func(), where string, err error) {
	// Fail fast: an operator is waiting, and a write is never resent on
	// its own (the store's writes say so themselves).
	const dialTimeout = 2 * time.Second
	var rdb *redis.Client
	switch {
	case len(cfg.Redis.Sentinels) > 0:
		fo := failoverOptions(cfg)
		fo.DialTimeout, fo.MaxRetries = dialTimeout, -1
		fo.ClientName = cliClientName
		rdb = redis.NewFailoverClient(fo)
		where = "the master " + cfg.Redis.MasterName + " of the sentinels (redis.sentinels)"
	default:
		var opt *redis.Options
		if cfg.Embedded() {
			host, port, _ := net.SplitHostPort(cfg.Redis.Listen)
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			opt = &redis.Options{Addr: net.JoinHostPort(host, port), Password: cfg.Redis.Password}
			where = "the embedded Redis of a running node at " + opt.Addr + " (redis.listen)"
		} else {
			if opt, err = config.ParseRedisURL(cfg.Redis.URL); err != nil {
				return nil, nil, "", fmt.Errorf("redis.url: %w", err)
			}
			where = config.RedactURL(cfg.Redis.URL)
		}
		opt.DialTimeout, opt.DialerRetries, opt.MaxRetries = dialTimeout, 1, -1
		opt.ClientName = cliClientName
		rdb = redis.NewClient(opt)
	}
	// The operator's writes wait for replicas as the bot's do.
	st = store.New(rdb, store.WithWait(cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout.Duration))
	pingCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := st.Ping(pingCtx); err != nil {
		rdb.Close()
		return nil, nil, where, fmt.Errorf("cannot reach Redis (%s): %w; nothing was done. "+
			"Start the node, or name the Redis the pipelines use with REDIS_URL, or the node's configuration file with -config FILE or ARCHIVEBOT_CONFIG", where, err)
	}
	return st, func() { rdb.Close() }, where, nil
}

// failoverOptions is the go-redis Sentinel client configuration: the
// sentinels find the master; the master's password and DB are
// redis.master_password and redis.db.
func failoverOptions(cfg *config.Config) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:       cfg.Redis.MasterName,
		SentinelAddrs:    cfg.Redis.Sentinels,
		SentinelPassword: cfg.Redis.SentinelPassword,
		Password:         cfg.Redis.MasterPassword,
		DB:               cfg.Redis.DB,
	}
}

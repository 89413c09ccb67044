// Package embeddedredis runs the Redis server the ArchiveBot control node starts
// when no Redis URL is configured (doc/architecture.md).
//
// The server is miniredis listening on a TCP address (default
// 127.0.0.1:6379), so pipelines on this or other machines reach it like any
// Redis, including their Lua scripts (EVAL/EVALSHA). On top of miniredis this
// package adds what a long-running server needs and miniredis, being a test
// server, leaves out:
//
//   - Real-time expiry. miniredis only counts TTLs down when told to; a
//     ticker advances them by the elapsed monotonic time and removes the keys
//     that expired, so completed jobs release their URLs.
//   - Persistence. The data set is written to DataDir/redis.json periodically
//     and on Close (temp file, fsync, rename, fsync of the directory) and
//     restored by Start, with TTLs stored as absolute expiry times so that
//     time spent down counts. Between snapshots every write is appended to
//     a log (aof.go), fsynced every second and on Sync, and replayed by
//     Start: with SyncHook on its client, the control node acknowledges
//     only what is on disk.
//   - A password (Redis AUTH) for pipelines that connect over the network.
//   - A clear error when the listen address is taken, which usually means a
//     Redis already runs there.
//
// The snapshot is JSON (format described in snapshot.go) and stores strings,
// hashes, lists, sets and sorted sets of databases 0-15, with key TTLs.
// Not persisted: streams and HyperLogLogs (skipped, with a warning), TTLs of
// single hash fields (HEXPIRE; the fields are kept without them), databases
// above 15, and, as with Redis itself, the script cache (clients reload
// scripts on NOSCRIPT) and Pub/Sub subscriptions.
package embeddedredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/run"
)

// DefaultAddr is the address the embedded server listens on when
// Options.Addr is empty: the standard Redis port, on loopback only.
const DefaultAddr = config.DefaultRedisListen

// DefaultSaveInterval is how often the data set is written to disk when
// Options.SaveInterval is zero.
const DefaultSaveInterval = config.DefaultRedisSaveInterval

// SnapshotFile is the name of the snapshot file inside Options.DataDir.
const SnapshotFile = "redis.json"

// expiryTick is the shortest interval between two TTL advances; it is also
// the precision with which keys expire (see Server).
const expiryTick = 100 * time.Millisecond

// expiryMaxLoad bounds the share of time the expiry ticker may spend holding
// the miniredis lock: when advancing the TTLs takes d, the next tick comes
// no sooner than d*expiryMaxLoad later. miniredis's FastForward visits every
// key, so with very many keys ticks become less frequent rather than
// starving clients.
const expiryMaxLoad = 10

// DefaultMaxBulkLen is the longest argument a client may send, and the
// longest string a command may build, when Options.MaxBulkLen is zero
// (Redis's proto-max-bulk-len; Redis's own default is 512 MiB, far more
// than ArchiveBot's pipelines write).
const DefaultMaxBulkLen = config.DefaultRedisProtoMaxBulkLen

// Limits on what a client can make the server read and allocate (see
// Options.MaxBulkLen). Before AUTH, when a password is set, the limits are
// Redis's own for clients that have not authenticated: commands of at most
// 10 arguments of at most 16 KiB.
const (
	maxLine        = 64 << 10 // a "*N" or "$N" line (Redis's inline limit)
	maxArgs        = 1 << 20  // arguments of one command
	preAuthMaxBulk = 16 << 10
	preAuthMaxArgs = 10
)

// ErrAddrInUse is returned (wrapped) by Start when the listen address is
// already taken, which usually means a Redis server already runs there. The
// wrapping error says how to proceed: set redis.url (REDIS_URL) to use that
// Redis, or redis.listen to pick another address for the embedded one.
var ErrAddrInUse = errors.New("embedded redis: listen address is already in use")

// ErrClosed is returned by Save after Close.
var ErrClosed = errors.New("embedded redis: server closed")

// Options configure the embedded Redis server. The zero value is usable: it
// listens on DefaultAddr without a password and without persistence.
type Options struct {
	// Addr is the TCP listen address, "host:port". Empty means DefaultAddr
	// (loopback only). Use e.g. "0.0.0.0:6379" to let pipelines on other
	// machines connect, preferably with a Password. Port 0 picks a free
	// port (see Server.Addr).
	Addr string
	// DataDir is the directory of the snapshot file (DataDir/redis.json).
	// It is created if missing. Empty means no persistence: the data is
	// lost when the process ends.
	DataDir string
	// Password, when not empty, is required from clients through AUTH
	// (Redis requirepass).
	Password string
	// SaveInterval is the time between two periodic snapshots. Zero means
	// DefaultSaveInterval.
	SaveInterval time.Duration
	// Logger receives the server's log. Nil means slog.Default().
	Logger *slog.Logger
	// MaxBulkLen bounds each argument of a command, in bytes, and the
	// strings that commands build (SETRANGE, SETBIT, APPEND), as Redis's
	// proto-max-bulk-len; one command's arguments together may have twice
	// as many bytes. A request over it gets "ERR Protocol error" and its
	// connection is closed; a command over it gets an error. Zero means
	// DefaultMaxBulkLen.
	MaxBulkLen int

	syncInterval time.Duration // tests: the log's background fsync interval
}

// Server is a running embedded Redis server. Keys with a TTL expire in real
// time, with a precision of about 100 ms (a key may go up to one tick early
// or late; the tick slows down with very large data sets). Its methods are
// safe for concurrent use.
type Server struct {
	m         *miniredis.Miniredis
	srv       *server.Server // m's network server, set once by Start
	log       *slog.Logger
	addr      string // actual listen address, host:port
	password  string
	path      string // snapshot file, "" = no persistence
	dataDir   string
	lock      *os.File // holds DataDir's lock (datalock.go) until Close
	interval  time.Duration
	syncEvery time.Duration // background fsync of the log

	// The write-ahead log (aof.go); nil without a DataDir.
	aof            *aofLog
	tornSegs       []int64    // segments with a torn tail: renamed, not deleted (set before any save runs)
	orderMu        sync.Mutex // held while a logged write runs and is appended, and while a snapshot is captured
	connMu         sync.Mutex
	conns          map[*server.Peer]*connState // client connections seen by the hook
	internal       sync.Map                    // *server.Peer of our own: not logged
	scriptMu       sync.Mutex
	scripts        map[string]string // SHA1 -> body of scripts seen
	loading        atomic.Bool       // replaying the log: clients get LOADING
	replayMs       atomic.Int64      // time of the record being replayed, 0 outside a replay
	warnedBlocking atomic.Bool
	warnedSync     atomic.Bool
	panics         atomic.Int64 // commands that panicked (their connection was closed)

	stop chan struct{}
	// ctx ends when stop is closed: the loops run under run.Every.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	saveMu      sync.Mutex // serialises snapshots; guards closed and warnedSkips
	closed      bool
	warnedSkips bool
}

// Start restores the snapshot from opts.DataDir (if there is one), starts
// listening on opts.Addr and starts the expiry ticker and the periodic
// saver. A missing snapshot file means an empty data set; an unreadable or
// corrupt one is an error naming the file, so that data is never silently
// dropped. When the address is taken the error wraps ErrAddrInUse.
func Start(opts Options) (*Server, error) {
	started := false // the data directory's lock is let go unless Start succeeds
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.SaveInterval <= 0 {
		opts.SaveInterval = DefaultSaveInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		m:         miniredis.NewMiniRedis(),
		log:       opts.Logger,
		password:  opts.Password,
		interval:  opts.SaveInterval,
		syncEvery: cmp.Or(opts.syncInterval, aofSyncInterval),
		stop:      make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	// Restore before listening, so that no client ever sees an empty
	// data set that is about to be replaced.
	restoredAt := time.Now()
	var snapGen int64
	if opts.DataDir != "" {
		s.dataDir = opts.DataDir
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("embedded redis: data directory: %w", err)
		}
		lock, err := lockDataDir(opts.DataDir)
		if err != nil {
			return nil, err
		}
		s.lock = lock
		defer func() {
			if !started {
				lock.Close()
			}
		}()
		s.path = filepath.Join(opts.DataDir, SnapshotFile)
		removeStaleTemps(s.path, s.log)
		snap, err := readSnapshotFile(s.path)
		if err != nil {
			return nil, err
		}
		if snap != nil {
			snapGen = snap.AOFGen
			restoredAt = time.Now()
			st, err := restoreSnapshot(s.m, snap, restoredAt)
			if err != nil {
				return nil, fmt.Errorf("embedded redis: snapshot %s: %w", s.path, err)
			}
			s.log.Info("embedded redis: restored snapshot", "file", s.path,
				"saved_at", time.UnixMilli(snap.SavedAtMs).UTC().Format(time.RFC3339),
				"keys", st.keys, "expired_while_down", st.expired)
		} else {
			s.log.Info("embedded redis: no snapshot yet, starting empty", "file", s.path)
		}
	}

	if opts.Password != "" {
		s.m.RequireAuth(opts.Password)
	}
	s.m.SetLimits(limits(opts))
	if s.path != "" {
		// Clients that connect before the log is replayed are told to
		// wait (see below).
		s.m.SetError(msgLoading)
	}
	if err := s.m.StartAddr(opts.Addr); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%w: %s is taken, probably by a Redis server that is already running; "+
				"to use that Redis set redis.url (or the REDIS_URL environment variable) to its URL, "+
				"or set redis.listen to another address for the embedded one: %w", ErrAddrInUse, opts.Addr, err)
		}
		return nil, fmt.Errorf("embedded redis: listen on %s: %w", opts.Addr, err)
	}
	s.srv = s.m.Server()
	s.srv.SetPanicHandler(s.commandPanicked)
	a := s.srv.Addr()
	s.addr = net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
	if s.path != "" {
		if err := s.openLog(snapGen); err != nil {
			s.m.Close()
			return nil, err
		}
	}

	if !a.IP.IsLoopback() && opts.Password == "" {
		s.log.Warn("embedded redis: listening on a non-loopback address without a password; "+
			"anyone who can reach it can read and change the data (set redis.password)", "addr", s.addr)
	}

	run.Go(&s.wg, s.log, "embedded redis: expiry loop", func() { s.expiryLoop(restoredAt) })
	if s.path != "" {
		run.Go(&s.wg, s.log, "embedded redis: save loop", s.saveLoop)
		run.Go(&s.wg, s.log, "embedded redis: sync loop", s.syncLoop)
	}
	s.log.Info("embedded redis: listening", "addr", s.addr,
		"password", opts.Password != "", "snapshot", s.path)
	started = true
	return s, nil
}

// limits are the bounds of the requests the server reads (see
// Options.MaxBulkLen and the constants above).
func limits(opts Options) server.Limits {
	bulk := cmp.Or(opts.MaxBulkLen, DefaultMaxBulkLen)
	l := server.Limits{MaxLine: maxLine, MaxBulk: bulk, MaxArgs: maxArgs, MaxRequest: 2 * bulk}
	if opts.Password != "" {
		l.PreAuthMaxBulk, l.PreAuthMaxArgs = preAuthMaxBulk, preAuthMaxArgs
	}
	return l
}

// commandPanicked is called when a client's command panics inside
// miniredis: that client got an error and its connection is closed; the
// server and the other clients go on.
func (s *Server) commandPanicked(cmd string, v any, stack []byte) {
	n := s.panics.Add(1)
	s.log.Error("embedded redis: a command failed with an internal error; its connection was closed, the server goes on",
		"command", cmd, "panic", fmt.Sprint(v), "count", n, "stack", string(stack))
}

// Panics returns how many client commands have failed with an internal
// error (a panic in miniredis) since Start; each closed only its own
// connection.
func (s *Server) Panics() int64 { return s.panics.Load() }

// Addr returns the address the server listens on, as host:port, with the
// real port when Options.Addr asked for port 0.
func (s *Server) Addr() string { return s.addr }

// URL returns the Redis URL pipelines should use, redis://[:password@]host:port/0.
// When the server listens on all interfaces (0.0.0.0 or ::) the host is this
// machine's host name, which is what a pipeline elsewhere needs; if that is
// unknown it is 127.0.0.1.
func (s *Server) URL() string {
	host, port, _ := net.SplitHostPort(s.addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	u := url.URL{Scheme: "redis", Host: net.JoinHostPort(host, port), Path: "/0"}
	if s.password != "" {
		u.User = url.UserPassword("", s.password)
	}
	return u.String()
}

// Miniredis returns the underlying miniredis instance, for tests (e.g.
// FastForward). Changes made through its direct API bypass the log: they
// are persisted by the next snapshot.
func (s *Server) Miniredis() *miniredis.Miniredis { return s.m }

// Save writes a snapshot of the whole data set now, atomically: the previous
// snapshot stays intact until the new one is complete and synced. The
// snapshot is a consistent point-in-time view: it is read while no command
// runs. Save does nothing without a DataDir and returns ErrClosed after
// Close.
func (s *Server) Save() error {
	if s.path == "" {
		return nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.saveLocked(true)
}

// Close stops accepting clients, disconnects the connected ones, writes a
// final snapshot and stops the server. It returns the error of that final
// snapshot, if any. Calling it more than once returns the same result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.cancel()
		s.wg.Wait() // the expiry ticker has brought TTLs up to date
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		// miniredis waits for the connections' goroutines, so after this
		// no command runs and the data can be read directly.
		s.m.Close()
		s.closed = true
		if s.path != "" {
			s.closeErr = s.saveLocked(false)
			if err := s.aof.close(); err != nil && s.closeErr == nil {
				s.closeErr = fmt.Errorf("embedded redis: log: %w", err)
			}
		}
		if s.lock != nil {
			s.lock.Close() // after the last write: the next process may start
		}
		s.log.Info("embedded redis: stopped", "addr", s.addr)
	})
	return s.closeErr
}

// saveLocked captures and writes a snapshot; s.saveMu must be held. live
// says whether the server still serves clients (see capture).
func (s *Server) saveLocked(live bool) error {
	start := time.Now()
	// The snapshot holds every write of the log segments before gen.
	// While live, the next segment is started and the data captured with
	// no logged write running in between; after Close nothing runs.
	var gen int64
	if s.aof != nil {
		if live {
			s.orderMu.Lock()
			g, err := s.aof.rotate()
			if err != nil {
				s.orderMu.Unlock()
				return fmt.Errorf("embedded redis: start a log segment: %w", err)
			}
			gen = g
		} else {
			if err := s.aof.flush(); err != nil {
				// The snapshot about to be written holds the same data.
				s.log.Warn("embedded redis: flushing the log before the last snapshot failed", "err", err)
			}
			gen = s.aof.gen + 1
		}
	}
	snap, skipped, err := s.capture(live)
	if live && s.aof != nil {
		s.orderMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("embedded redis: snapshot: %w", err)
	}
	snap.AOFGen = gen
	if len(skipped) > 0 {
		level := slog.LevelDebug
		if !s.warnedSkips {
			level = slog.LevelWarn
			s.warnedSkips = true
		}
		s.log.Log(context.Background(), level, "embedded redis: keys of types the snapshot does not store (streams, HyperLogLogs) are not persisted",
			"count", len(skipped), "examples", firstN(skipped, 5))
	}
	captured := time.Since(start)
	n, err := writeSnapshotFile(s.path, snap)
	if err != nil {
		return fmt.Errorf("embedded redis: write snapshot %s: %w", s.path, err)
	}
	if s.aof != nil {
		s.removeSegmentsBefore(gen)
	}
	s.log.Debug("embedded redis: saved snapshot", "file", s.path, "keys", snap.keyCount(),
		"bytes", n, "capture", captured, "total", time.Since(start))
	return nil
}

// expiryLoop makes TTLs run in real time: miniredis only counts them down on
// FastForward, which also removes the keys that expired. The elapsed time
// comes from the monotonic clock, so wall-clock jumps don't expire keys
// early or keep them. The wall clock itself is left alone (no SetTime):
// miniredis then uses time.Now() for TIME, EXPIREAT and the like.
func (s *Server) expiryLoop(last time.Time) {
	advance := func() {
		now := time.Now()
		elapsed := now.Sub(last)
		last = now
		if elapsed > 0 {
			s.safely("expiry tick", func() { s.m.FastForward(elapsed) })
		}
	}
	timer := time.NewTimer(expiryTick)
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			advance() // up to date for the final snapshot
			return
		case <-timer.C:
		}
		t0 := time.Now()
		advance()
		timer.Reset(max(expiryTick, time.Since(t0)*expiryMaxLoad))
	}
}

// saveLoop writes a snapshot every s.interval.
func (s *Server) saveLoop() {
	s.every(s.interval, "periodic save", func() {
		if err := s.Save(); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Error("embedded redis: periodic save failed", "err", err)
		}
	})
}

// every runs fn (guarded, named what) every d until the server stops:
// run.Every, the node's one schedule.
func (s *Server) every(d time.Duration, what string, fn func()) {
	run.Every(s.ctx, s.log, "embedded redis: "+what, run.Schedule{Interval: d}, func(context.Context) { fn() })
}

// safely runs f, logging instead of crashing if it panics, so that a
// background loop keeps going.
func (s *Server) safely(what string, f func()) {
	run.Guard(s.log, "embedded redis: "+what, f)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// openLog replays the log segments the snapshot (whose aof_gen is snapGen)
// does not hold, opens a new segment and installs the hook that logs
// writes. Clients get LOADING until it returns. If it replayed anything it
// writes a snapshot, after which a segment with a torn tail is renamed
// (kept) rather than deleted. A segment damaged before its tail is an
// error wrapping ErrLogDamaged, and nothing is deleted.
func (s *Server) openLog(snapGen int64) error {
	s.conns = map[*server.Peer]*connState{}
	s.scripts = map[string]string{}
	s.loading.Store(true)
	s.srv.SetPreHook(s.hook)
	gens, err := segments(s.dataDir)
	if err != nil {
		return fmt.Errorf("embedded redis: data directory: %w", err)
	}
	s.removeSegmentsBefore(snapGen)
	gens = slices.DeleteFunc(gens, func(g int64) bool { return g < snapGen })
	st, err := s.replay(gens)
	if err != nil {
		return err
	}
	next := max(snapGen, 1)
	if len(gens) > 0 {
		next = gens[len(gens)-1] + 1
	}
	f, err := openSegment(s.dataDir, next)
	if err != nil {
		return fmt.Errorf("embedded redis: log: %w", err)
	}
	s.aof = &aofLog{dir: s.dataDir, f: f, gen: next}
	s.tornSegs = st.torn
	if st.records > 0 || st.tornBytes > 0 {
		s.log.Info("embedded redis: replayed the log", "segments", st.segments, "records", st.records,
			"ignored_bytes", st.tornBytes)
		s.saveMu.Lock()
		err := s.saveLocked(true)
		s.saveMu.Unlock()
		if err != nil {
			s.log.Error("embedded redis: snapshot after replaying the log failed; the log is kept", "err", err)
		}
	}
	s.loading.Store(false)
	return nil
}

// Package redistest gives tests the Redis backends they must pass on:
// miniredis always (fast), and a real redis-server when the environment
// variable ARCHIVEBOT_TEST_REDIS holds its URL (CI always sets it).
//
// `go test ./...` runs packages in parallel against the one real server,
// and a package's tests may run in parallel too: each test gets a database
// index of its own (RealRedis), from a pool its test process leases
// through keys in DB 0 (up to 8 indexes a process; a redis-server started
// with --databases 64, as .ci/run does, leaves room for all). A database
// is flushed when a test takes it and when it gives it back. Pub/sub
// ignores the database index: tests that count messages must use idents
// of their own.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the environment variable holding the real server's URL.
const EnvURL = "ARCHIVEBOT_TEST_REDIS"

// Off, as EnvURL's value, runs the tests on miniredis alone, on purpose,
// even under CI: .ci/run's race run, after a run that proved every test
// against the real server (Each skips the real halves, saying why).
const Off = "off"

// Backend is one Redis a test runs against.
type Backend struct {
	Name   string // "miniredis" or "redis"
	Client *redis.Client
	// Mini is the miniredis instance; nil on a real server.
	Mini *miniredis.Miniredis
	// URL connects a second client to the same database.
	URL string
}

// Real reports whether this backend is a real redis-server.
func (b *Backend) Real() bool { return b.Mini == nil }

// FastForward advances TTLs by d: miniredis's clock, or a real sleep.
func (b *Backend) FastForward(d time.Duration) {
	if b.Mini != nil {
		b.Mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

// Mini starts a fresh miniredis backend, closed at the end of the test.
func Mini(t testing.TB) *Backend {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return &Backend{Name: "miniredis", Client: c, Mini: m, URL: "redis://" + m.Addr() + "/0"}
}

// The pool of databases this test process leased on the real server.
// Every test that asks for the real server gets a database of its own
// for as long as it runs, so tests on the real server can run in
// parallel (t.Parallel) without flushing each other's data.
var pool struct {
	mu   sync.Mutex
	cond *sync.Cond
	init bool
	err  error
	opt  *redis.Options
	// lessee holds this process's leases in DB 0 and renews them.
	lessee *redis.Client
	me     string
	// dbs is how many databases the server has (CONFIG GET databases).
	dbs int
	// leased are the indexes this process holds; free those no test
	// holds now (flushed when released).
	leased, free []int
	// next is where the next claim starts looking.
	next int64
}

// leaseTTL is how long a lease outlives a process that stopped renewing
// it.
const leaseTTL = 15 * time.Second

// perProcess is how many databases one test process holds at most:
// `go test ./...` runs several packages at once against one server, and
// each of them must find some free.
func perProcess(dbs int) int { return max(1, min(8, (dbs-1)/4)) }

// initPool connects the lessee, reads the server's database count and
// starts renewing this process's leases. Called with pool.mu held.
func initPool(opt *redis.Options) error {
	o := *opt
	o.DB = 0
	c := redis.NewClient(&o)
	ctx := context.Background()
	next, err := c.Incr(ctx, "archivebot:test:dbcounter").Result()
	if err != nil {
		c.Close()
		return err
	}
	pool.dbs = 16
	if v, err := c.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(v["databases"]); err == nil && n > 1 {
			pool.dbs = n
		}
	}
	pool.opt, pool.lessee, pool.next = opt, c, next
	pool.me = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	pool.cond = sync.NewCond(&pool.mu)
	go func() {
		for range time.Tick(leaseTTL / 3) {
			pool.mu.Lock()
			held := slices.Clone(pool.leased)
			pool.mu.Unlock()
			for _, n := range held {
				c.Expire(ctx, leaseKey(n), leaseTTL)
			}
		}
	}()
	return nil
}

func leaseKey(n int) string { return fmt.Sprintf("archivebot:test:db:%d", n) }

// claimDB leases one more database index (1 to the server's count − 1)
// for this test process: SET NX on archivebot:test:db:N in DB 0, with a
// short expiry renewed while the process lives. It returns 0 when every
// index is held. A counter taken modulo the count alone gave a
// long-running package's index to a later package, and their FLUSHDBs
// emptied each other's data; the counter still says where to start
// looking, so an index is reused as late as possible (a previous
// holder's child processes may still be shutting down). Called with
// pool.mu held.
func claimDB() (int, error) {
	ctx := context.Background()
	span := int64(pool.dbs - 1)
	for i := int64(0); i < span; i++ {
		n := 1 + int((pool.next+i)%span)
		if slices.Contains(pool.leased, n) {
			continue
		}
		ok, err := pool.lessee.SetNX(ctx, leaseKey(n), pool.me, leaseTTL).Result()
		if err != nil {
			return 0, err
		}
		if ok {
			pool.next += i + 1
			return n, nil
		}
	}
	return 0, nil
}

// acquireDB returns a database of this test's own: a free one of this
// process's, or a newly leased one, or, when the process holds its share
// (perProcess), the next one another test of this process releases.
func acquireDB(t testing.TB, opt *redis.Options) int {
	t.Helper()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if !pool.init {
		pool.init, pool.err = true, initPool(opt)
	}
	if pool.err != nil {
		t.Fatalf("real redis at %s: %v", opt.Addr, pool.err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if k := len(pool.free); k > 0 {
			n := pool.free[k-1]
			pool.free = pool.free[:k-1]
			return n
		}
		if len(pool.leased) < perProcess(pool.dbs) {
			n, err := claimDB()
			if err != nil {
				t.Fatalf("real redis at %s: lease a database: %v", opt.Addr, err)
			}
			if n > 0 {
				pool.leased = append(pool.leased, n)
				return n
			}
		}
		if len(pool.leased) > 0 {
			// Another test of this process releases one.
			pool.cond.Wait()
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("real redis at %s: no free test database among 1–%d for 2 minutes", opt.Addr, pool.dbs-1)
		}
		pool.mu.Unlock()
		time.Sleep(500 * time.Millisecond)
		pool.mu.Lock()
	}
}

// releaseDB flushes database n and gives it back to the pool.
func releaseDB(c *redis.Client, n int) error {
	err := c.FlushDB(context.Background()).Err()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if err != nil {
		// Not known empty: leave it out of the pool (the lease stays
		// held, so no other process takes it either).
		pool.cond.Broadcast()
		return err
	}
	pool.free = append(pool.free, n)
	pool.cond.Broadcast()
	return nil
}

// RealRedis returns the real server backend with a flushed database of
// this test's own (until the test and its cleanups end), or nil when
// EnvURL is not set. Two tests that run at once get different databases;
// pub/sub ignores the database index, so they hear each other's
// messages (see the package comment).
func RealRedis(t testing.TB) *Backend {
	t.Helper()
	raw := os.Getenv(EnvURL)
	if raw == "" || raw == Off {
		return nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvURL, raw, err)
	}
	n := acquireDB(t, opt)
	o := *opt
	o.DB = n
	c := redis.NewClient(&o)
	// Registered first, so it runs last: after the test's own cleanups
	// stopped what it started on this database.
	t.Cleanup(func() {
		if err := releaseDB(c, n); err != nil {
			t.Errorf("flush real redis db %d on release: %v", n, err)
		}
		c.Close()
	})
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("flush real redis db %d: %v", n, err)
	}
	url := fmt.Sprintf("redis://%s/%d", o.Addr, n)
	if o.Password != "" {
		url = fmt.Sprintf("redis://:%s@%s/%d", o.Password, o.Addr, n)
	}
	return &Backend{Name: "redis", Client: c, URL: url}
}

// RealOrMini is RealRedis when it is configured, else Mini: for tests
// too slow to run on both.
func RealOrMini(t testing.TB) *Backend {
	t.Helper()
	if b := RealRedis(t); b != nil {
		return b
	}
	return Mini(t)
}

// Each runs fn as a subtest on miniredis and, when configured, on the real
// server. Under CI (the CI variable set, as .ci/run does) the real
// server's subtest fails without EnvURL instead of skipping: CI must not
// pass with half its tests unrun.
func Each(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	each(t, false, fn)
}

// EachParallel is Each with the two halves run as parallel subtests
// (t.Parallel): fn must not use t.Setenv or anything else of the whole
// process. Each half has a Redis of its own (miniredis, or a database of
// the real server's of its own, taken once the half runs, not while it
// waits for its turn).
func EachParallel(t *testing.T, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	each(t, true, fn)
}

func each(t *testing.T, parallel bool, fn func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		if parallel {
			t.Parallel()
		}
		fn(t, Mini(t))
	})
	t.Run("redis", func(t *testing.T) {
		if parallel {
			t.Parallel()
		}
		b := RealRedis(t)
		if b == nil {
			if os.Getenv(EnvURL) == Off {
				t.Skipf("%s=%s: the real-Redis halves are left to another run", EnvURL, Off)
			}
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not set, and CI is set: the real-Redis half of this test cannot run (.ci/run starts a redis-server and sets it)", EnvURL)
			}
			t.Skipf("%s not set: no real redis-server", EnvURL)
		}
		fn(t, b)
	})
}

// All is the backends a benchmark runs on: a fresh miniredis, and the real
// server (its flushed database) when EnvURL is set.
func All(tb testing.TB) []*Backend {
	tb.Helper()
	out := []*Backend{Mini(tb)}
	if r := RealRedis(tb); r != nil {
		out = append(out, r)
	}
	return out
}

// Silent returns the address of a server that accepts connections and
// reads everything, answering nothing: every command sent to it has an
// unknown outcome. It stops when the test ends.
func Silent(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// Dump returns the whole database as the reference transcripts record it:
// key → {type, value, ttl}, where ttl is "set" for keys with an expiry and
// -1 otherwise. Volatile fields are left in; callers drop them.
func Dump(ctx context.Context, c *redis.Client) (map[string]Entry, error) {
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]Entry, len(keys))
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		e := Entry{Type: typ}
		switch typ {
		case "string":
			e.Value, err = c.Get(ctx, k).Result()
		case "hash":
			e.Value, err = c.HGetAll(ctx, k).Result()
		case "list":
			e.Value, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			slices.Sort(m)
			e.Value = m
		case "zset":
			e.Value, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		}
		if errors.Is(err, redis.Nil) {
			// Listed by KEYS, expired or deleted before it was read
			// (a live system's dump): recorded as gone ("none", as
			// TYPE says of a missing key), not an error that loses the
			// whole dump.
			out[k] = Entry{Type: "none", TTL: -1}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dump %s: %w", k, err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		if ttl == -2 || empty(e.Value) {
			// Gone before its value was read (Redis holds no empty
			// hash, list, set or sorted set: an empty one is a key
			// read after it went) or before its TTL was.
			out[k] = Entry{Type: "none", TTL: -1}
			continue
		}
		if ttl >= 0 {
			e.TTL = "set"
		} else {
			e.TTL = -1
		}
		out[k] = e
	}
	return out, nil
}

// empty reports whether a collection's value as read is empty.
func empty(v any) bool {
	switch v := v.(type) {
	case map[string]string:
		return len(v) == 0
	case []string:
		return len(v) == 0
	case []redis.Z:
		return len(v) == 0
	}
	return false
}

// Dump is Dump of the backend's database; an error fails the test.
func (b *Backend) Dump(t testing.TB) map[string]Entry {
	t.Helper()
	d, err := Dump(context.Background(), b.Client)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Entry is one key of a Dump.
type Entry struct {
	Type  string `json:"type"`
	Value any    `json:"value"`
	TTL   any    `json:"ttl"`
}

// snapshotScript reads every key, its type, value and TTL in one atomic
// step.
var snapshotScript = redis.NewScript(`
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t.ok end
  local v = {}
  if t == 'string' then v = {redis.call('GET', k)}
  elseif t == 'hash' then v = redis.call('HGETALL', k)
  elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1)
  elseif t == 'set' then v = redis.call('SMEMBERS', k)
  elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  end
  out[#out + 1] = {k, t, redis.call('PTTL', k), v}
end
return out
`)

// Snapshot is Dump read in one atomic step (a Lua script): every key as
// it was at one moment. Dump reads key by key; on a system that keeps
// running it records each key at a different moment, and a job's hash
// read before a pipeline took the job beside a queue read after it is a
// state the job never was in (the chaos soak's "stranded" jobs). It
// blocks the server while it runs: for test deployments, not production.
func Snapshot(ctx context.Context, c redis.Scripter) (map[string]Entry, error) {
	res, err := snapshotScript.Run(ctx, c, nil).Slice()
	if err != nil {
		return nil, err
	}
	out := make(map[string]Entry, len(res))
	for _, r := range res {
		f, ok := r.([]any)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("snapshot: unexpected entry %v", r)
		}
		k, _ := f[0].(string)
		typ, _ := f[1].(string)
		ttl, _ := f[2].(int64)
		vals, _ := f[3].([]any)
		strs := make([]string, len(vals))
		for i, v := range vals {
			strs[i], _ = v.(string)
		}
		e := Entry{Type: typ, TTL: -1}
		if ttl >= 0 {
			e.TTL = "set"
		}
		switch typ {
		case "string":
			if len(strs) == 1 {
				e.Value = strs[0]
			}
		case "hash":
			m := make(map[string]string, len(strs)/2)
			for i := 0; i+1 < len(strs); i += 2 {
				m[strs[i]] = strs[i+1]
			}
			e.Value = m
		case "list":
			e.Value = strs
		case "set":
			slices.Sort(strs)
			e.Value = strs
		case "zset":
			z := make([]redis.Z, 0, len(strs)/2)
			for i := 0; i+1 < len(strs); i += 2 {
				sc, err := strconv.ParseFloat(strs[i+1], 64)
				if err != nil {
					return nil, fmt.Errorf("snapshot: %s: score %q: %w", k, strs[i+1], err)
				}
				z = append(z, redis.Z{Member: strs[i], Score: sc})
			}
			e.Value = z
		}
		out[k] = e
	}
	return out, nil
}

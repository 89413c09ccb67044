package embeddedredis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// start starts a server on a free loopback port; it is closed at the end of
// the test (a second Close is harmless).
func start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func client(t testing.TB, s *Server, password string, db int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: password, DB: db})
	t.Cleanup(func() { c.Close() })
	return c
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

var ctx = context.Background()

// scores whose precision and special values must survive a round trip.
var trickyScores = []float64{0.1, 0.1 + 0.2, 1.0 / 3, 1e-300, 5e-324, math.MaxFloat64,
	-123456789.123456789, 1700000000.123456, math.Inf(1), math.Inf(-1), 0, 42}

// fill writes one key of every type (DB 0 and DB 3), some with TTLs and
// binary data, through c0 (DB 0) and c3 (DB 3).
func fill(t *testing.T, c0, c3 *redis.Client) {
	t.Helper()
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ok(c0.Set(ctx, "str", "hello", 0).Err())
	ok(c0.Set(ctx, "empty", "", 0).Err())
	ok(c0.Set(ctx, "ttl100", "x", 100*time.Second).Err())
	ok(c0.Set(ctx, "bin\xff\x00key", "v\x00\xfe\xff", 0).Err())
	ok(c0.Set(ctx, "unicode ☃ <&>", "snow ☃ \u2028", 0).Err())
	ok(c0.Set(ctx, "line\r\nbreak", "a\r\nb\n", 0).Err())
	ok(c0.HSet(ctx, "job:abc", "url", "http://example.com/", "bytes", "123", "bin\xff", "\xfe").Err())
	ok(c0.Expire(ctx, "job:abc", time.Hour).Err())
	ok(c0.RPush(ctx, "list", "a", "b", "a", "").Err())
	ok(c0.SAdd(ctx, "set", "x", "y", "z").Err())
	for i, f := range trickyScores {
		ok(c0.ZAdd(ctx, "zset", redis.Z{Score: f, Member: fmt.Sprintf("m%d", i)}).Err())
	}
	ok(c0.XAdd(ctx, &redis.XAddArgs{Stream: "stream", Values: []string{"a", "b"}}).Err())
	ok(c3.Set(ctx, "in-db3", "three", 0).Err())
	ok(c3.LPush(ctx, "list3", "q").Err())
}

// check verifies what fill wrote (except the stream, which is not persisted).
func check(t *testing.T, c0, c3 *redis.Client) {
	t.Helper()
	eq := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	eq("str", c0.Get(ctx, "str").Val(), "hello")
	eq("empty exists", c0.Exists(ctx, "empty").Val(), int64(1))
	eq("empty", c0.Get(ctx, "empty").Val(), "")
	eq("bin", c0.Get(ctx, "bin\xff\x00key").Val(), "v\x00\xfe\xff")
	eq("unicode", c0.Get(ctx, "unicode ☃ <&>").Val(), "snow ☃ \u2028")
	eq("newlines", c0.Get(ctx, "line\r\nbreak").Val(), "a\r\nb\n")
	eq("hash", c0.HGetAll(ctx, "job:abc").Val(), map[string]string{"url": "http://example.com/", "bytes": "123", "bin\xff": "\xfe"})
	eq("list", c0.LRange(ctx, "list", 0, -1).Val(), []string{"a", "b", "a", ""})
	eq("set", c0.SMembers(ctx, "set").Val(), []string{"x", "y", "z"})
	for i, f := range trickyScores {
		got, err := c0.ZScore(ctx, "zset", fmt.Sprintf("m%d", i)).Result()
		if err != nil || got != f || math.Signbit(got) != math.Signbit(f) {
			t.Errorf("zset m%d score = %v (%v), want %v", i, got, err, f)
		}
	}
	eq("db3 str", c3.Get(ctx, "in-db3").Val(), "three")
	eq("db3 list", c3.LRange(ctx, "list3", 0, -1).Val(), []string{"q"})
	eq("db3 has no db0 keys", c3.Exists(ctx, "str").Val(), int64(0))

	if ttl := c0.TTL(ctx, "ttl100").Val(); ttl < 95*time.Second || ttl > 100*time.Second {
		t.Errorf("ttl100 TTL = %v, want ~100s", ttl)
	}
	if ttl := c0.TTL(ctx, "job:abc").Val(); ttl < time.Hour-5*time.Second || ttl > time.Hour {
		t.Errorf("job:abc TTL = %v, want ~1h", ttl)
	}
	if ttl := c0.TTL(ctx, "str").Val(); ttl != -1 {
		t.Errorf("str TTL = %v, want none (-1)", ttl)
	}
}

func TestRoundTripAllTypes(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	fill(t, client(t, s, "", 0), client(t, s, "", 3))
	check(t, client(t, s, "", 0), client(t, s, "", 3))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := start(t, Options{DataDir: dir})
	c0, c3 := client(t, s2, "", 0), client(t, s2, "", 3)
	check(t, c0, c3)
	if n := c0.Exists(ctx, "stream").Val(); n != 0 {
		t.Errorf("stream was restored; streams are documented as not persisted")
	}

	// And once more, through a live Save (the MULTI/EXEC path) rather than
	// the final save of Close.
	if err := s2.Save(); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	copyFile(t, filepath.Join(dir, SnapshotFile), filepath.Join(dir2, SnapshotFile))
	s3 := start(t, Options{DataDir: dir2})
	check(t, client(t, s3, "", 0), client(t, s3, "", 3))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b := must[[]byte](t)(os.ReadFile(from))
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureModesAgree checks that the three ways of reading the data set
// (transaction, Lua script, direct API after stop) give the same snapshot.
func TestCaptureModesAgree(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	c0 := client(t, s, "", 0)
	fill(t, c0, client(t, s, "", 3))
	for i := range 200 {
		c0.HSet(ctx, fmt.Sprintf("h%03d", i), "a", i, "b", "x")
	}

	tx, txSkipped, ok, err := s.captureTx(s.listKeys())
	if err != nil || !ok {
		t.Fatalf("captureTx: ok=%v err=%v", ok, err)
	}
	lua, luaSkipped, err := s.captureLua()
	if err != nil {
		t.Fatalf("captureLua: %v", err)
	}
	s.m.Close() // as Close does before its final save
	direct, directSkipped := s.captureDirect()

	norm := func(f *snapshotFile) string {
		f.SavedAtMs = 0
		for i := range f.DBs {
			for j := range f.DBs[i].Keys {
				k := &f.DBs[i].Keys[j]
				if k.ExpireAtMs != 0 {
					k.ExpireAtMs = 1 // wall-clock dependent; checked elsewhere
				}
			}
		}
		b, _ := json.Marshal(f)
		return string(b)
	}
	if a, b := norm(tx), norm(lua); a != b {
		t.Errorf("tx and Lua snapshots differ:\n%s\n%s", a, b)
	}
	if a, b := norm(tx), norm(direct); a != b {
		t.Errorf("tx and direct snapshots differ:\n%s\n%s", a, b)
	}
	for _, sk := range [][]string{txSkipped, luaSkipped, directSkipped} {
		if !reflect.DeepEqual(sk, []string{"stream"}) {
			t.Errorf("skipped = %q, want [stream]", sk)
		}
	}
}

// TestSnapshotIsPointInTime saves while clients run Lua scripts that move
// items between keys and create new keys; every snapshot must see each
// script either entirely or not at all.
func TestSnapshotIsPointInTime(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	c := client(t, s, "", 0)
	const n = 200
	for i := range n {
		c.RPush(ctx, "a", fmt.Sprint(i))
	}
	// Move one item from a to b (or back) and create a new key, counting
	// the moves in a hash: len(a)+len(b) == n and #new keys == moves.
	move := redis.NewScript(`
local from, to = KEYS[1], KEYS[2]
if redis.call('LLEN', from) == 0 then from, to = to, from end
redis.call('RPUSH', to, redis.call('LPOP', from))
local m = redis.call('HINCRBY', 'stats', 'moves', 1)
redis.call('SET', 'new:' .. m, ARGV[1])
return m`)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keys := []string{"a", "b"}
				if w == 1 {
					keys = []string{"b", "a"}
				}
				if err := move.Run(ctx, c, keys, "x").Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 15 {
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
		snap, err := readSnapshotFile(filepath.Join(dir, SnapshotFile))
		if err != nil {
			t.Fatal(err)
		}
		var lists, newKeys int
		moves := "0"
		for _, db := range snap.DBs {
			for _, k := range db.Keys {
				switch {
				case k.Key == "a" || k.Key == "b":
					lists += len(k.List)
				case strings.HasPrefix(k.Key, "new:"):
					newKeys++
				case k.Key == "stats":
					moves = k.Hash["moves"]
				}
			}
		}
		if lists != n || fmt.Sprint(newKeys) != moves {
			t.Fatalf("inconsistent snapshot: %d list items (want %d), %d new keys, %s moves", lists, n, newKeys, moves)
		}
	}
}

func TestExpiredWhileDown(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	c := client(t, s, "", 0)
	c.Set(ctx, "keep", "1", time.Hour)
	c.Set(ctx, "edited", "1", time.Hour)
	c.Set(ctx, "short", "1", 700*time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// "edited" expired while the server was down, per the snapshot...
	path := filepath.Join(dir, SnapshotFile)
	snap := must[*snapshotFile](t)(readSnapshotFile(path))
	for i := range snap.DBs[0].Keys {
		if k := &snap.DBs[0].Keys[i]; k.Key == "edited" {
			k.ExpireAtMs = time.Now().Add(-time.Second).UnixMilli()
		}
	}
	must[int64](t)(writeSnapshotFile(path, snap))
	// ...and "short" really does, while we wait.
	time.Sleep(800 * time.Millisecond)

	s2 := start(t, Options{DataDir: dir})
	c2 := client(t, s2, "", 0)
	if got := c2.Keys(ctx, "*").Val(); !reflect.DeepEqual(got, []string{"keep"}) {
		t.Errorf("keys after restart = %q, want [keep]", got)
	}
	if ttl := c2.TTL(ctx, "keep").Val(); ttl < time.Hour-10*time.Second {
		t.Errorf("keep TTL = %v, want ~1h", ttl)
	}
}

func TestRealTimeExpiry(t *testing.T) {
	s := start(t, Options{})
	c := client(t, s, "", 0)
	if err := c.Set(ctx, "k", "v", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "long", "v", 10*time.Second)
	c.HSet(ctx, "h", "f", "v")
	c.PExpire(ctx, "h", 400*time.Millisecond)
	if c.Exists(ctx, "k").Val() != 1 {
		t.Fatal("k gone right after SET")
	}
	testproc.EventuallyWithin(t, 3*time.Second, "keys with a 300/400 ms TTL to expire", func() bool {
		return c.Exists(ctx, "k", "h").Val() == 0
	})
	// Gone from miniredis itself, not just hidden from reads.
	if s.Miniredis().Exists("k") {
		t.Error("expired key still in miniredis")
	}
	if pttl := c.PTTL(ctx, "long").Val(); pttl > 9800*time.Millisecond || pttl < 5*time.Second {
		t.Errorf("PTTL of a 10s key after >=300ms = %v: TTLs don't run in real time", pttl)
	}
	// TIME follows the wall clock.
	if d := time.Since(c.Time(ctx).Val()); d < -time.Second || d > time.Second {
		t.Errorf("TIME is %v off", d)
	}
	// FastForward, for tests, still works.
	s.Miniredis().FastForward(11 * time.Second)
	if c.Exists(ctx, "long").Val() != 0 {
		t.Error("FastForward did not expire the key")
	}
}

// pipelineScript is shaped like the pipelines' job-finishing script.
const pipelineScript = `
local job = KEYS[1]
redis.call('hincrby', job, 'bytes_downloaded', ARGV[2])
redis.call('hset', KEYS[1], 'finished_at', ARGV[1])
redis.call('zadd', 'finished_jobs', ARGV[1], job)
redis.call('publish', 'updates', job)
redis.call('expire', job, 3600)
return redis.call('hget', job, 'bytes_downloaded')
`

func TestLuaScripts(t *testing.T) {
	s := start(t, Options{Password: "pw"})
	c := client(t, s, "pw", 0)
	sub := client(t, s, "pw", 0).Subscribe(ctx, "updates")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // subscription confirmed
		t.Fatal(err)
	}

	got, err := c.Eval(ctx, pipelineScript, []string{"job1"}, "1700000000.5", 100).Result()
	if err != nil || got != "100" {
		t.Fatalf("EVAL = %v, %v", got, err)
	}
	sha := must[string](t)(c.ScriptLoad(ctx, pipelineScript).Result())
	got, err = c.EvalSha(ctx, sha, []string{"job1"}, "1700000000.75", 50).Result()
	if err != nil || got != "150" {
		t.Fatalf("EVALSHA = %v, %v", got, err)
	}
	// go-redis's Script tries EVALSHA and falls back to EVAL, as redis-py does.
	got, err = redis.NewScript(pipelineScript+" -- variant").Run(ctx, c, []string{"job2"}, "1700000001", 7).Result()
	if err != nil || got != "7" {
		t.Fatalf("Script.Run = %v, %v", got, err)
	}

	if f := c.HGet(ctx, "job1", "finished_at").Val(); f != "1700000000.75" {
		t.Errorf("finished_at = %q", f)
	}
	if sc := c.ZScore(ctx, "finished_jobs", "job1").Val(); sc != 1700000000.75 {
		t.Errorf("zscore = %v", sc)
	}
	if ttl := c.TTL(ctx, "job1").Val(); ttl < 3590*time.Second || ttl > time.Hour {
		t.Errorf("job TTL = %v, want ~1h", ttl)
	}
	for _, want := range []string{"job1", "job1", "job2"} {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := sub.ReceiveMessage(rctx)
		cancel()
		if err != nil || msg.Payload != want {
			t.Fatalf("published message = %v, %v; want %s", msg, err, want)
		}
	}
}

func TestAuth(t *testing.T) {
	const pw = "s3cret:/@?#%"
	s := start(t, Options{Password: pw, DataDir: t.TempDir()})

	err := client(t, s, "", 0).Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("unauthenticated SET: err = %v, want NOAUTH", err)
	}
	err = client(t, s, "wrong", 0).Ping(ctx).Err()
	if err == nil {
		t.Fatal("wrong password accepted")
	}
	if err := client(t, s, pw, 0).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("authenticated SET: %v", err)
	}

	// The URL carries the password, escaped, and works as is.
	u := s.URL()
	if !strings.HasPrefix(u, "redis://:") || !strings.HasSuffix(u, "@"+s.Addr()+"/0") {
		t.Errorf("URL = %q", u)
	}
	opt := must[*redis.Options](t)(redis.ParseURL(u))
	if opt.Password != pw {
		t.Errorf("password from URL = %q", opt.Password)
	}
	uc := redis.NewClient(opt)
	defer uc.Close()
	if v := uc.Get(ctx, "k").Val(); v != "v" {
		t.Errorf("GET through URL = %q", v)
	}
	// Saving works with a password too (the snapshot authenticates).
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
}

func TestURL(t *testing.T) {
	s := start(t, Options{})
	if want := "redis://" + s.Addr() + "/0"; s.URL() != want {
		t.Errorf("URL = %q, want %q", s.URL(), want)
	}
	if strings.HasSuffix(s.Addr(), ":0") {
		t.Errorf("Addr = %q, want the real port", s.Addr())
	}

	// On all interfaces, pipelines elsewhere need this machine's name.
	host, _ := os.Hostname()
	for addr, want := range map[string]string{
		"0.0.0.0:6379":    "redis://" + host + ":6379/0",
		"[::]:6379":       "redis://" + host + ":6379/0",
		"[::1]:6380":      "redis://[::1]:6380/0",
		"192.0.2.10:6379": "redis://192.0.2.10:6379/0",
	} {
		if got := (&Server{addr: addr}).URL(); got != want {
			t.Errorf("URL for %s = %q, want %q", addr, got, want)
		}
	}
}

func TestAddrInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	s, err := Start(Options{Addr: l.Addr().String(), DataDir: dir, Logger: quietLogger()})
	if err == nil {
		s.Close()
		t.Fatal("Start on a taken address succeeded")
	}
	if !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("err = %v, want ErrAddrInUse", err)
	}
	for _, want := range []string{l.Addr().String(), "in use", "redis.url", "REDIS_URL", "redis.listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestAtomicSave(t *testing.T) {
	dir := t.TempDir()
	// A temp file left by a crash during a save is cleaned up.
	stale := filepath.Join(dir, SnapshotFile+".tmp-123")
	os.WriteFile(stale, []byte("{"), 0o600)

	s := start(t, Options{DataDir: dir})
	c := client(t, s, "", 0)
	for i := range 3 {
		c.Set(ctx, fmt.Sprint("k", i), i, 0)
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
		// The snapshot and the log segment it starts (older ones are
		// deleted once the snapshot names the new one).
		entries := must[[]os.DirEntry](t)(os.ReadDir(dir))
		want := []string{LockFile, fmt.Sprint(AOFPrefix, s.aof.gen), SnapshotFile}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, want) {
			t.Fatalf("dir holds %q, want %q", names, want)
		}
	}
	snap := must[*snapshotFile](t)(readSnapshotFile(filepath.Join(dir, SnapshotFile)))
	if snap.Version != snapshotVersion || snap.keyCount() != 3 {
		t.Errorf("snapshot: version %d, %d keys", snap.Version, snap.keyCount())
	}
	if d := time.Since(time.UnixMilli(snap.SavedAtMs)); d < 0 || d > time.Minute {
		t.Errorf("saved_at_ms is %v ago", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// The data directory holds every key pipelines and the bot write, the
// redis.password-protected data included: the write log (redis.aof.N) is
// created 0600 like the snapshot (redis.json), not 0644.
func TestDataFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	if err := client(t, s, "", 0).Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s: mode %v, want 0600", when, e.Name(), fi.Mode().Perm())
			}
		}
		if len(entries) == 0 {
			t.Fatalf("%s: no files", when)
		}
	}
	// While it runs the log segment is there; at Close the final
	// snapshot is written.
	check("running")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("stopped")
}

func TestCorruptSnapshot(t *testing.T) {
	good := `{"version":1,"saved_at_ms":1,"dbs":[{"db":0,"keys":[{"key":"k","type":"string","string":"v"}]}]}`
	for name, content := range map[string]string{
		"truncated":     good[:len(good)-10],
		"empty":         "",
		"not json":      "hello",
		"trailing":      good + "{}",
		"version":       strings.Replace(good, `"version":1`, `"version":99`, 1),
		"unknown type":  strings.Replace(good, `"string","string"`, `"bogus","string"`, 1),
		"no value":      strings.Replace(good, `,"string":"v"`, ``, 1),
		"bad db":        strings.Replace(good, `"db":0`, `"db":16`, 1),
		"bad base64":    strings.Replace(good, `"type"`, `"encoding":"base64","type"`, 1),
		"bad score":     `{"version":1,"dbs":[{"db":0,"keys":[{"key":"z","type":"zset","zset":[{"member":"m","score":"nan"}]}]}]}`,
		"duplicate key": `{"version":1,"dbs":[{"db":0,"keys":[{"key":"k","type":"string","string":"v"},{"key":"k","type":"string","string":"w"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, SnapshotFile)
			os.WriteFile(path, []byte(content), 0o600)
			s, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: quietLogger()})
			if err == nil {
				s.Close()
				t.Fatal("Start with a corrupt snapshot succeeded")
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			// The bad file is left alone for a human to look at.
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Error("corrupt snapshot was modified")
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, SnapshotFile), []byte(good), 0o600)
		s := start(t, Options{DataDir: dir})
		if v := client(t, s, "", 0).Get(ctx, "k").Val(); v != "v" {
			t.Errorf("k = %q", v)
		}
	})
}

func TestNoDataDir(t *testing.T) {
	s := start(t, Options{})
	client(t, s, "", 0).Set(ctx, "k", "v", 0)
	if err := s.Save(); err != nil {
		t.Errorf("Save without DataDir = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func TestPeriodicSave(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir, SaveInterval: 50 * time.Millisecond})
	client(t, s, "", 0).Set(ctx, "periodic", "yes", 0)
	path := filepath.Join(dir, SnapshotFile)
	testproc.EventuallyWithin(t, 5*time.Second, "a periodic snapshot with the key", func() bool {
		b, _ := os.ReadFile(path)
		return bytes.Contains(b, []byte(`"periodic"`))
	})
}

func TestPanicInBackgroundIsRecovered(t *testing.T) {
	var buf bytes.Buffer
	s := start(t, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	s.safely("test", func() { panic("boom") })
	if !strings.Contains(buf.String(), "boom") {
		t.Errorf("panic not logged: %s", buf.String())
	}
}

// BenchmarkSave measures a live Save of 10k job-like hashes (7 fields, 1h
// TTL): capture (MULTI/EXEC) + JSON + write + fsync + rename. The capture-*
// sub-benchmarks time only reading the data set, the fast transaction and
// the Lua fallback (which holds the miniredis lock for all of its run).
func BenchmarkSave(b *testing.B) {
	s := start(b, Options{DataDir: b.TempDir()})
	db := s.Miniredis().DB(0)
	for i := range 10000 {
		k := fmt.Sprintf("job:%05d", i)
		db.HSet(k, "url", "http://example.com/"+k, "started_by", "someone", "bytes_downloaded", "123456",
			"items_downloaded", "99", "pipeline_id", "pipeline-1", "queued_at", "1700000000.123", "finished_at", "1700000100.456")
		db.SetTTL(k, time.Hour)
	}
	b.Run("save-10k-hashes", func(b *testing.B) {
		for b.Loop() {
			if err := s.Save(); err != nil {
				b.Fatal(err)
			}
		}
		st := must[os.FileInfo](b)(os.Stat(s.path))
		b.ReportMetric(float64(st.Size()), "file-bytes")
	})
	b.Run("capture-tx", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok, err := s.captureTx(s.listKeys()); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("capture-lua", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.captureLua(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

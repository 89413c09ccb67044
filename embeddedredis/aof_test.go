package embeddedredis

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// crashCopy copies the data directory as it is on disk now, as kill -9
// would leave it (the server keeps running and is not saved).
func crashCopy(t *testing.T, s *Server) string {
	t.Helper()
	to := t.TempDir()
	ents := must[[]os.DirEntry](t)(os.ReadDir(s.dataDir))
	for _, e := range ents {
		b := must[[]byte](t)(os.ReadFile(filepath.Join(s.dataDir, e.Name())))
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// records reads the records of every log segment in dir.
func records(t *testing.T, dir string) []*aofRecord {
	t.Helper()
	var out []*aofRecord
	for _, g := range must[[]int64](t)(segments(dir)) {
		b := must[[]byte](t)(os.ReadFile(segmentPath(dir, g)))
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			rec, _, err := readRecord(r)
			if err != nil {
				break
			}
			out = append(out, rec)
		}
	}
	return out
}

func register(t *testing.T, c *redis.Client, id string) {
	t.Helper()
	err := store.New(c).Register(ctx, store.NewJob{Ident: id, URL: "http://" + id + ".example/",
		FetchDepth: "inf", Slug: "x-inf", StartedBy: "alice", StartedIn: "#a", DelayMin: 250,
		DelayMax: 375, Concurrency: 3, SettingsAge: 4, Queue: store.KeyPending})
	if err != nil {
		t.Fatal(err)
	}
}

// A job registered through a client with SyncHook (the register script,
// through EVALSHA) is on disk when Register returns: the data directory
// copied at that moment restores it. Three crashes in a row, each server
// started from the previous one's crash copy, so the scripts also go
// through a server that only knows them from its replay.
func TestAcknowledgedWriteSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"job0", "job1", "job2"}
	for i, id := range ids {
		// No background fsync: only the hook can have saved the job.
		s := start(t, Options{DataDir: dir, syncInterval: time.Hour})
		c := client(t, s, "", 0)
		c.AddHook(s.SyncHook())
		for _, prev := range ids[:i] {
			if n := must[int64](t)(c.Exists(ctx, prev).Result()); n != 1 {
				t.Fatalf("crash %d: %s lost", i, prev)
			}
		}
		if q := c.LRange(ctx, store.KeyPending, 0, -1).Val(); len(q) != i {
			t.Fatalf("crash %d: pending = %q", i, q)
		}
		register(t, c, id)
		dir = crashCopy(t, s)
	}
}

// Every type of the snapshot round-trips through the log alone.
func TestLogRoundTripAllTypes(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir(), syncInterval: time.Hour})
	c0, c3 := client(t, s, "", 0), client(t, s, "", 3)
	c0.AddHook(s.SyncHook())
	c3.AddHook(s.SyncHook())
	fill(t, c0, c3)
	s2 := start(t, Options{DataDir: crashCopy(t, s)})
	check(t, client(t, s2, "", 0), client(t, s2, "", 3))
}

// Relative expiries are logged as absolute deadlines, so a replay keeps
// the deadline instead of restarting the TTL.
func TestLogExpiriesAreAbsolute(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	c := client(t, s, "", 0)
	c.AddHook(s.SyncHook())
	before := time.Now().UnixMilli()
	for _, cmd := range [][]any{
		{"SET", "a", "1", "EX", "7200"},
		{"SET", "b", "1", "PX", "7200000", "NX"},
		{"SETEX", "c", "7200", "1"},
		{"PSETEX", "d", "7200000", "1"},
		{"SET", "e", "1"},
		{"EXPIRE", "e", "7200"},
		{"SET", "f", "1"},
		{"PEXPIRE", "f", "7200000", "NX"},
		{"SET", "g", "1"},
		{"GETEX", "g", "EX", "7200"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	after := time.Now().UnixMilli()
	dir := crashCopy(t, s)
	recs := records(t, dir)
	if len(recs) != 10 {
		t.Fatalf("%d records, want 10", len(recs))
	}
	for _, r := range recs {
		c := r.cmds[0]
		if c[0] == "SET" && len(c) == 3 {
			continue // the plain SETs
		}
		var at string
		switch {
		case c[0] == "PEXPIREAT":
			at = c[2]
		case slices.Index(c, "PXAT") > 0:
			at = c[slices.Index(c, "PXAT")+1]
		}
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil || ms < before+7200000 || ms > after+7200000 {
			t.Errorf("logged %q: want an absolute deadline 2 h after the command", c)
		}
		if slices.ContainsFunc(c, func(a string) bool { return strings.EqualFold(a, "EX") || strings.EqualFold(a, "PX") }) {
			t.Errorf("logged %q: a relative expiry", c)
		}
	}
	s2 := start(t, Options{DataDir: dir})
	c2 := client(t, s2, "", 0)
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		if ttl := c2.PTTL(ctx, k).Val(); ttl < 2*time.Hour-5*time.Second || ttl > 2*time.Hour {
			t.Errorf("%s: TTL %v after replay, want ~2h", k, ttl)
		}
	}
}

// A record written an hour ago: its relative expiries, including those a
// script sets (which can only be made absolute at replay), count from
// then, not from the replay.
func TestReplayKeepsDeadlinesOfOldRecords(t *testing.T) {
	dir := t.TempDir()
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	script := `redis.call('SET', KEYS[1], '1'); redis.call('EXPIRE', KEYS[1], ARGV[1]); return 1`
	var b []byte
	for _, r := range []aofRecord{
		{timeMs: hourAgo, cmds: [][]string{{"EVAL", script, "1", "scripted", "7200"}}},
		{timeMs: hourAgo, cmds: [][]string{{"SET", "direct", "1"}, {"PEXPIREAT", "direct", strconv.FormatInt(hourAgo+7200000, 10)}}, multi: true},
	} {
		b = r.appendTo(b)
	}
	if err := os.WriteFile(segmentPath(dir, 1), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{DataDir: dir})
	c := client(t, s, "", 0)
	for _, k := range []string{"scripted", "direct"} {
		if ttl := c.PTTL(ctx, k).Val(); ttl < time.Hour-5*time.Second || ttl > time.Hour {
			t.Errorf("%s: TTL %v after replay, want ~1h (2h set an hour ago)", k, ttl)
		}
	}
}

// EVALSHA is logged as EVAL with the body and replays; MULTI/EXEC replays
// as a whole; a discarded MULTI and an EXEC that a WATCH failed leave
// nothing; SPOP is logged as the SREM of what it popped.
func TestReplayScriptsAndTransactions(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	c := client(t, s, "", 0)
	c.AddHook(s.SyncHook())
	src := `redis.call('HINCRBY', KEYS[1], 'n', ARGV[1]); return redis.call('ZADD', KEYS[2], ARGV[1], 'm')`
	script := redis.NewScript(src)
	if err := c.ScriptLoad(ctx, src).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.EvalSha(ctx, script.Hash(), []string{"h", "z"}, 5).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx1", "a", 0)
		p.Incr(ctx, "tx2")
		p.Get(ctx, "tx1")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	conn := c.Conn()
	defer conn.Close()
	for _, cmd := range [][]any{{"MULTI"}, {"SET", "discarded", "1"}, {"DISCARD"}} {
		if err := conn.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(cmd, err)
		}
	}
	// A refused MULTI opens no transaction: what follows runs at once.
	if err := conn.Do(ctx, "MULTI", "extra").Err(); err == nil {
		t.Fatal("MULTI extra accepted")
	}
	if err := conn.Do(ctx, "SET", "after-bad-multi", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// A failed WATCH: the key changes between WATCH and EXEC.
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		if err := c.Set(ctx, "watched", "changed", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "watchfail", "1", 0)
			return nil
		})
		return err
	}, "watched")
	if err != redis.TxFailedErr {
		t.Fatalf("WATCH: %v, want a failed transaction", err)
	}
	c.SAdd(ctx, "spop", "a", "b", "c", "d")
	popped := must[[]string](t)(c.SPopN(ctx, "spop", 2).Result())

	dir := crashCopy(t, s)
	for _, r := range records(t, dir) {
		if r.cmds[0][0] == "EVALSHA" || r.cmds[0][0] == "SPOP" {
			t.Errorf("logged %q", r.cmds[0])
		}
	}
	c2 := client(t, start(t, Options{DataDir: dir}), "", 0)
	if v := c2.HGet(ctx, "h", "n").Val(); v != "5" {
		t.Errorf("h.n = %q after replay, want 5", v)
	}
	if v := c2.ZScore(ctx, "z", "m").Val(); v != 5 {
		t.Errorf("z m = %v after replay, want 5", v)
	}
	if v := c2.MGet(ctx, "tx1", "tx2", "watched", "after-bad-multi").Val(); fmt.Sprint(v) != "[a 1 changed 1]" {
		t.Errorf("tx1, tx2, watched, after-bad-multi = %v after replay", v)
	}
	if n := c2.Exists(ctx, "discarded", "watchfail").Val(); n != 0 {
		t.Errorf("%d keys of a discarded or failed transaction after replay", n)
	}
	left := c2.SMembers(ctx, "spop").Val()
	if len(left) != 2 || containsAny(left, popped) {
		t.Errorf("set after SPOP %q and replay: %q", popped, left)
	}
	// The replayed EVAL loaded the script: EVALSHA works again.
	if err := c2.EvalSha(ctx, script.Hash(), []string{"h", "z"}, 1).Err(); err != nil {
		t.Errorf("EVALSHA after replay: %v", err)
	}
}

func containsAny(list, of []string) bool {
	for _, x := range list {
		for _, y := range of {
			if x == y {
				return true
			}
		}
	}
	return false
}

// SELECT is followed per connection, inside transactions too.
func TestReplayFollowsSelect(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	a, b := client(t, s, "", 0).Conn(), client(t, s, "", 0).Conn()
	defer a.Close()
	defer b.Close()
	do := func(c *redis.Conn, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatal(args, err)
		}
	}
	do(a, "SELECT", "3")
	do(a, "SET", "k", "a in 3")
	do(b, "SET", "k", "b in 0")
	do(a, "MULTI")
	do(a, "SELECT", "5")
	do(a, "SET", "k", "a in 5")
	do(a, "EXEC")
	do(a, "SET", "k2", "a still in 5")
	if err := b.Do(ctx, "SELECT", "nope").Err(); err == nil { // refused: b stays in 0
		t.Fatal("SELECT nope accepted")
	}
	do(b, "SET", "k3", "b in 0")
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, Options{DataDir: crashCopy(t, s)})
	want := map[int]map[string]string{
		0: {"k": "b in 0", "k3": "b in 0"},
		3: {"k": "a in 3"},
		5: {"k": "a in 5", "k2": "a still in 5"},
	}
	for db, kv := range want {
		c := client(t, s2, "", db)
		if n := c.DBSize(ctx).Val(); n != int64(len(kv)) {
			t.Errorf("db %d holds %d keys, want %d", db, n, len(kv))
		}
		for k, v := range kv {
			if got := c.Get(ctx, k).Val(); got != v {
				t.Errorf("db %d %s = %q, want %q", db, k, got, v)
			}
		}
	}
}

// A record cut short by a crash, or damaged with nothing intact after it,
// ends the replay of its segment with a warning; what came before is
// restored, and the snapshot written after the replay keeps the segment
// as evidence under another name.
func TestReplaySkipsTornTail(t *testing.T) {
	for _, damage := range []string{"cut", "checksum", "zeros after", "garbage length"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			var b []byte
			b = (&aofRecord{timeMs: 1, cmds: [][]string{{"SET", "kept", "1"}}}).appendTo(b)
			good := len(b)
			b = (&aofRecord{timeMs: 1, cmds: [][]string{{"SET", "torn", "1"}}}).appendTo(b)
			switch damage {
			case "cut":
				b = b[:len(b)-3]
			case "checksum":
				b[len(b)-1] ^= 0xff
			case "zeros after": // a file extended but not written (power loss)
				b = append(b[:len(b)-3], make([]byte, 4096)...)
			case "garbage length":
				b[good] ^= 0x40
			}
			if err := os.WriteFile(segmentPath(dir, 1), b, 0o644); err != nil {
				t.Fatal(err)
			}
			var logBuf bytes.Buffer
			s := start(t, Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
			c := client(t, s, "", 0)
			if c.Get(ctx, "kept").Val() != "1" || c.Exists(ctx, "torn").Val() != 0 {
				t.Errorf("kept=%q torn exists=%d", c.Get(ctx, "kept").Val(), c.Exists(ctx, "torn").Val())
			}
			if want := fmt.Sprintf("offset=%d bytes=%d", good, len(b)-good); !strings.Contains(logBuf.String(), want) {
				t.Errorf("no warning with %q:\n%s", want, logBuf.String())
			}
			if _, err := os.Stat(segmentPath(dir, 1)); !os.IsNotExist(err) {
				t.Errorf("the damaged segment is still replayed after the snapshot: %v", err)
			}
			if kept, err := os.ReadFile(segmentPath(dir, 1) + TornSuffix); err != nil || !bytes.Equal(kept, b) {
				t.Errorf("the torn segment is not kept as evidence: %v", err)
			}
			// And the next start goes on from the snapshot.
			s.Close()
			c = client(t, start(t, Options{DataDir: dir}), "", 0)
			if c.Get(ctx, "kept").Val() != "1" {
				t.Errorf("after a restart: kept = %q", c.Get(ctx, "kept").Val())
			}
		})
	}
}

// Writes from clients that never call Sync (pipelines) reach the disk
// within about a second.
func TestUnsyncedWritesReachDisk(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir()})
	c := client(t, s, "", 0)
	if err := c.Set(ctx, "pipeline-write", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, "the write on disk", func() bool { return len(records(t, crashCopy(t, s))) > 0 })
}

// A snapshot written before the log existed (no aof_gen) still loads, and
// log segments next to it are replayed on top.
func TestOldSnapshotAndLog(t *testing.T) {
	dir := t.TempDir()
	old := `{"version":1,"saved_at_ms":1767225600000,"dbs":[{"db":0,"keys":[{"key":"old","type":"string","string":"v"}]}]}`
	if err := os.WriteFile(filepath.Join(dir, SnapshotFile), []byte(old+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := (&aofRecord{timeMs: 1, cmds: [][]string{{"SET", "new", "w"}}}).appendTo(nil)
	if err := os.WriteFile(segmentPath(dir, 1), b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := client(t, start(t, Options{DataDir: dir}), "", 0)
	if v := c.MGet(ctx, "old", "new").Val(); fmt.Sprint(v) != "[v w]" {
		t.Errorf("old, new = %v", v)
	}
}

// Commands refused for want of AUTH are not logged (a replay would run
// them).
func TestUnauthenticatedWritesNotLogged(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir(), Password: "pw"})
	bad := client(t, s, "", 0)
	if err := bad.Set(ctx, "intruder", "1", 0).Err(); err == nil {
		t.Fatal("SET without AUTH accepted")
	}
	good := client(t, s, "pw", 0)
	if err := good.Set(ctx, "ok", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := client(t, start(t, Options{DataDir: crashCopy(t, s), Password: "pw"}), "pw", 0)
	if n := c.Exists(ctx, "intruder").Val(); n != 0 {
		t.Error("a write refused for want of AUTH was replayed")
	}
	if n := c.Exists(ctx, "ok").Val(); n != 1 {
		t.Error("an authenticated write was not replayed")
	}
}

func TestAbsoluteExpiry(t *testing.T) {
	const now = 1_000_000
	for _, tc := range []struct{ in, want string }{
		{"EXPIRE k 10", "PEXPIREAT k 1010000"},
		{"expire k 10 GT", "PEXPIREAT k 1010000 GT"},
		{"PEXPIRE k 10", "PEXPIREAT k 1000010"},
		{"EXPIRE k -5", "PEXPIREAT k 995000"}, // deletes, as EXPIRE does
		{"EXPIRE k x", ""},
		{"SETEX k 10 v", "SET k v PXAT 1010000"},
		{"SETEX k 0 v", ""}, // an error, kept as is
		{"PSETEX k 10 v", "SET k v PXAT 1000010"},
		{"SET k v EX 10", "SET k v PXAT 1010000"},
		{"SET k v NX px 10 GET", "SET k v NX PXAT 1000010 GET"},
		{"SET k EX", ""}, // the value is "EX"
		{"SET k v KEEPTTL", ""},
		{"GETEX k EX 10", "GETEX k PXAT 1010000"},
		{"GETEX k PERSIST", ""},
		{"EXPIREAT k 5", ""},
	} {
		got, ok := absoluteExpiry(now, strings.Fields(tc.in))
		if g := strings.Join(got, " "); g != tc.want || ok != (tc.want != "") {
			t.Errorf("%s -> %q (%v), want %q", tc.in, g, ok, tc.want)
		}
	}
}

func scriptSHA(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// The hook syncs after a write of its client, not after a read: a read
// does not wait for the disk, even when other clients' writes are pending.
func TestSyncHookWaitsForWritesOnly(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir(), syncInterval: time.Hour})
	pipeline := client(t, s, "", 0)
	node := client(t, s, "", 0)
	node.AddHook(s.SyncHook())
	if err := pipeline.Set(ctx, "p", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := node.Get(ctx, "p").Err(); err != nil {
		t.Fatal(err)
	}
	if !s.aof.pending() {
		t.Error("a read waited for the disk")
	}
	if err := node.Set(ctx, "n", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if s.aof.pending() {
		t.Error("a write returned before it was on disk")
	}
	if _, err := node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "tx")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := pipeline.Set(ctx, "p2", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "p2")
		p.Incr(ctx, "n")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s.aof.pending() {
		t.Error("a pipeline with a write returned before it was on disk")
	}
}

// dirContents maps each file of dir to its bytes.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range must[[]os.DirEntry](t)(os.ReadDir(dir)) {
		if e.Name() == LockFile {
			continue // each start writes its pid there, data is never in it
		}
		out[e.Name()] = string(must[[]byte](t)(os.ReadFile(filepath.Join(dir, e.Name()))))
	}
	return out
}

// The reproduction: 100 acknowledged jobs, kill -9, one byte
// flipped at 10 % of redis.aof.1. Replaying up to the damage left 7 jobs,
// a warning and no segment. Intact records after the damage mean it is not
// a torn write: Start refuses, names the file and the offset, and leaves
// the data directory as it was.
func TestDamageBeforeTheTailRefusesToStart(t *testing.T) {
	s := start(t, Options{DataDir: t.TempDir(), syncInterval: time.Hour, SaveInterval: time.Hour})
	c := client(t, s, "", 0)
	c.AddHook(s.SyncHook())
	for i := range 100 {
		register(t, c, fmt.Sprintf("job%d", i))
	}
	dir := crashCopy(t, s)
	path := segmentPath(dir, 1)
	b := must[[]byte](t)(os.ReadFile(path))
	b[len(b)/10] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirContents(t, dir)

	s2, err := Start(Options{DataDir: dir, Addr: "127.0.0.1:0", Logger: quietLogger()})
	if err == nil {
		n := client(t, s2, "", 0).LLen(ctx, store.KeyPending).Val()
		s2.Close()
		t.Fatalf("started with %d of 100 acknowledged jobs", n)
	}
	if !errors.Is(err, ErrLogDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "byte offset") {
		t.Errorf("error %v: want ErrLogDamaged naming %s and the offset", err, path)
	}
	if after := dirContents(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("the data directory changed: %d files before, %d after", len(before), len(after))
	}
}

// Damage anywhere in a record that is not the last (its length, its
// checksum, its payload) refuses the start.
func TestDamageInAnyFieldBeforeTheTail(t *testing.T) {
	var b []byte
	for i := range 3 {
		b = (&aofRecord{timeMs: 1, cmds: [][]string{{"SET", fmt.Sprint("k", i), "1"}}}).appendTo(b)
	}
	first := len(b) / 3
	for _, pos := range []int{first, first + 3, first + 4, first + 9, 2*first - 1} {
		for _, flip := range []byte{0x01, 0x80} {
			dir := t.TempDir()
			d := bytes.Clone(b)
			d[pos] ^= flip
			if err := os.WriteFile(segmentPath(dir, 1), d, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Start(Options{DataDir: dir, Addr: "127.0.0.1:0", Logger: quietLogger()})
			if err == nil {
				s.Close()
				t.Errorf("byte %d ^ %#x: started", pos, flip)
				continue
			}
			if want := fmt.Sprintf("damaged at byte offset %d", first); !strings.Contains(err.Error(), want) {
				t.Errorf("byte %d ^ %#x: %v, want %q", pos, flip, err, want)
			}
		}
	}
}

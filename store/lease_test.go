package store_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// The lease is taken by one node only, renewed only by its
// holder, released only by its holder; each term gets a larger token.
func TestLeaseAcquireRenewRelease(t *testing.T) {
	t.Parallel() // on the real server FastForward sleeps out the lease's TTL: time the CPU can spend elsewhere
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		a, won, err := s.AcquireLease(ctx, "node-a", 10*time.Second)
		if err != nil || !won || a.Node != "node-a" || a.Token < 1 {
			t.Fatalf("first acquire = %+v, %v, %v; want won by node-a", a, won, err)
		}
		h, won, err := s.AcquireLease(ctx, "node-b", 10*time.Second)
		if err != nil || won || h.Value != a.Value {
			t.Fatalf("second acquire = %+v, %v, %v; want refused, holder node-a", h, won, err)
		}
		if ok, err := s.RenewLease(ctx, "1 node-b 0", 10*time.Second); err != nil || ok {
			t.Fatalf("renew by a stranger = %v, %v; want false", ok, err)
		}
		if ok, err := s.ReleaseLease(ctx, "1 node-b 0"); err != nil || ok {
			t.Fatalf("release by a stranger = %v, %v; want false", ok, err)
		}
		if ok, err := s.RenewLease(ctx, a.Value, 10*time.Second); err != nil || !ok {
			t.Fatalf("renew by holder = %v, %v; want true", ok, err)
		}
		got, ok, err := s.Leader(ctx)
		if err != nil || !ok || got.Node != "node-a" || got.TTL <= 0 {
			t.Fatalf("Leader = %+v, %v, %v", got, ok, err)
		}
		if ok, err := s.ReleaseLease(ctx, a.Value); err != nil || !ok {
			t.Fatalf("release by holder = %v, %v; want true", ok, err)
		}
		if _, ok, err := s.Leader(ctx); err != nil || ok {
			t.Fatalf("Leader after release: ok=%v err=%v; want none", ok, err)
		}
		bb, won, err := s.AcquireLease(ctx, "node-b", 10*time.Second)
		if err != nil || !won || bb.Token <= a.Token {
			t.Fatalf("acquire after release = %+v, %v, %v; want won with a larger token than %d", bb, won, err, a.Token)
		}
		// Expiry hands it over too.
		b.FastForward(11 * time.Second)
		c, won, err := s.AcquireLease(ctx, "node-a", 10*time.Second)
		if err != nil || !won || c.Token <= bb.Token {
			t.Fatalf("acquire after expiry = %+v, %v, %v; want won", c, won, err)
		}
	})
}

// A service write under a fencing token that no longer holds
// the lease is refused and writes nothing; the current holder's token and
// no token (single node) write.
func TestFencedServiceWrite(t *testing.T) {
	t.Parallel() // on the real server FastForward sleeps out the lease's TTL: time the CPU can spend elsewhere
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		old, _, err := s.AcquireLease(ctx, "old", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b.FastForward(11 * time.Second) // the old leader was paused
		cur, won, err := s.AcquireLease(ctx, "new", 10*time.Second)
		if err != nil || !won {
			t.Fatal(won, err)
		}
		if err := b.Client.RPush(ctx, store.KeyFinishNotifications, `{"url":"http://x/"}`).Err(); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.TakeNotice(store.WithFence(ctx, old.Value), store.FinishQueue)
		if !store.IsFenced(err) {
			t.Fatalf("take under the old token: err = %v; want FENCED", err)
		}
		if n := b.Client.LLen(ctx, store.KeyFinishNotifications).Val(); n != 1 {
			t.Fatalf("the fenced take moved the notice: %d left", n)
		}
		if _, err := s.FailJob(store.WithFence(ctx, old.Value), "nojob", "reason"); !store.IsFenced(err) {
			t.Fatalf("FailJob under the old token: err = %v; want FENCED", err)
		}
		if _, ok, err := s.TakeNotice(store.WithFence(ctx, cur.Value), store.FinishQueue); err != nil || !ok {
			t.Fatalf("take under the current token: ok=%v err=%v", ok, err)
		}
		if err := b.Client.RPush(ctx, store.KeyFinishNotifications, `{"url":"http://y/"}`).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.TakeNotice(ctx, store.FinishQueue); err != nil || !ok {
			t.Fatalf("take without a token (single node): ok=%v err=%v", ok, err)
		}
	})
}

// Every Lua script that writes is fenced (declared with
// fenced() or command(), starting with scripts/fence.lua) or one of the
// lease scripts listed here. A new script that writes fails this test
// until it is wrapped.
func TestWriteScriptsFenced(t *testing.T) {
	allowed := map[string]string{
		"cmdrecord.lua":     "prologue of the user-command scripts",
		"fence.lua":         "the fence itself",
		"history.lua":       "a prologue: the scripts it starts are checked whole",
		"feed_finalize.lua": "a library: the scripts that include it are checked whole",
		"lib.lua":           "the prologue: a script calling its writer (forget_gone) counts as writing",
		"api_held.lua":      "a prologue: the scripts it starts are checked whole",
		"lease_acquire.lua": "the lease: runs before there is a token",
		"lease_renew.lua":   "the lease: checks its own value",
		"lease_release.lua": "the lease: compare-and-delete",
		"web_login.lua":     "dashboard sessions: every node signs in, standbys too (doc/web.md)",
		"web_revoke.lua":    "dashboard sessions: every node signs out, standbys too (doc/web.md)",
	}
	write := regexp.MustCompile(`(?i)redis\.p?call\(\s*'(SET|SETEX|SETNX|HSET|HSETNX|HMSET|HDEL|HINCRBY|INCR|INCRBY|DECR|DEL|UNLINK|LPUSH|RPUSH|LPOP|RPOP|RPOPLPUSH|LMOVE|LREM|LTRIM|LSET|SADD|SREM|SMOVE|ZADD|ZREM|ZREMRANGEBYSCORE|ZINCRBY|EXPIRE|PEXPIRE|EXPIREAT|PERSIST|RENAME|PUBLISH|XADD|XTRIM)'|pcall\(\s*redis\.call,\s*'(SET|HSET|HDEL|HINCRBY|DEL|LPUSH|RPUSH|LREM|SADD|SREM|ZADD|ZREM|EXPIRE)'|\bforget_gone\(`)
	files, err := filepath.Glob("scripts/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	fencedSrcs := store.FencedSourcesForTest()
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		if !write.Match(body) {
			continue
		}
		if _, ok := allowed[name]; ok {
			continue
		}
		isFenced := false
		for _, src := range fencedSrcs {
			if strings.HasSuffix(src, string(body)) {
				isFenced = true
			}
		}
		if !isFenced {
			t.Errorf("%s writes but is not fenced: declare it with fenced(...), or with command(...) for runWrite (scripts.go)", name)
		}
	}
}

// With Store.CommandFence set (an HA node), a user command's
// write is refused once the node no longer holds the lease (a command
// buffered while it was frozen), and goes through while it does; the
// admin CLI's store (no CommandFence) is not fenced.
func TestCommandFence(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cur, _, err := s.AcquireLease(ctx, "new", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		deposed := store.New(b.Client, store.WithCommandFence(func() string { return "standby old" }))
		if err := deposed.Register(ctx, newJob("fencedjob")); !store.IsFenced(err) {
			t.Fatalf("register on a deposed leader: %v; want FENCED", err)
		}
		if n := b.Client.Exists(ctx, "fencedjob").Val(); n != 0 {
			t.Fatal("the refused register wrote the job")
		}
		leader := store.New(b.Client, store.WithCommandFence(func() string { return cur.Value }))
		if err := leader.Register(ctx, newJob("fencedjob")); err != nil {
			t.Fatalf("register on the leader: %v", err)
		}
		if err := s.Register(ctx, newJob("clijob")); err != nil {
			t.Fatalf("register without a fence (admin CLI): %v", err)
		}
	})
}

package redistest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// goneAfterType deletes a key right after TYPE read it: a key that
// expires, or is deleted by the system being dumped, between KEYS and the
// read of its value.
type goneAfterType struct{ del *redis.Client }

func (h goneAfterType) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h goneAfterType) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h goneAfterType) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) == 2 && a[0] == "type" && a[1] != "kept" {
			h.del.Del(ctx, a[1].(string))
		}
		return err
	}
}

// TestDumpKeyGoneWhileRead: a key listed by KEYS and gone before its
// value is read is recorded as "none" (the soak's checker reads that as
// "vanished"); it does not fail the whole dump (the soak's end-of-run
// dump of a live system failed on an expired command record and left
// final_redis.json null, so every job looked absent), and a collection
// read after it went is not recorded as an empty one (an empty job hash
// looks like a ghost).
func TestDumpKeyGoneWhileRead(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		ctx := context.Background()
		c := b.Client
		c.Set(ctx, "kept", "1", 0)
		c.Set(ctx, "str", "v", 0)
		c.HSet(ctx, "hash", "f", "v")
		c.RPush(ctx, "list", "a")
		c.SAdd(ctx, "set", "a")
		c.ZAdd(ctx, "zset", redis.Z{Score: 1, Member: "a"})
		dc := redis.NewClient(c.Options())
		defer dc.Close()
		del := redis.NewClient(c.Options())
		defer del.Close()
		dc.AddHook(goneAfterType{del: del})
		d, err := Dump(ctx, dc)
		if err != nil {
			t.Fatalf("Dump: %v", err)
		}
		if d["kept"].Type != "string" {
			t.Errorf("kept: %+v", d["kept"])
		}
		for _, k := range []string{"str", "hash", "list", "set", "zset"} {
			if e := d[k]; e.Type != "none" {
				t.Errorf("%s, gone before its value was read, dumped as %+v; want type none", k, e)
			}
		}
	})
}

// takeDuring takes job j1 (HSET started_at, LREM pending) once, right
// after the first command that reads j1 or pending, or a script: a
// pipeline taking a job while the end-of-run state is read.
type takeDuring struct {
	other *redis.Client
	done  *bool
}

func (h takeDuring) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h takeDuring) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h takeDuring) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a := cmd.Args()
		hit := cmd.Name() == "evalsha" || cmd.Name() == "eval"
		for _, x := range a[1:] {
			hit = hit || (cmd.Name() != "type" && (x == "j1" || x == "pending"))
		}
		if hit && !*h.done {
			*h.done = true
			h.other.HSet(ctx, "j1", "started_at", "1")
			h.other.LRem(ctx, "pending", 0, "j1")
		}
		return err
	}
}

// TestSnapshotIsOneMoment: the state read while a job is taken is the
// state before the take or after it, never the job's hash of one moment
// beside the queue of another (registered, not started, in no queue: the
// soak's "stranded" jobs, which every server held started and finished).
func TestSnapshotIsOneMoment(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		ctx := context.Background()
		c := b.Client
		c.HSet(ctx, "j1", "url", "https://example.com/", "queued_at", "1")
		c.RPush(ctx, "pending", "j0", "j1")
		for i := 0; i < 20; i++ {
			c.Set(ctx, fmt.Sprintf("other%d", i), "x", 0)
		}
		c.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: 2, Member: "b"})
		c.SAdd(ctx, "s", "b", "a")
		c.Set(ctx, "ttl", "v", time.Hour)
		rc := redis.NewClient(c.Options())
		defer rc.Close()
		other := redis.NewClient(c.Options())
		defer other.Close()
		done := false
		rc.AddHook(takeDuring{other: other, done: &done})
		d, err := Snapshot(ctx, rc)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		h, _ := d["j1"].Value.(map[string]string)
		q, _ := d["pending"].Value.([]string)
		started, queued := h["started_at"] != "", slices.Contains(q, "j1")
		if started == queued {
			t.Errorf("j1 read started=%v and queued=%v: hash %v, pending %v", started, queued, h, q)
		}
		// Read again with nothing running: the take above may have come
		// after the script (the server had it cached: EVALSHA ran it) or
		// before it (EVALSHA failed, NOSCRIPT, and EVAL ran it after the
		// take), so d need not be the state now.
		quiet, err := Snapshot(ctx, c)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if want, _ := Dump(ctx, c); !reflect.DeepEqual(mustJSON(t, quiet), mustJSON(t, want)) {
			t.Errorf("Snapshot and Dump differ on a quiet database:\n%s\n%s", mustJSON(t, quiet), mustJSON(t, want))
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

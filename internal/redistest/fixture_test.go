package redistest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFixtureRoundTrip loads the switch-over fixture and writes it again:
// the same keys, types and values; TTLs within the time the test took;
// with shift, a pipeline's report time moves with the clock.
func TestFixtureRoundTrip(t *testing.T) {
	Each(t, func(t *testing.T, b *Backend) {
		ctx := context.Background()
		path := filepath.Join("..", "..", "testdata", "migrate", "upstream.redis.jsonl")
		fx, err := ReadFixture(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(fx.Comments) == 0 || len(fx.Keys) < 20 || fx.Meta.DumpedAt == 0 {
			t.Fatalf("fixture: %d comments, %d keys, meta %+v", len(fx.Comments), len(fx.Keys), fx.Meta)
		}
		if _, err := fx.Load(ctx, b.Client, false); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteFixture(ctx, b.Client, &buf, nil); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(t.TempDir(), "again.jsonl")
		if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := ReadFixture(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Keys) != len(fx.Keys) {
			t.Fatalf("%d keys written back, %d loaded", len(again.Keys), len(fx.Keys))
		}
		for i, k := range fx.Keys {
			a := again.Keys[i]
			if a.Key != k.Key || a.Type != k.Type || !bytes.Equal(a.Value, k.Value) {
				t.Errorf("key %d: wrote %s %s %s, loaded %s %s %s", i, a.Key, a.Type, a.Value, k.Key, k.Type, k.Value)
			}
			if (a.TTLms < 0) != (k.TTLms < 0) || a.TTLms > k.TTLms || k.TTLms-a.TTLms > int64(time.Minute/time.Millisecond) {
				t.Errorf("%s: ttl %d ms after the load, %d in the file", k.Key, a.TTLms, k.TTLms)
			}
		}

		b.Client.FlushDB(ctx)
		by, err := fx.Load(ctx, b.Client, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range fx.Keys {
			if k.Type != "hash" || fx.Hash(k.Key)["nickname"] == "" {
				continue
			}
			got, _ := b.Client.HGet(ctx, k.Key, "ts").Int64()
			was, _ := b.Client.HGet(ctx, k.Key, "id").Result()
			if d := time.Since(time.Unix(got, 0)); d < -2*time.Second || d > 2*time.Hour+time.Minute {
				t.Errorf("pipeline %s: ts %d is %v ago after a shift of %v", was, got, d, by)
			}
		}
	})
}

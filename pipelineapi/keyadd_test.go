package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"reflect"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestKeyUsableOnceAdded: a key registered (archivebot pipeline-key add
// writes it to Redis and returns) is known to the node's next request,
// whatever the periodic refresh: here it never comes. A key revoked and
// added again likewise. The old node answered 401 unknown_key until its
// next refresh (250 ms by default).
func TestKeyUsableOnceAdded(t *testing.T) {
	eachHarness(t, Options{KeyRefresh: 1 << 62}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		pub, priv, _ := ed25519.GenerateKey(nil)
		if err := h.store.AddPipelineKey(ctx, "fresh", wire.FormatPublicKey(pub)); err != nil {
			t.Fatal(err)
		}
		c, _ := client.New(h.hs.URL, "fresh", priv)
		h.queue("j1", store.KeyPending)
		if j, err := c.Take(ctx, wire.TakeRequest{}); err != nil || j == nil {
			t.Fatalf("the first take of a key just added: %v %v", j, err)
		}
		if err := h.store.RevokePipelineKey(ctx, "fresh"); err != nil {
			t.Fatal(err)
		}
		_, err := c.Take(ctx, wire.TakeRequest{})
		// Still known as active until a refresh: the take script refuses
		// a revoked key itself.
		if err == nil {
			t.Fatal("a take with a revoked key succeeded")
		}
		pub2, priv2, _ := ed25519.GenerateKey(nil)
		if err := h.store.AddPipelineKey(ctx, "other", wire.FormatPublicKey(pub2)); err != nil {
			t.Fatal(err)
		}
		c2, _ := client.New(h.hs.URL, "other", priv2)
		h.queue("j2", store.KeyPending)
		if j, err := c2.Take(ctx, wire.TakeRequest{}); err != nil || j == nil {
			t.Fatalf("a second key just added: %v %v", j, err)
		}
	})
}

// TestFlushedSeesBatchedWrites: the harness's "nothing written" check
// (sameDump) waits on a flush pass, not a fixed sleep: a batched write is
// seen even when the periodic flush never runs. The old check slept
// 3 × FlushInterval (150 ms) and compared, whatever had been written by
// then.
func TestFlushedSeesBatchedWrites(t *testing.T) {
	eachHarness(t, Options{FlushInterval: 1 << 62}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		before := h.dump()
		if _, err := c.Update(ctx, "j", wire.UpdateRequest{Incr: map[string]int64{"bytes_downloaded": 10}}); err != nil {
			t.Fatal(err)
		}
		if after := h.dump(); !reflect.DeepEqual(after[store.KeyJob("j")], before[store.KeyJob("j")]) {
			t.Fatal("the update was written at once; this test needs a batched write")
		}
		h.flushed()
		if v, _ := b.Client.HGet(ctx, store.KeyJob("j"), "bytes_downloaded").Result(); v != "10" {
			t.Fatalf("after flushed: bytes_downloaded %q, want 10", v)
		}
	})
}

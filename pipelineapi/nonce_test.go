package pipelineapi

import (
	"context"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// TestNoncePrunedByRequestTime: node B's clock runs 90 s
// ahead of node A's. A request stamped between both clocks is accepted by
// A; a later request to B (stamped by the pipeline's clock) must not
// prune A's nonce while A would still accept a replay of it. Before,
// nonces were pruned by the clock of the node running the script, so B
// dropped it and A accepted the replay after a takeover.
func TestNoncePrunedByRequestTime(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		real := time.Unix(1764601200, 0)
		// 80 s after the first request, B leads and serves the next.
		later := 80 * time.Second
		aNow := real
		nodeA := store.New(b.Client, store.WithClock(func() time.Time { return aNow }))
		nodeB := store.New(b.Client, store.WithClock(func() time.Time { return real.Add(90*time.Second + later) }))
		pipeline := real.Add(45 * time.Second) // within the skew of both nodes
		if r, err := nodeA.CheckNonce(ctx, "alpha", "n1", pipeline.Unix(), NonceWindow, MaxNonces); err != nil || r != store.NonceRecorded {
			t.Fatalf("first use on A: %v %v", r, err)
		}
		// B serves the pipeline's next request.
		if r, err := nodeB.CheckNonce(ctx, "alpha", "n2", pipeline.Add(later).Unix(), NonceWindow, MaxNonces); err != nil || r != store.NonceRecorded {
			t.Fatalf("next request on B: %v %v", r, err)
		}
		// A leads again; the first request's stamp is 35 s old by A's
		// clock, within the skew: its replay must be refused.
		aNow = real.Add(later)
		if r, err := nodeA.CheckNonce(ctx, "alpha", "n1", pipeline.Unix(), NonceWindow, MaxNonces); err != nil || r != store.NonceReplayed {
			t.Fatalf("replay on A after B pruned: %v %v, want NonceReplayed", r, err)
		}
	})
}

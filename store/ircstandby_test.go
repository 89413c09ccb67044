package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestIRCNodesDoNotAccumulate: a node id is by default hostname-pid, a
// new one at every restart, and each says in archivebot:irc:nodes that it
// reports IRC readiness. A node that withdraws (its connection dropped,
// its shutdown) and one whose report expired (killed) leave the set, so
// it does not grow with every restart, and every node's check reads only
// the nodes that may be ready.
func TestIRCNodesDoNotAccumulate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		for i := range 50 {
			node := fmt.Sprintf("host-%d", 1000+i)
			if err := s.SetIRCReady(ctx, node, true, time.Minute); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				// A clean shutdown withdraws.
				if err := s.SetIRCReady(ctx, node, false, time.Minute); err != nil {
					t.Fatal(err)
				}
			} else {
				// kill -9: its report expires.
				b.Client.Del(ctx, store.KeyIRCReady(node))
			}
		}
		if err := s.SetIRCReady(ctx, "host-live", true, time.Minute); err != nil {
			t.Fatal(err)
		}
		ready, err := s.IRCReadyNodes(ctx, "host-self")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ready, []string{"host-live"}) {
			t.Errorf("ready nodes %q, want [host-live]", ready)
		}
		if n := b.Client.SCard(ctx, store.KeyIRCNodes).Val(); n != 1 {
			t.Errorf("%s holds %d nodes after 50 restarts, want 1 (the live one): %q", store.KeyIRCNodes, n, b.Client.SMembers(ctx, store.KeyIRCNodes).Val())
		}
	})
}

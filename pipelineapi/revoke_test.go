package pipelineapi

import (
	"context"
	"errors"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// waitingTakes is how many takes of key wait for a job.
func (h *harness) waitingTakes(key string) int {
	t := h.srv.currentTerm()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keyStateLocked(key).waiting
}

// TestRevocationEndsWaitingTakes (finding 4): long-poll takes already
// waiting when their key is revoked end with revoked_key, and a job
// queued after the revocation stays queued. Before, the polls open at the
// revocation took every job queued in the next 30 s.
func TestRevocationEndsWaitingTakes(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		const polls = 5
		errs := make(chan error, polls)
		for range polls {
			go func() {
				j, err := c.Take(ctx, wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
				if err == nil && j != nil {
					err = errors.New("took " + j.Ident + " after the revocation")
				}
				errs <- err
			}()
		}
		testproc.Eventually(t, "the takes to wait", func() bool { return h.waitingTakes("alpha") == polls })
		if err := h.store.RevokePipelineKey(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(t, "the node to see the revocation", func() bool { _, r := h.srv.currentTerm().publicKey("alpha"); return r })
		h.queue("late", store.KeyPending)
		for range polls {
			wantCode(t, <-errs, 401, "revoked_key")
		}
		if n, _ := b.Client.LLen(ctx, store.KeyPending).Result(); n != 1 {
			t.Errorf("pending holds %d jobs, want the one queued after the revocation", n)
		}
	})
}

// TestTakeScriptChecksKey: the take script itself refuses a key that is
// no longer registered with the public key the request was verified
// with, whatever the node's view of the keys: revoked, or replaced.
func TestTakeScriptChecksKey(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.NewStore(b.Client)
		if err := st.AddPipelineKey(ctx, "alpha", "ed25519:old"); err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, b: b, store: st}
		h.queue("j", store.KeyPending)
		if err := st.AddPipelineKey(ctx, "alpha", "ed25519:new"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.APITake(ctx, "alpha", "ed25519:old", []string{store.KeyPending}); !errors.Is(err, store.ErrKeyRevoked) {
			t.Errorf("take with a replaced key: %v, want ErrKeyRevoked", err)
		}
		if err := st.RevokePipelineKey(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.APITake(ctx, "alpha", "ed25519:new", []string{store.KeyPending}); !errors.Is(err, store.ErrKeyRevoked) {
			t.Errorf("take with a revoked key: %v, want ErrKeyRevoked", err)
		}
		if n, _ := b.Client.LLen(ctx, store.KeyPending).Result(); n != 1 {
			t.Errorf("pending holds %d jobs, want 1: a revoked key took one", n)
		}
	})
}

package pipelineapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// waitingTakes is how many takes of key wait for a job.
func (h *harness) waitingTakes(key string) int {
	t := h.srv.currentTerm()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keyStateLocked(key).waiting
}

// TestRevocationEndsWaitingTakes: long-poll takes already
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
		st := store.New(b.Client)
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

// TestWaitingTakesCapped: at most max_waiting_takes takes of
// a key wait at once; one more is refused with 429, says why, and is
// counted; a take that does not wait still goes through.
func TestWaitingTakesCapped(t *testing.T) {
	eachHarness(t, Options{MaxWaitingTakes: 2}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		got := make(chan string, 2)
		for range 2 {
			go func() {
				j, err := c.Take(ctx, wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
				if err != nil || j == nil {
					got <- fmt.Sprint("error: ", err)
					return
				}
				got <- j.Ident
			}()
		}
		testproc.Eventually(t, "two takes waiting", func() bool { return h.waitingTakes("alpha") == 2 })
		n0 := refusals("alpha", "waiting_takes")
		_, err := c.Take(ctx, wire.TakeRequest{WaitMS: 1000})
		wantCode(t, err, 429, "rate_limited")
		if e := err.(*client.Error); !strings.Contains(e.Reason, "max_waiting_takes") {
			t.Errorf("the refusal does not say which limit: %q", e.Reason)
		}
		if refusals("alpha", "waiting_takes") != n0+1 {
			t.Errorf("the refusal is not counted")
		}
		if j, err := c.Take(ctx, wire.TakeRequest{}); err != nil || j != nil {
			t.Errorf("a take without wait: %v %v, want no job and no error", j, err)
		}
		h.queue("a", store.KeyPending)
		h.queue("b", store.KeyPending)
		for range 2 {
			if id := <-got; id != "a" && id != "b" {
				t.Errorf("a waiting take: %s", id)
			}
		}
	})
}

// TestWaitingTakeWokenByQueue: a job queued through the node
// wakes a waiting take at once instead of the take polling Redis (here
// the poll is an hour: only the wake can deliver the job within the
// test's bound; the old loop polled every 250 ms).
func TestWaitingTakeWokenByQueue(t *testing.T) {
	eachHarness(t, Options{TakePoll: time.Hour}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("alpha")
		got := make(chan string, 1)
		go func() {
			j, err := c.Take(ctx, wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
			if err != nil || j == nil {
				got <- fmt.Sprint("error: ", err)
				return
			}
			got <- j.Ident
		}()
		testproc.Eventually(t, "the take waiting", func() bool { return h.waitingTakes("alpha") == 1 })
		h.queue("woken", store.KeyPending)
		select {
		case id := <-got:
			if id != "woken" {
				t.Fatalf("the waiting take: %s", id)
			}
		case <-time.After(testproc.WaitFor):
			t.Fatalf("the waiting take was not woken by the queued job within %v", testproc.WaitFor)
		}
	})
}

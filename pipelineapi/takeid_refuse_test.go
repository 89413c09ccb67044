package pipelineapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// A bad take_id is refused with a reason, at once (a 4xx is not
// retried), and nothing is written.
func TestTakeBadTakeIDRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		lose := &loseTake{}
		c := h.addKey("pipe-1", client.WithHTTPClient(&http.Client{Transport: lose}))
		h.queue("j1", store.KeyPending)
		for _, id := range []string{"short", strings.Repeat("x", 65), "has space", "dots.are.out", "ünïcode-id"} {
			before := h.dump()
			lose.mu.Lock()
			lose.takes = 1 // answers are not lost here
			lose.mu.Unlock()
			_, err := c.Take(ctx, wire.TakeRequest{TakeID: id})
			wantCode(t, err, http.StatusBadRequest, "bad_request")
			if e := err.(*client.Error); !strings.Contains(e.Reason, "take_id") {
				t.Fatalf("take_id %q: reason %q does not name take_id", id, e.Reason)
			}
			if n, _ := lose.sent(); n != 2 {
				t.Fatalf("take_id %q: sent %d times, want once (a refusal is not retried)", id, n-1)
			}
			h.sameDump(before, "a take with take_id "+id)
			if n := b.Client.Exists(ctx, store.KeyPipelineKeyTakeIDs("pipe-1"), store.KeyPipelineKeyTakeIDsAt("pipe-1")).Val(); n != 0 {
				t.Fatalf("take_id %q: the take_ids were written", id)
			}
		}
		lose.mu.Lock()
		lose.takes = 1
		lose.mu.Unlock()
		if j, err := c.Take(ctx, wire.TakeRequest{TakeID: "Good_take-ID_1"}); err != nil || j == nil || j.Ident != "j1" {
			t.Fatalf("take with a good take_id: %+v %v", j, err)
		}
	})
}

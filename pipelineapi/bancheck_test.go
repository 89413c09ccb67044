package pipelineapi

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// download is a wpull download log entry with response code code.
func download(code int, isError bool) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"download","url":"http://example.com/x","response_code":%d,"is_error":%t}`, code, isError))
}

func adminNotices(t *testing.T, h *harness) []store.AdminNotice {
	t.Helper()
	var out []store.AdminNotice
	for _, s := range h.b.Client.LRange(context.Background(), store.KeyAdminNotices, 0, -1).Val() {
		var n store.AdminNotice
		if err := json.Unmarshal([]byte(s), &n); err != nil {
			t.Fatalf("admin notice %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

// TestBanLineOnce: when the first N responses of a job are all errors,
// one line goes to the job's channel through the admin notices, naming
// the job, the pipeline, the commonest error and the site; more errors,
// and a node that checks again (a restart, a new leader), add nothing. A
// job with one good response among its first N gets no line.
func TestBanLineOnce(t *testing.T) {
	eachHarness(t, Options{BanCheck: 5}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "job1")
		update := func(ident string, log ...json.RawMessage) {
			t.Helper()
			if _, err := c.Update(ctx, ident, wire.UpdateRequest{Log: log}); err != nil {
				t.Fatal(err)
			}
		}
		stdout := json.RawMessage(`{"type":"stdout","message":"hello"}`)
		update("job1", download(403, true), stdout, download(403, true), download(403, true))
		if n := adminNotices(t, h); len(n) != 0 {
			t.Fatalf("after 3 of 5 responses: notices %v", n)
		}
		update("job1", download(0, true), download(403, true), download(500, true))
		want := store.AdminNotice{Channel: "#chan",
			Text: "Job job1 on alpha: the first 5 responses were errors (4× 403); alpha may be banned from example.com"}
		if n := adminNotices(t, h); len(n) != 1 || n[0] != want {
			t.Fatalf("notices %+v, want one %+v", n, want)
		}
		update("job1", download(403, true), download(503, true), download(403, true))
		update("job1", download(403, true), download(403, true), download(403, true), download(403, true), download(403, true))
		// A node checking again, as after a restart or a leader change.
		state, _, err := h.store.BanCheck(ctx, "job1", "alpha", "example.com", 5, []string{"403", "403", "403", "403", "403"})
		if err != nil || state != store.BanDone {
			t.Fatalf("check again: %q %v", state, err)
		}
		if n := adminNotices(t, h); len(n) != 1 {
			t.Fatalf("notices after more errors: %+v", n)
		}

		// One good response among the first five: never a line.
		h.queue("job2", store.KeyPending)
		if j, err := c.Take(ctx, wire.TakeRequest{}); err != nil || j == nil || j.Ident != "job2" {
			t.Fatalf("take job2: %v %v", j, err)
		}
		update("job2", download(403, true), download(200, false), download(403, true))
		update("job2", download(403, true), download(403, true), download(403, true), download(403, true))
		if n := adminNotices(t, h); len(n) != 1 {
			t.Fatalf("notices after job2: %+v", n)
		}
		if v := b.Client.HGet(ctx, store.KeyBanCheck("job2"), "state").Val(); v != store.BanClear {
			t.Errorf("job2's check state %q, want clear", v)
		}
	})
}

// TestBanLineOff: BanCheck < 0 switches the check off.
func TestBanLineOff(t *testing.T) {
	eachHarness(t, Options{BanCheck: -1}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "job1")
		for range 20 {
			if _, err := c.Update(ctx, "job1", wire.UpdateRequest{Log: []json.RawMessage{download(403, true)}}); err != nil {
				t.Fatal(err)
			}
		}
		if n := adminNotices(t, h); len(n) != 0 {
			t.Fatalf("notices %+v with the check off", n)
		}
		if b.Client.Exists(ctx, store.KeyBanCheck("job1")).Val() != 0 {
			t.Error("the check wrote with the check off")
		}
	})
}

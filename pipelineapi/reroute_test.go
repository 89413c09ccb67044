package pipelineapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestRerouteByAnotherClient: a held job rerouted by another store client
// (the admin CLI, the other node) is released on its holder's control
// stream, the holder's update is refused as for a job it does not hold,
// and the next take goes to another key while the holder, now avoiding
// the site, skips the job at the head of the queue.
func TestRerouteByAnotherClient(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		alpha := h.holding("alpha", "j") // http://example.com/j
		beta := h.addKey("beta")
		if err := h.store.Register(ctx, store.NewJob{Ident: "k", URL: "http://other.org/", FetchDepth: "inf",
			Slug: "other.org-inf", StartedBy: "nick", StartedIn: "#chan", Queue: store.KeyPending}); err != nil {
			t.Fatal(err)
		}
		events := make(chan client.Event, 16)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go alpha.Control(sctx, func(ev client.Event) error { events <- ev; return nil })
		// The stream is open once the held job's settings arrive.
		select {
		case ev := <-events:
			if ev.Name != wire.EventSettings {
				t.Fatalf("first event %s %s", ev.Name, ev.Data)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no settings event")
		}
		if _, err := alpha.Update(ctx, "j", wire.UpdateRequest{Incr: map[string]int64{"bytes_downloaded": 10}}); err != nil {
			t.Fatal(err)
		}

		other := redis.NewClient(b.Client.Options())
		defer other.Close()
		r, err := store.New(other).Reroute(ctx, "j", "", "op")
		if err != nil {
			t.Fatal(err)
		}
		if r.From != "alpha" || r.Rule != "example.com" {
			t.Fatalf("reroute %+v", *r)
		}

		deadline := time.After(10 * time.Second)
		for released := false; !released; {
			select {
			case ev := <-events:
				if ev.Name != wire.EventReleased {
					continue // a settings event may come first
				}
				var rel wire.Released
				if err := json.Unmarshal(ev.Data, &rel); err != nil || rel.Ident != "j" || !strings.Contains(rel.Reason, "rerouted") {
					t.Fatalf("released event %s (%v)", ev.Data, err)
				}
				released = true
			case <-deadline:
				t.Fatal("the holder was not told on its control stream that the job was taken back")
			}
		}
		_, err = alpha.Update(ctx, "j", wire.UpdateRequest{Incr: map[string]int64{"bytes_downloaded": 10}})
		wantCode(t, err, 403, "not_held")
		_, err = alpha.Done(ctx, "j")
		wantCode(t, err, 403, "not_held")

		if j, err := alpha.Take(ctx, wire.TakeRequest{}); err != nil || j == nil || j.Ident != "k" {
			t.Fatalf("alpha took %+v %v, want k (it avoids example.com now)", j, err)
		}
		j, err := beta.Take(ctx, wire.TakeRequest{})
		if err != nil || j == nil || j.Ident != "j" {
			t.Fatalf("beta took %+v %v, want j (at the head)", j, err)
		}
		if j.Fields["bytes_downloaded"] != "" {
			t.Errorf("the new run starts with bytes_downloaded %q", j.Fields["bytes_downloaded"])
		}
		// The old holder's counters, batched before the reroute, did not
		// land on the new run.
		h.flushed()
		if v, _ := b.Client.HGet(ctx, store.KeyJob("j"), "bytes_downloaded").Result(); v != "" {
			t.Errorf("bytes_downloaded %q on beta's run", v)
		}
	})
}

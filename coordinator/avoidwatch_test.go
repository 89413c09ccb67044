package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAllAvoidLineOnce: a queued job whose site every connected pipeline
// avoids gets one line in its channel (through the admin notices), however
// many cycles run; a job some pipeline may take gets none, and neither
// does the avoided job while one connected pipeline does not avoid it.
func TestAllAvoidLineOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.New(b.Client)
		for _, j := range []store.NewJob{
			{Ident: "avoided", URL: "https://shop.squarespace.com/", StartedBy: "erin", StartedIn: "#a", Queue: store.KeyPending, FetchDepth: "inf"},
			{Ident: "free", URL: "http://one.example.com/", StartedBy: "erin", StartedIn: "#a", Queue: store.KeyPending, FetchDepth: "inf"},
		} {
			if err := st.Register(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []string{"pipe-a", "pipe-b"} {
			if err := st.AddPipelineKey(ctx, k, "ed25519:"+k); err != nil {
				t.Fatal(err)
			}
			if err := st.APIReport(ctx, k, map[string]string{"api_key": k, "nickname": k, "id": store.APIPipelineKey(k)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.SetPipelineKeyAvoid(ctx, "pipe-a", []string{"squarespace.com"}); err != nil {
			t.Fatal(err)
		}
		w := NewAvoidWatcher(st, nil)
		notices := func() []store.AdminNotice {
			var out []store.AdminNotice
			for _, s := range b.Client.LRange(ctx, store.KeyAdminNotices, 0, -1).Val() {
				var n store.AdminNotice
				if err := json.Unmarshal([]byte(s), &n); err != nil {
					t.Fatal(err)
				}
				out = append(out, n)
			}
			return out
		}
		if err := w.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := notices(); len(n) != 0 {
			t.Fatalf("pipe-b may take it, yet: %+v", n)
		}
		if err := st.SetPipelineKeyAvoidSelf(ctx, "pipe-b", []string{"shop.squarespace.com"}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := w.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := store.AdminNotice{Channel: "#a", Text: "Job avoided is waiting: every pipeline avoids " +
			"squarespace.com (pipe-a, pipe-b); no pipeline will take it until one may crawl shop.squarespace.com"}
		if n := notices(); len(n) != 1 || n[0] != want {
			t.Fatalf("notices %+v, want one %+v", n, want)
		}
		// A watcher of another term (a restart, a new leader) says nothing more.
		if err := NewAvoidWatcher(st, nil).runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := notices(); len(n) != 1 {
			t.Fatalf("notices after a second watcher: %+v", n)
		}
	})
}

// TestAllAvoidLinePerSite: a stranger who queues 25 jobs on a site every
// pipeline avoids gets one line in the channel for the site and period,
// not one per job (which also spelled out the pipelines' avoid lists job
// after job); the other jobs are marked as told. The old watcher said 25.
func TestAllAvoidLinePerSite(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.New(b.Client)
		for i := range 25 {
			j := store.NewJob{Ident: fmt.Sprintf("sq%02d", i), URL: fmt.Sprintf("https://s%d.squarespace.com/", i),
				StartedBy: "mallory", StartedIn: "#a", Queue: store.KeyPendingAO, FetchDepth: "inf"}
			if err := st.Register(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.AddPipelineKey(ctx, "pipe-a", "ed25519:pipe-a"); err != nil {
			t.Fatal(err)
		}
		if err := st.APIReport(ctx, "pipe-a", map[string]string{"api_key": "pipe-a", "nickname": "pipe-a", "id": store.APIPipelineKey("pipe-a")}); err != nil {
			t.Fatal(err)
		}
		if err := st.SetPipelineKeyAvoid(ctx, "pipe-a", []string{"squarespace.com"}); err != nil {
			t.Fatal(err)
		}
		w := NewAvoidWatcher(st, nil)
		for range 2 {
			if err := w.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := b.Client.LLen(ctx, store.KeyAdminNotices).Val(); n != 1 {
			t.Fatalf("%d lines for 25 jobs on one avoided site, want 1", n)
		}
		// A new period: one more line (for a job not told yet), not 24.
		b.Client.Del(ctx, store.KeyAllAvoidSite("squarespace.com"))
		j := store.NewJob{Ident: "sqlate", URL: "https://late.squarespace.com/", StartedBy: "mallory", StartedIn: "#a",
			Queue: store.KeyPendingAO, FetchDepth: "inf"}
		if err := st.Register(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := w.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.LLen(ctx, store.KeyAdminNotices).Val(); n != 2 {
			t.Fatalf("%d lines after the period, want 2", n)
		}
	})
}

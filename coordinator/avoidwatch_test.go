package coordinator

import (
	"context"
	"encoding/json"
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

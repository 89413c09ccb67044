package web

import (
	"context"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// /jobs/IDENT of a queued job carries what holds it, as !status says it:
// here a pause (its jobs wait aside, still in their place) and a
// pipeline that takes straight from Redis.
func TestJobWaitingFields(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f := newFixture(t, b)
		h := f.srv.Handler()
		if err := f.store.PauseQueue(context.Background(), "pending", "JAA", "deploy"); err != nil {
			t.Fatal(err)
		}
		r := get(t, h, "/jobs/"+f.pend2, "")
		expect(t, r, 200, ctJSON)
		var v JobView
		decode(t, r, &v)
		w := v.Waiting
		if v.State != StateQueued || v.Queue != "pending" || v.Position != 2 || w == nil || w.Paused == nil ||
			w.Paused.By != "JAA" || w.Paused.Reason != "deploy" || w.Paused.Queue != "pending" || w.LegacyPipelines < 1 {
			t.Fatalf("/jobs of a job in a paused queue: %+v, waiting %+v", v, w)
		}
		r = get(t, h, "/status", "")
		var st statusBody
		decode(t, r, &st)
		if p, ok := st.Paused["pending"]; !ok || p.By != "JAA" || st.Pending != 2 {
			t.Fatalf("/status while paused: %+v", st)
		}
	})
}

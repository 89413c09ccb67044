package tweeter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// With a digest schedule, a queue that outruns the budget waits for the
// schedule's time; then digests go out until it no longer outruns it.
func TestDigestSchedule(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		clock := newClock(time.Unix(1_700_000_000, 0))
		p := &recordingPoster{clock: clock}
		r := newRig(t, b, tweeter.Config{Poster: p, XBudget: 3, XWindow: time.Hour, DigestSchedule: "@hourly", Now: clock.Now})
		r.storeNow = clock.Now
		r.queueURL(t, "https://a.example/", "https://b.example/", "https://c.example/", "https://d.example/")
		if out := r.runOnce(t); out != tweeter.Paused || len(p.posts) != 0 {
			t.Fatalf("before the schedule: %v, %d posts; want paused, none", out, len(p.posts))
		}
		r.tw.DigestsDue()
		if out := r.runOnce(t); out != tweeter.Posted || len(p.posts) != 1 || !strings.HasPrefix(p.posts[0].text, "4 more sites queued for archiving: ") {
			t.Fatalf("at the schedule: %v, %+v", out, p.posts)
		}
		if out := r.runOnce(t); out != tweeter.Idle {
			t.Errorf("after the digest: %v", out)
		}
		// Within the budget again: single posts, no schedule needed.
		r.queueURL(t, "https://e.example/")
		if out := r.runOnce(t); out != tweeter.Posted || p.posts[1].text != "Archiving https://e.example/" {
			t.Errorf("within the budget: %v, %+v", out, p.posts)
		}
	})
}

// The daily summary is posted once per UTC day on every network, counted
// in /metrics.
func TestSummary(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		clock := newClock(time.Date(2026, 12, 1, 0, 0, 5, 0, time.UTC))
		p := &recordingPoster{clock: clock}
		f := newFakeMastodon(t)
		r := newRig(t, b, tweeter.Config{Poster: p, Networks: []tweeter.Network{mastoNet(f, 0, nil)}, SummarySchedule: "0 0 * * *", Now: clock.Now})
		r.storeNow = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
		r.queueURL(t, "https://a.example/", "https://b.example/")
		r.storeNow = clock.Now
		before := feedPosts(t, tweeter.NetMastodon, "summary")
		for range 2 {
			if err := r.tw.PostSummary(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		want := "Yesterday (2026-11-30 UTC): 2 sites queued for archiving, 0 jobs ended."
		if len(p.posts) != 1 || p.posts[0].text != want {
			t.Errorf("x posts %+v, want one %q", p.posts, want)
		}
		if got := f.posted(); len(got) != 1 || got[0].Text != want {
			t.Errorf("mastodon posts %+v", got)
		}
		if d := feedPosts(t, tweeter.NetMastodon, "summary") - before; d != 1 {
			t.Errorf("summary counter moved by %v, want 1", d)
		}
	})
}

// feedPosts reads archivebot_feed_posts_total{network, kind} from /metrics'
// registry.
func feedPosts(t *testing.T, network, kind string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "archivebot_feed_posts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["network"] == network && labels["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no archivebot_feed_posts_total{network=%q,kind=%q}", network, kind)
	return 0
}

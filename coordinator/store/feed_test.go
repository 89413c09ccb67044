package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// Two networks progress independently: a text leaves tweets:queue only
// when both have posted it, carried it in a digest or given up on it, and
// goes to tweets:done if either posted it.
func TestFeedNetworksIndependent(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := b.Client
		now := time.Unix(5000, 0)
		s := tweetStore(b, &now)
		nets := store.FeedNets{"x", "mastodon"}
		c.ZAdd(ctx, store.KeyTweetsQueue,
			redis.Z{Score: 10, Member: "a"}, redis.Z{Score: 20, Member: "b"},
			redis.Z{Score: 30, Member: "c"}, redis.Z{Score: 40, Member: "posted elsewhere"})
		c.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: 1, Member: "posted elsewhere"})
		c.HSet(ctx, store.KeyFeedURLs, "a", "https://a.example/")

		v, err := s.FeedView(ctx, nets, "x", time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.FeedItem{{Text: "a", URL: "https://a.example/"}, {Text: "b"}, {Text: "c"}}
		if diff := cmp.Diff(want, v.Items); diff != "" || v.Pending != 3 {
			t.Fatalf("view: pending %d, items (-want +got):\n%s", v.Pending, diff)
		}
		claim := func(net, key string, budget int, digest bool, items ...string) string {
			t.Helper()
			why, err := s.FeedClaim(ctx, net, store.FeedAttempt{Key: key, At: now.UnixMilli(), Post: "post " + key, Items: items, Digest: digest}, budget, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return why
		}
		resolve := func(net, key, outcome, reason string) int {
			t.Helper()
			n, err := s.FeedResolve(ctx, nets, net, key, outcome, reason)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// X posts a singly and b and c in a digest; its budget is 2.
		if why := claim("x", "k1", 2, false, "a"); why != "" {
			t.Fatalf("claim = %q", why)
		}
		if why := claim("x", "k1b", 2, false, "a"); why != store.FeedGone {
			t.Errorf("claiming a text in flight = %q, want gone", why)
		}
		if resolve("x", "k1", store.FeedPosted, "") != 0 {
			t.Error("a left the queue before mastodon handled it")
		}
		if why := claim("x", "k2", 2, true, "b", "c"); why != "" {
			t.Fatalf("claim digest = %q", why)
		}
		if why := claim("x", "k3", 2, false, "c"); why != store.FeedBudget && why != store.FeedGone {
			t.Errorf("third claim in the window = %q, want refused", why)
		}
		resolve("x", "k2", store.FeedPosted, "")
		v, _ = s.FeedView(ctx, nets, "x", time.Hour, 10)
		if v.Pending != 0 || len(v.Items) != 0 || v.Used != 2 {
			t.Errorf("x after posting all: %+v", v)
		}
		// Mastodon is unaffected: everything is still pending there.
		v, _ = s.FeedView(ctx, nets, "mastodon", time.Hour, 10)
		if v.Pending != 3 || v.Used != 0 {
			t.Errorf("mastodon view = %+v, want 3 pending", v)
		}
		// Mastodon: a released attempt is pending again; a fails with a
		// reason; b and c posted.
		claim("mastodon", "m1", 0, false, "a")
		resolve("mastodon", "m1", store.FeedRelease, "")
		if v, _ = s.FeedView(ctx, nets, "mastodon", time.Hour, 10); v.Pending != 3 || v.Used != 0 {
			t.Errorf("after release: %+v", v)
		}
		claim("mastodon", "m2", 0, false, "a")
		if n := resolve("mastodon", "m2", store.FeedFailed, "HTTP 422: too long"); n != 1 {
			t.Errorf("a left the queue %d times, want 1 (x posted it, mastodon gave up)", n)
		}
		if n := resolve("mastodon", "m2", store.FeedPosted, ""); n != -1 {
			t.Errorf("resolving twice = %d, want -1", n)
		}
		claim("mastodon", "m3", 0, false, "b")
		resolve("mastodon", "m3", store.FeedFailed, "gave up")
		claim("mastodon", "m4", 0, false, "c")
		resolve("mastodon", "m4", store.FeedPosted, "")

		if diff := cmp.Diff(map[string]float64{}, zset(t, c, store.KeyTweetsQueue)); diff != "" {
			t.Errorf("queue (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]float64{"a": 5000, "b": 5000, "c": 5000, "posted elsewhere": 1}, zset(t, c, store.KeyTweetsDone)); diff != "" {
			t.Errorf("done (-want +got):\n%s", diff)
		}
		for _, net := range nets {
			if h := hash(t, c, store.KeyFeedState(net)); len(h) != 0 {
				t.Errorf("%s state left behind: %v", net, h)
			}
		}
		if h := hash(t, c, store.KeyFeedURLs); len(h) != 0 {
			t.Errorf("urls left behind: %v", h)
		}
		d, err := s.FeedDigests(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]store.FeedDigest{{Key: "k2", Post: "post k2", Items: []string{"b", "c"}}}, d); diff != "" {
			t.Errorf("digests (-want +got):\n%s", diff)
		}
		f, err := s.FeedFailures(ctx, "mastodon")
		if err != nil {
			t.Fatal(err)
		}
		wantF := []store.FeedFailure{{Text: "a", Reason: "HTTP 422: too long"}, {Text: "b", Reason: "gave up"}}
		if diff := cmp.Diff(wantF, f); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
	})
}

// Given up on every network, a text goes to archivebot:tweets:failed; the
// budget window frees posts as it slides.
func TestFeedAllGaveUpAndWindow(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := b.Client
		now := time.Unix(5000, 0)
		s := tweetStore(b, &now)
		nets := store.FeedNets{"bluesky"}
		c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: 10, Member: "a"}, redis.Z{Score: 20, Member: "b"})
		a := store.FeedAttempt{Key: "k1", At: now.UnixMilli(), Items: []string{"a"}}
		if why, _ := s.FeedClaim(ctx, "bluesky", a, 1, time.Hour); why != "" {
			t.Fatal(why)
		}
		if _, err := s.FeedResolve(ctx, nets, "bluesky", "k1", store.FeedFailed, "401"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]float64{"a": 5000}, zset(t, c, store.KeyTweetsFailed)); diff != "" {
			t.Errorf("failed (-want +got):\n%s", diff)
		}
		b2 := store.FeedAttempt{Key: "k2", At: now.UnixMilli(), Items: []string{"b"}}
		if why, _ := s.FeedClaim(ctx, "bluesky", b2, 1, time.Hour); why != store.FeedBudget {
			t.Errorf("claim in a spent window = %q, want budget", why)
		}
		now = now.Add(time.Hour + time.Second)
		b2.At = now.UnixMilli()
		if why, _ := s.FeedClaim(ctx, "bluesky", b2, 1, time.Hour); why != "" {
			t.Errorf("claim after the window = %q, want claimed", why)
		}
		v, err := s.FeedView(ctx, nets, "bluesky", time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Unresolved) != 1 || v.Unresolved[0].Key != "k2" || v.Used != 1 {
			t.Errorf("view = %+v, want k2 unresolved and one post used", v)
		}
	})
}

package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

const tweetURL = "https://example.com/"

var tweetText = "Archiving " + tweetURL

// tweetStore returns a store on b whose clock reads *now.
func tweetStore(b *redistest.Backend, now *time.Time) *store.Store {
	return store.New(b.Client, store.WithClock(func() time.Time { return *now }))
}

func zset(t *testing.T, c *redis.Client, key string) map[string]float64 {
	t.Helper()
	zs, err := c.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, z := range zs {
		m[z.Member.(string)] = z.Score
	}
	return m
}

func hash(t *testing.T, c *redis.Client, key string) map[string]string {
	t.Helper()
	m, err := c.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTweetQueue(t *testing.T) {
	running := map[string]string{"url": tweetURL, "started_at": "1732900000.5", "pipeline_id": "pipeline:x"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range running {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		job   map[string]string // nil: no record
		seed  func(ctx context.Context, c *redis.Client)
		want  store.TweetQueueResult
		queue map[string]float64
	}{
		{name: "running", job: running, want: store.TweetQueued, queue: map[string]float64{tweetText: 1000}},
		{name: "no record", want: store.TweetNotRunning, queue: map[string]float64{}},
		{name: "queued, not started", job: map[string]string{"url": tweetURL}, want: store.TweetNotStarted, queue: map[string]float64{}},
		{name: "finished", job: with("finished_at", "1732900100"), want: store.TweetNotRunning, queue: map[string]float64{}},
		{name: "aborted", job: with("aborted", "true"), want: store.TweetNotRunning, queue: map[string]float64{}},
		{name: "abort requested", job: with("abort_requested", "true"), want: store.TweetNotRunning, queue: map[string]float64{}},
		{name: "failed", job: with("failed", "true"), want: store.TweetNotRunning, queue: map[string]float64{}},
		{name: "other url", job: with("url", "https://example.org/"), want: store.TweetNotRunning, queue: map[string]float64{}},
		{
			name: "already queued", job: running, want: store.TweetKnown,
			seed: func(ctx context.Context, c *redis.Client) {
				c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: 5, Member: tweetText})
			},
			queue: map[string]float64{tweetText: 5},
		},
		{
			name: "already posted", job: running, want: store.TweetKnown,
			seed: func(ctx context.Context, c *redis.Client) {
				c.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: 5, Member: tweetText})
			},
			queue: map[string]float64{},
		},
		{
			name: "being posted", job: running, want: store.TweetKnown,
			seed: func(ctx context.Context, c *redis.Client) {
				c.HSet(ctx, store.KeyTweetsAttempt, tweetText, "5")
			},
			queue: map[string]float64{},
		},
		{
			name: "given up", job: running, want: store.TweetKnown,
			seed: func(ctx context.Context, c *redis.Client) {
				c.ZAdd(ctx, store.KeyTweetsFailed, redis.Z{Score: 5, Member: tweetText})
			},
			queue: map[string]float64{},
		},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				if err := b.Client.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				now := time.Unix(1000, 0)
				s := tweetStore(b, &now)
				if tc.job != nil {
					b.Client.HSet(ctx, "tweetjob1", tc.job)
				}
				if tc.seed != nil {
					tc.seed(ctx, b.Client)
				}
				got, err := s.QueueTweet(ctx, "tweetjob1", tweetURL, tweetText)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("QueueTweet = %v, want %v", got, tc.want)
				}
				if diff := cmp.Diff(tc.queue, zset(t, b.Client, store.KeyTweetsQueue)); diff != "" {
					t.Errorf("tweets:queue (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// Racing updates for one job queue its text once.
func TestTweetQueueRace(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		now := time.Unix(1000, 0)
		s := tweetStore(b, &now)
		b.Client.HSet(ctx, "tweetjob1", "url", tweetURL, "started_at", "1")
		var wg sync.WaitGroup
		results := make([]store.TweetQueueResult, 20)
		for i := range results {
			wg.Go(func() {
				r, err := s.QueueTweet(ctx, "tweetjob1", tweetURL, tweetText)
				if err != nil {
					t.Error(err)
				}
				results[i] = r
			})
		}
		wg.Wait()
		queued := 0
		for _, r := range results {
			if r == store.TweetQueued {
				queued++
			}
		}
		if queued != 1 {
			t.Errorf("%d of %d racing calls queued the text, want 1: %v", queued, len(results), results)
		}
	})
}

func TestTweetPrune(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := b.Client
		day := int64(24 * 3600)
		now := time.Unix(100*day, 0)
		s := tweetStore(b, &now)
		old, recent := float64(100*day-31*day), float64(100*day-29*day)
		c.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: old, Member: "old"}, redis.Z{Score: recent, Member: "recent"},
			redis.Z{Score: float64(70 * day), Member: "exactly 30 days"})
		c.ZAdd(ctx, store.KeyTweetsFailed, redis.Z{Score: old, Member: "old failure"}, redis.Z{Score: recent, Member: "recent failure"})
		c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: old, Member: "queued long ago"})
		c.HSet(ctx, store.KeyTweetsAttempt, "orphan", int64(old), "queued long ago", int64(old), "fresh orphan", int64(recent))

		got, err := s.PruneTweets(ctx, 30*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(store.PrunedTweets{Done: 1, Failed: 1, Attempts: 1}, got); diff != "" {
			t.Errorf("pruned (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]float64{"recent": recent, "exactly 30 days": float64(70 * day)}, zset(t, c, store.KeyTweetsDone)); diff != "" {
			t.Errorf("done (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]float64{"recent failure": recent}, zset(t, c, store.KeyTweetsFailed)); diff != "" {
			t.Errorf("failed (-want +got):\n%s", diff)
		}
		wantAttempts := map[string]string{"queued long ago": fmt.Sprint(int64(old)), "fresh orphan": fmt.Sprint(int64(recent))}
		if diff := cmp.Diff(wantAttempts, hash(t, c, store.KeyTweetsAttempt)); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
	})
}

func TestWorkingJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		b.Client.LPush(ctx, store.KeyWorking, "a", "b")
		got, err := s.WorkingJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"b", "a"}, got); diff != "" {
			t.Errorf("candidates (-want +got):\n%s", diff)
		}
	})
}

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

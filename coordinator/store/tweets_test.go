package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

const tweetURL = "https://example.com/"

var tweetText = "Archiving " + tweetURL

// tweetStore returns a store on b whose clock reads *now.
func tweetStore(b *redistest.Backend, now *time.Time) *store.Store {
	s := store.NewStore(b.Client)
	s.Now = func() time.Time { return *now }
	return s
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
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
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

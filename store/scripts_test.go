package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestPipelinedScriptsAfterScriptFlush: the reads and marks that send a
// pipeline of EVALSHAs load their script and run again when Redis answers
// NOSCRIPT (a restarted Redis, SCRIPT FLUSH), rather than failing.
func TestPipelinedScriptsAfterScriptFlush(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		b.Client.HSet(ctx, "nsjob", "url", "http://example.com/")
		b.Client.RPush(ctx, store.KeyWorking, "nsjob")
		b.Client.ZAdd(ctx, store.KeyLog("nsjob"), redis.Z{Score: 1, Member: `{"type":"download","url":"http://example.com/1"}`})

		b.Client.ScriptFlush(ctx)
		logs, err := s.RecentLogs(ctx, 10)
		if err != nil || len(logs) != 1 || len(logs[0].Entries) != 1 {
			t.Fatalf("RecentLogs after SCRIPT FLUSH: %+v, %v", logs, err)
		}
		b.Client.ScriptFlush(ctx)
		out, _, err := s.ReadUnbroadcastMany(ctx, []string{"nsjob"}, 10)
		if err != nil || len(out) != 1 || len(out[0].Entries) != 1 {
			t.Fatalf("ReadUnbroadcastMany after SCRIPT FLUSH: %+v, %v", out, err)
		}
		b.Client.ScriptFlush(ctx)
		moved, err := s.MarkBroadcastMany(ctx, []store.BroadcastMark{{Ident: "nsjob", From: "", To: 1, Now: 1}})
		if err != nil || len(moved) != 1 || !moved[0] {
			t.Fatalf("MarkBroadcastMany after SCRIPT FLUSH: %v, %v", moved, err)
		}
	})
}

// TestAnalyzeCommitCAS: a batch read before another analyzer moved the
// bookmark is not committed, so it cannot be counted twice.
func TestAnalyzeCommitCAS(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for i := 1; i <= 10; i++ {
			b.Client.ZAdd(ctx, store.KeyLog("casjob"), redis.Z{Score: float64(i), Member: fmt.Sprintf(`{"type":"download","url":"http://example.com/%d","response_code":200,"ts":1}`, i)})
		}
		b.Client.HSet(ctx, "casjob", "last_analyzed_log_entry", "4", "r2xx", "4")
		before := b.Dump(t)
		keys := []string{"casjob", "casjob_log"}
		for _, stale := range []string{"", "3", "4.0"} {
			res, err := store.AnalyzeCommitScriptForTest.Run(ctx, b.Client, keys, stale, "10", 0, 6, 0, 0, 0, 0, 0, 1000, "0", 0).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int64{0, 0, 0, 0}, res); diff != "" {
				t.Errorf("commit from bookmark %q (-want +got):\n%s", stale, diff)
			}
		}
		if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
			t.Errorf("stale commits changed Redis (-before +after):\n%s", diff)
		}
		res, err := store.AnalyzeCommitScriptForTest.Run(ctx, b.Client, keys, "4", "10", 0, 6, 0, 0, 0, 0, 0, 1000, "0").Int64Slice()
		if err != nil || res[0] != 1 {
			t.Fatalf("commit from the current bookmark: %v %v", res, err)
		}
		got, _ := b.Client.HMGet(ctx, "casjob", "last_analyzed_log_entry", "r2xx", "r1xx").Result()
		if diff := cmp.Diff([]any{"10", "10", "0"}, got); diff != "" {
			t.Errorf("after the commit (-want +got):\n%s", diff)
		}
	})
}

// A script that writes checks the type of every key it writes before its
// first write (scripts/lib.lua, expect): Redis does not roll a script back,
// so a key of the wrong type met half-way would leave half a change.
// What pipelines write is untrusted, and on upstream's protocol every
// pipeline can write any key. Each case sets up a state the script would
// change, gives one key the wrong type, and wants an error and no change.
func TestWriteScriptsCheckTypesFirst(t *testing.T) {
	const ident = "wtjob"
	now := time.Unix(1_700_000_000, 0)
	old := float64(now.Add(-48 * time.Hour).Unix())
	running := func(ctx context.Context, s *store.Store, c *redis.Client) {
		c.HSet(ctx, store.KeyJob(ident), "url", tweetURL, "started_at", "1")
	}
	nets := store.FeedNets{"x", "mastodon"}
	claimed := func(ctx context.Context, s *store.Store, c *redis.Client) {
		c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: 1, Member: "a"})
		c.HSet(ctx, store.KeyFeedState("mastodon"), "a", "p:1")
		if why, err := s.FeedClaim(ctx, "x", store.FeedAttempt{Key: "k1", At: now.UnixMilli(), Items: []string{"a"}}, 0, time.Hour); err != nil || why != "" {
			panic(fmt.Sprint("claim: ", why, err))
		}
	}
	var feedKeys []string
	for _, k := range []func(string) string{store.KeyFeedAttempts, store.KeyFeedSent, store.KeyFeedDigests, store.KeyFeedFailed, store.KeyFeedState} {
		feedKeys = append(feedKeys, k("x"))
	}
	cases := []struct {
		name  string
		setup func(ctx context.Context, s *store.Store, c *redis.Client)
		keys  []string
		run   func(ctx context.Context, s *store.Store) error
	}{{
		name:  "tweet_queue",
		setup: running,
		keys: []string{store.KeyTweetsQueue, store.KeyTweetsDone, store.KeyTweetsAttempt,
			store.KeyTweetsFailed, store.KeyFeedURLs},
		run: func(ctx context.Context, s *store.Store) error {
			_, err := s.QueueTweet(ctx, ident, tweetURL, tweetText)
			return err
		},
	}, {
		name: "tweet_prune",
		setup: func(ctx context.Context, s *store.Store, c *redis.Client) {
			c.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: old, Member: "a"})
			c.ZAdd(ctx, store.KeyTweetsFailed, redis.Z{Score: old, Member: "b"})
			c.HSet(ctx, store.KeyTweetsAttempt, "c", old)
		},
		keys: []string{store.KeyTweetsDone, store.KeyTweetsFailed, store.KeyTweetsAttempt, store.KeyTweetsQueue},
		run: func(ctx context.Context, s *store.Store) error {
			_, err := s.PruneTweets(ctx, time.Hour)
			return err
		},
	}, {
		name: "analyze_commit",
		setup: func(ctx context.Context, s *store.Store, c *redis.Client) {
			c.HSet(ctx, store.KeyJob(ident), "url", tweetURL, "finished_at", "1")
			c.ZAdd(ctx, store.KeyLog(ident), redis.Z{Score: 1, Member: "{}"}, redis.Z{Score: 2, Member: "{}"})
		},
		keys: []string{store.KeyLog(ident)},
		run: func(ctx context.Context, s *store.Store) error {
			_, _, err := s.CommitLogCounts(ctx, ident, "", "2", record.LogCounts{R2xx: 2}, 0, false, 0)
			return err
		},
	}, {
		name: "feed_claim",
		setup: func(ctx context.Context, s *store.Store, c *redis.Client) {
			c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: 1, Member: "a"})
			c.ZAdd(ctx, store.KeyFeedSent("x"), redis.Z{Score: 1, Member: "old"})
		},
		keys: []string{store.KeyTweetsQueue, store.KeyFeedAttempts("x"), store.KeyFeedSent("x"), store.KeyFeedState("x")},
		run: func(ctx context.Context, s *store.Store) error {
			_, err := s.FeedClaim(ctx, "x", store.FeedAttempt{Key: "k1", At: now.UnixMilli(), Items: []string{"a"}}, 5, time.Hour)
			return err
		},
	}, {
		name:  "feed_resolve",
		setup: claimed,
		keys: append([]string{store.KeyTweetsQueue, store.KeyTweetsDone, store.KeyTweetsFailed, store.KeyFeedURLs,
			store.KeyFeedState("mastodon")}, feedKeys...),
		run: func(ctx context.Context, s *store.Store) error {
			_, err := s.FeedResolve(ctx, nets, "x", "k1", store.FeedPosted, "")
			return err
		},
	}, {
		name: "feed_prune",
		setup: func(ctx context.Context, s *store.Store, c *redis.Client) {
			c.ZAdd(ctx, store.KeyFeedDigests("x"), redis.Z{Score: old, Member: "d"})
			c.ZAdd(ctx, store.KeyFeedFailed("x"), redis.Z{Score: old, Member: "f"})
			c.ZAdd(ctx, store.KeyFeedSent("x"), redis.Z{Score: 1, Member: "s"})
			c.HSet(ctx, store.KeyFeedURLs, "gone", tweetURL)
		},
		keys: []string{store.KeyFeedDigests("x"), store.KeyFeedFailed("x"), store.KeyFeedSent("x"), store.KeyFeedURLs, store.KeyTweetsQueue},
		run: func(ctx context.Context, s *store.Store) error {
			_, _, err := s.PruneFeed(ctx, "x", time.Hour, time.Hour)
			return err
		},
	}, {
		name: "reap",
		setup: func(ctx context.Context, s *store.Store, c *redis.Client) {
			c.RPush(ctx, store.KeyWorking, ident)
			c.HSet(ctx, store.KeyJob(ident), "heartbeat", "5", "last_acknowledged_heartbeat", "5", "death_timer", "9")
		},
		keys: []string{store.KeyReaperReported},
		run: func(ctx context.Context, s *store.Store) error {
			_, err := s.AdvanceDeathTimers(ctx, 10, false)
			return err
		},
	}}
	for _, tc := range cases {
		for _, key := range tc.keys {
			t.Run(tc.name+"/"+key, func(t *testing.T) {
				storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
					tc.setup(ctx, s, b.Client)
					b.Client.Del(ctx, key)
					b.Client.Set(ctx, key, "junk", 0)
					before := b.Dump(t)
					err := tc.run(ctx, s)
					if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
						t.Errorf("with %s a string: error %v, want WRONGTYPE", key, err)
					}
					if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
						t.Errorf("with %s a string, the script changed Redis (-before +after):\n%s", key, diff)
					}
				}, store.WithClock(func() time.Time { return now }))
			})
		}
	}
}

// TestWriteScriptsNonIntegerFields: a counter field a pipeline overwrote
// with text makes HINCRBY fail; the script must find out before it writes.
func TestWriteScriptsNonIntegerFields(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const ident = "nijob"
		b.Client.HSet(ctx, store.KeyJob(ident), "url", tweetURL, "r1xx", "1", "r2xx", "lots")
		b.Client.ZAdd(ctx, store.KeyLog(ident), redis.Z{Score: 1, Member: "{}"})
		before := b.Dump(t)
		s := store.New(b.Client)
		_, _, err := s.CommitLogCounts(ctx, ident, "", "1", record.LogCounts{R1xx: 1, R2xx: 1}, 0, false, 0)
		if err == nil {
			t.Error("commit onto r2xx = lots: no error")
		}
		if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
			t.Errorf("the commit changed Redis (-before +after):\n%s", diff)
		}
	})
}

// TestReapJunkDeathTimer: a death_timer that is not an integer counts as
// 0; it neither stops the cycle for the other jobs nor keeps the job from
// dying.
func TestReapJunkDeathTimer(t *testing.T) {
	for _, junk := range []string{"soon", "inf", "nan", "-inf", "1.5e400"} {
		t.Run(junk, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				b.Client.RPush(ctx, store.KeyWorking, "junkjob", "goodjob")
				b.Client.HSet(ctx, "junkjob", "heartbeat", "5", "last_acknowledged_heartbeat", "5", "death_timer", junk)
				b.Client.HSet(ctx, "goodjob", "heartbeat", "5", "last_acknowledged_heartbeat", "5", "death_timer", "0")
				s := store.New(b.Client)
				var dead []store.DeadJob
				for i := 0; i < 2; i++ {
					var err error
					if dead, err = s.AdvanceDeathTimers(ctx, 2, false); err != nil {
						t.Fatalf("cycle %d: %v", i+1, err)
					}
				}
				got, _ := b.Client.HGet(ctx, "junkjob", "death_timer").Result()
				good, _ := b.Client.HGet(ctx, "goodjob", "death_timer").Result()
				if got != "2" || good != "2" {
					t.Errorf("death timers after two cycles: junkjob %q goodjob %q, want 2 and 2", got, good)
				}
				if len(dead) != 2 {
					t.Errorf("dead after two cycles at threshold 2: %d jobs, want 2", len(dead))
				}
			})
		})
	}
}

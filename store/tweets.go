package store

// Store operations of the tweeter (see doc/protocol.md, Tweets). The tweeter package owns the
// service; these are the only places that touch tweets:queue, tweets:done
// and the tweeter's own keys.

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Tweet is an entry of tweets:done.
type Tweet struct {
	Text string
	// Score is the UNIX time it was posted, as stored.
	Score float64
}

// RecentTweets returns the newest n entries of tweets:done, newest first.
// One round trip (ZRANGE -n -1 WITHSCORES, as upstream's feed).
func (s *Store) RecentTweets(ctx context.Context, n int) ([]Tweet, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, KeyTweetsDone, int64(-n), -1).Result()
	if err != nil && !s.wrongTypeSkipped(KeyTweetsDone, err) {
		return nil, wrap("read tweets", err)
	}
	out := make([]Tweet, 0, len(zs))
	for i := len(zs) - 1; i >= 0; i-- {
		text, _ := zs[i].Member.(string)
		out = append(out, Tweet{Text: text, Score: zs[i].Score})
	}
	return out, nil
}

// TweetQueueResult says what QueueTweet did.
type TweetQueueResult int

// QueueTweet outcomes.
const (
	// TweetQueued: the text was added to tweets:queue.
	TweetQueued TweetQueueResult = iota
	// TweetKnown: the text is already queued, posted, being posted or was
	// given up on; nothing was written.
	TweetKnown
	// TweetNotStarted: the job has no started_at yet; ask again later.
	TweetNotStarted
	// TweetNotRunning: the job record is gone or was replaced, or the job
	// finished, was aborted (or its abort requested) or failed. It will
	// never be tweeted.
	TweetNotRunning
)

func (r TweetQueueResult) String() string {
	switch r {
	case TweetQueued:
		return "queued"
	case TweetKnown:
		return "known"
	case TweetNotStarted:
		return "not started"
	case TweetNotRunning:
		return "not running"
	}
	return "TweetQueueResult(" + strconv.Itoa(int(r)) + ")"
}

// QueueTweet queues text (made from url, the job's url field) in
// tweets:queue with score now, if the job ident is running and the text is
// not already queued, in tweets:done, being posted or given up on — all in
// one atomic step, so two racing updates cannot queue it twice.
func (s *Store) QueueTweet(ctx context.Context, ident, url, text string) (TweetQueueResult, error) {
	keys := []string{KeyJob(ident), KeyTweetsQueue, KeyTweetsDone, KeyTweetsAttempt, KeyTweetsFailed, KeyFeedURLs}
	n, err := tweetQueueScript.Run(ctx, s.rdb, keys, text, s.Now().Unix(), url).Int()
	if err != nil {
		return 0, wrap("queue tweet for "+ident, err)
	}
	switch n {
	case 1:
		return TweetQueued, nil
	case 0:
		return TweetKnown, nil
	case -1:
		return TweetNotStarted, nil
	case -2:
		return TweetNotRunning, nil
	}
	return 0, fmt.Errorf("queue tweet for %s: unexpected script result %d", ident, n)
}

// PrunedTweets counts what PruneTweets removed.
type PrunedTweets struct {
	Done, Failed, Attempts int64
}

// PruneTweets removes tweets:done and archivebot:tweets:failed entries
// scored before now-maxAge, and attempt records that old whose text is no
// longer queued, in one atomic step.
func (s *Store) PruneTweets(ctx context.Context, maxAge time.Duration) (PrunedTweets, error) {
	cutoff := s.Now().Add(-maxAge).Unix()
	keys := []string{KeyTweetsDone, KeyTweetsFailed, KeyTweetsAttempt, KeyTweetsQueue}
	res, err := tweetPruneScript.Run(ctx, s.rdb, keys, cutoff).Int64Slice()
	if err != nil {
		return PrunedTweets{}, wrap("prune tweets", err)
	}
	if len(res) != 3 {
		return PrunedTweets{}, fmt.Errorf("prune tweets: unexpected script result %v", res)
	}
	return PrunedTweets{Done: res[0], Failed: res[1], Attempts: res[2]}, nil
}

package store

// Store operations of the tweeter (see doc/protocol.md, Tweets). The tweeter package owns the
// service; these are the only places that touch tweets:queue, tweets:done
// and the tweeter's own keys.

import (
	"context"
	_ "embed"
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
	keys := []string{KeyJob(ident), KeyTweetsQueue, KeyTweetsDone, KeyTweetsAttempt, KeyTweetsFailed}
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

// TweetClaim is a queued text taken for posting.
type TweetClaim struct {
	Text string
	// Unresolved is false for a fresh claim: the attempt is now recorded
	// and the caller posts the text, then calls TweetPosted, TweetFailed or
	// ReleaseTweet. It is true when an earlier attempt (at AttemptedAt) was
	// never resolved — the poster crashed or stopped mid-post — so the text
	// may be online already: the caller should not post it again but
	// resolve it, normally with TweetPosted.
	Unresolved  bool
	AttemptedAt time.Time
}

// ClaimTweet takes the oldest queued text that is not yet in tweets:done
// (dropping those that are from the queue) and records the attempt to post
// it before anything is posted. ok is false when nothing is queued.
func (s *Store) ClaimTweet(ctx context.Context) (c TweetClaim, ok bool, err error) {
	keys := []string{KeyTweetsQueue, KeyTweetsDone, KeyTweetsAttempt}
	res, err := tweetClaimScript.Run(ctx, s.rdb, keys, s.Now().Unix()).StringSlice()
	if err != nil {
		return c, false, wrap("claim tweet", err)
	}
	switch {
	case len(res) == 0:
		return c, false, nil
	case len(res) == 2 && res[1] == "claimed":
		return TweetClaim{Text: res[0]}, true, nil
	case len(res) == 3 && res[1] == "attempted":
		c = TweetClaim{Text: res[0], Unresolved: true}
		if sec, err := strconv.ParseInt(res[2], 10, 64); err == nil {
			c.AttemptedAt = time.Unix(sec, 0)
		}
		return c, true, nil
	}
	return c, false, fmt.Errorf("claim tweet: unexpected script result %q", res)
}

// TweetPosted records a claimed text as posted: ZADD tweets:done now text,
// ZREM tweets:queue text and the end of its attempt, atomically.
func (s *Store) TweetPosted(ctx context.Context, text string) error {
	return s.resolveTweet(ctx, "record posted tweet", KeyTweetsDone, text)
}

// TweetFailed records a claimed text as given up: it leaves tweets:queue
// for archivebot:tweets:failed (so it is not queued again until pruned) and
// its attempt ends, atomically.
func (s *Store) TweetFailed(ctx context.Context, text string) error {
	return s.resolveTweet(ctx, "record failed tweet", KeyTweetsFailed, text)
}

func (s *Store) resolveTweet(ctx context.Context, op, dest, text string) error {
	keys := []string{KeyTweetsQueue, dest, KeyTweetsAttempt}
	err := tweetResolveScript.Run(ctx, s.rdb, keys, text, s.Now().Unix()).Err()
	return wrap(op, err)
}

// ReleaseTweet ends the attempt on a claimed text that was certainly not
// posted (the API answered with an error); the text stays queued for a
// later try.
func (s *Store) ReleaseTweet(ctx context.Context, text string) error {
	return wrap("release tweet", s.rdb.HDel(ctx, KeyTweetsAttempt, text).Err())
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

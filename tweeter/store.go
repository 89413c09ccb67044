package tweeter

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Store is the feed's door to the store: the methods of *store.Store the
// tweeter calls (doc/architecture.md, Layers). Its own file in store/ is
// feed.go.
type Store interface {
	Now() time.Time
	FeedClaim(ctx context.Context, net string, a store.FeedAttempt, budget int, window time.Duration) (string, error)
	FeedDay(ctx context.Context, from, to time.Time) (queued, ended int64, err error)
	FeedResolve(ctx context.Context, nets store.FeedNets, net, key, outcome, reason string) (int, error)
	FeedSummaryDay(ctx context.Context, net string) (string, error)
	FeedView(ctx context.Context, nets store.FeedNets, net string, window time.Duration, max int) (store.FeedView, error)
	GetJob(ctx context.Context, ident string) (*record.Job, error)
	PruneFeed(ctx context.Context, net string, maxAge, window time.Duration) (digests, failed int64, err error)
	PruneTweets(ctx context.Context, maxAge time.Duration) (store.PrunedTweets, error)
	QueueTweet(ctx context.Context, ident, url, text string) (store.TweetQueueResult, error)
	SetFeedSummaryDay(ctx context.Context, net, day string) error
	WorkingJobs(ctx context.Context) ([]string, error)
}

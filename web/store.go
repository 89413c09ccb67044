package web

import (
	"context"

	"github.com/archiveteam/archivebot-go/store"
)

// Store is the web API's door to the store: the methods of *store.Store
// the server calls (doc/architecture.md, Layers). The live stream reads
// nothing itself: the firehose (coordinator) hands it what it reads.
type Store interface {
	ActiveJobs(ctx context.Context) ([]store.ActiveJob, error)
	FinishedJobs(ctx context.Context) ([]store.FinishedJob, error)
	Gauges(ctx context.Context) (store.Gauges, error)
	GetPipeline(ctx context.Context, key string) (*store.Pipeline, error)
	IgnoreSets(ctx context.Context, idents []string) (map[string][]string, map[string]bool, error)
	JobDetail(ctx context.Context, ident string) (*store.JobDetail, error)
	Leader(ctx context.Context) (h store.LeaseHolder, ok bool, err error)
	PendingQueues(ctx context.Context) ([]store.Queue, error)
	Ping(ctx context.Context) error
	Pipelines(ctx context.Context) ([]*store.Pipeline, error)
	RecentLogs(ctx context.Context, count int) ([]store.JobLog, error)
	RecentTweets(ctx context.Context, n int) ([]store.Tweet, error)
	StatusCounts(ctx context.Context) (store.StatusCounts, error)
}

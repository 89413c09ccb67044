package web

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Store is the web API's door to the store: the methods of *store.Store
// the server calls (doc/architecture.md, Layers). The live stream reads
// nothing itself: the firehose (coordinator) hands it what it reads.
type Store interface {
	CreateLoginCode(ctx context.Context, id string, c store.LoginCode) error
	GetJob(ctx context.Context, ident string) (*record.Job, error)
	LoginWithCode(ctx context.Context, codeID, codeMAC string, ws store.WebSession, b store.SessionBounds) (string, error)
	NickSessionExpiries(ctx context.Context, nickKey string) ([]time.Time, error)
	NickSessions(ctx context.Context, nickKey string) ([]store.WebSession, error)
	PeekLoginCode(ctx context.Context, id string) (*store.LoginCode, error)
	RevokeWebSession(ctx context.Context, id string) (bool, error)
	RevokeWebSessionsOf(ctx context.Context, nickKey string) (int, error)
	WaitingOf(ctx context.Context, ident, url string) (*store.Waiting, error)
	WebSession(ctx context.Context, id string) (*store.WebSession, error)
	WebSessions(ctx context.Context) ([]store.WebSession, error)
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

package bot

import (
	"context"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Store is the command layer's door to the store: the methods of
// *store.Store the handlers call (doc/architecture.md, Layers).
type Store interface {
	AbortBy(ctx context.Context, ident, by string) (store.AbortResult, string, error)
	ChangeSettings(ctx context.Context, ident string, c store.Change) (int64, error)
	Exists(ctx context.Context, ident string) (bool, error)
	ExpireBy(ctx context.Context, ident, by string) error
	FailJobReported(ctx context.Context, ident, reason, by string, line func(*record.Job) store.AdminNotice) (*record.Job, error)
	GetFailure(ctx context.Context, ident string) (*record.Failure, error)
	GetJob(ctx context.Context, ident string) (*record.Job, error)
	GetPipeline(ctx context.Context, key string) (*store.Pipeline, error)
	History(ctx context.Context, ident string, n int) ([]store.HistoryEntry, error)
	Move(ctx context.Context, ident, where, by string) (string, error)
	LegacyPipelines(ctx context.Context) (int, error)
	PauseQueue(ctx context.Context, name, by, reason string) error
	Pauses(ctx context.Context) ([]store.Pause, error)
	Reroute(ctx context.Context, ident, avoid, by string) (*store.RerouteResult, error)
	ResumeQueue(ctx context.Context, name string) error
	WaitingOf(ctx context.Context, ident, url string) (*store.Waiting, error)
	Ping(ctx context.Context) error
	Pipelines(ctx context.Context) ([]*store.Pipeline, error)
	Queues(ctx context.Context, limit int) ([]store.Queue, error)
	Register(ctx context.Context, j store.NewJob) error
	RunningJobs(ctx context.Context) ([]store.RunningJob, error)
	Summary(ctx context.Context) (store.Summary, error)
}

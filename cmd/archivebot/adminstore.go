package main

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// cliStore is the admin CLI's door to the store: the methods of
// *store.Store its subcommands call (doc/architecture.md, Layers).
type cliStore interface {
	AbortBy(ctx context.Context, ident, by string) (store.AbortResult, string, error)
	ActiveJobs(ctx context.Context) ([]store.ActiveJob, error)
	AddPipelineKey(ctx context.Context, name, pub string) error
	Clients(ctx context.Context) ([]store.RedisClient, error)
	DeleteNodeKeys(ctx context.Context) (int, error)
	ExpireBy(ctx context.Context, ident, by string) error
	FailJobReported(ctx context.Context, ident, reason, by string, line func(*record.Job) store.AdminNotice) (*record.Job, error)
	FeedStatus(ctx context.Context, net string, window time.Duration) (store.FeedNetStatus, error)
	GetPipeline(ctx context.Context, key string) (*store.Pipeline, error)
	JobDetail(ctx context.Context, ident string) (*store.JobDetail, error)
	Leader(ctx context.Context) (h store.LeaseHolder, ok bool, err error)
	ListPipelineKeys(ctx context.Context) ([]store.PipelineKey, error)
	NodeKeys(ctx context.Context) (map[string]int, error)
	Origin(ctx context.Context, ident string) (string, error)
	Pipelines(ctx context.Context) ([]*store.Pipeline, error)
	PushAdminNotice(ctx context.Context, n store.AdminNotice) error
	RemovePipeline(ctx context.Context, key string, silentAfter time.Duration, force bool) (bool, error)
	Requeue(ctx context.Context, ident string, force bool, silentAfter time.Duration) (*store.RequeueResult, error)
	RerouteReported(ctx context.Context, ident, avoid, by string) (*store.RerouteResult, error)
	RevokePipelineKey(ctx context.Context, name string) error
	PauseQueue(ctx context.Context, name, by, reason string) error
	PipelineKeyRules(ctx context.Context, name string) (store.KeyRules, error)
	PipelineKeys(ctx context.Context) (active map[string]string, revoked map[string]string, err error)
	ResumeQueue(ctx context.Context, name string) error
	ReturnFinishNotices(ctx context.Context) (int, error)
	RevokeWebSession(ctx context.Context, id string) (bool, error)
	RevokeWebSessionsOf(ctx context.Context, nickKey string) (int, error)
	SetPipelineKeyAvoid(ctx context.Context, name string, domains []string) error
	Survey(ctx context.Context, feedText func(url string) string) (*store.Survey, error)
	SetPipelineKeyTargetedOnly(ctx context.Context, name string, on bool) error
	WebSessions(ctx context.Context) ([]store.WebSession, error)
}

package pipelineapi

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// Store is the pipeline API's door to the store: the methods of
// *store.Store it calls (doc/architecture.md, Layers). Its own file
// in store/ is pipelineapi.go.
type Store interface {
	APIAbort(ctx context.Context, name, ident string) error
	APIDone(ctx context.Context, name, ident string) (aborted bool, err error)
	APIHeldJobs(ctx context.Context, name string) ([]string, error)
	APIKeyStats(ctx context.Context, name string, lastSeen time.Time, refusals int64, lastRefusal string) error
	APIReadJob(ctx context.Context, ident string) (*store.APIJob, error)
	APIReport(ctx context.Context, name string, fields map[string]string) error
	APITakeID(ctx context.Context, name, pub, takeID string, queues []string) (*store.APIJob, error)
	APIUnregister(ctx context.Context, name string) error
	APIUpdate(ctx context.Context, name, ident string, incr map[string]int64, set map[string]string) error
	BanCheck(ctx context.Context, ident, pipeline, site string, n int, labels []string) (state, text string, err error)
	CheckNonce(ctx context.Context, name, nonce string, ts int64, window time.Duration, max int) (store.NonceResult, error)
	JobsQueued() <-chan struct{}
	ListenJobSettings(ctx context.Context, onSubscribed func(), onMessage func(ident, age string)) (bool, error)
	NamedQueues(ctx context.Context) ([]string, error)
	PipelineKeys(ctx context.Context) (active map[string]string, revoked map[string]string, err error)
	SetPipelineKeyAvoidSelf(ctx context.Context, name string, domains []string) error
}

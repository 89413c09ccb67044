package coordinator

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Store is the services' door to the store: the methods of *store.Store
// the services call (doc/architecture.md, Layers). Every constructor of
// this package takes it; the node passes its *store.Store, and tests may
// pass coordinator/faultstore's wrapper, which makes chosen calls fail or
// stall.
type Store interface {
	// The death timer (reaper.go).
	AdvanceDeathTimers(ctx context.Context, threshold int, includeReported bool) ([]store.DeadJob, error)
	FailJobNotice(ctx context.Context, ident, reason, by string, notice *store.AdminNotice) (*record.Job, error)
	MarkDeathReported(ctx context.Context, ident string) error
	RemoveGhosts(ctx context.Context) (removed, bad []string, err error)

	// The notice queues (deliver.go: finish, start and admin notices).
	NoticesInDelivery(ctx context.Context, q store.NoticeQueue, limit int) ([]string, error)
	TakeNotice(ctx context.Context, q store.NoticeQueue) (doc string, ok bool, err error)
	AckNotice(ctx context.Context, q store.NoticeQueue, doc string) error
	IndexFinished(ctx context.Context, ident string) error
	RecordJobEnd(ctx context.Context, ident string, aborted bool, by string) error
	ScanStarts(ctx context.Context, notifyDefault bool) (store.StartScan, error)
	AllAvoidNotice(ctx context.Context, ident, site string, period time.Duration, n store.AdminNotice) (store.AllAvoid, error)
	WaitingOf(ctx context.Context, ident, url string) (*store.Waiting, error)

	// Job records.
	GetJob(ctx context.Context, ident string) (*record.Job, error)
	GetFailure(ctx context.Context, ident string) (*record.Failure, error)
	JobsExist(ctx context.Context, idents []string) ([]bool, error)
	FailReasons(ctx context.Context, idents []string) (map[string]string, error)
	ReadEndState(ctx context.Context, ident string) (store.EndState, error)
	WorkingJobs(ctx context.Context) ([]string, error)
	Queues(ctx context.Context, limit int) ([]store.Queue, error)
	RebuildQueueIndex(ctx context.Context) ([]store.NamedQueue, error)

	// Job logs: the analyzer's counts and the firehose's broadcast.
	LogBookmark(ctx context.Context, ident string) (string, bool, error)
	ReadLogBatch(ctx context.Context, ident, bookmark string, limit int) (store.LogBatch, error)
	CommitLogCounts(ctx context.Context, ident, from, to string, c record.LogCounts, trimAfter int, respectBroadcast bool, maxLag int) (store.LogCommit, store.LogTrim, error)
	ReadUnbroadcastMany(ctx context.Context, idents []string, limit int) (out []store.Unbroadcast, errs []error, err error)
	MarkBroadcastMany(ctx context.Context, marks []store.BroadcastMark) ([]bool, error)
	// The live stream's relay under ha.enabled (relay.go).
	RelayBroadcast(ctx context.Context, msgs []string, marks []store.BroadcastMark) ([]bool, error)
	ReadRelay(ctx context.Context, after string, count int, block time.Duration) ([]store.RelayMessage, error)
	RelayEnds(ctx context.Context) (first, last string, err error)
	PublishAPILog(ctx context.Context, msg string) (int64, error)

	// Pipelines (pipelines.go).
	PipelineSnapshot(ctx context.Context) (pipelines map[string]store.PipelineInfo, bad []string, err error)
	PipelineNoticeStates(ctx context.Context) (map[string]string, error)
	SetPipelineNoticeState(ctx context.Context, key, state string) error
	ForgetPipelineNoticeStates(ctx context.Context, keys ...string) error

	// Pub/sub.
	ListenUpdates(ctx context.Context, onSubscribed func(), onMessage func(ident string)) (bool, error)
	ListenJobEvents(ctx context.Context, onSubscribed func(), onMessage func(doc string)) (bool, error)
	ListenAPILog(ctx context.Context, onSubscribed func(), onMessage func(msg string)) (bool, error)

	// The failover check (failover.go).
	MasterReplication(ctx context.Context) (store.ReplInfo, error)
	PushAdminNotice(ctx context.Context, n store.AdminNotice) error

	// The leader lease (lease.go).
	AcquireLease(ctx context.Context, node string, ttl time.Duration) (store.LeaseHolder, bool, error)
	RenewLease(ctx context.Context, value string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, value string) (bool, error)
	ClockOffset(ctx context.Context) (off, rtt time.Duration, err error)
}

var _ Store = (*store.Store)(nil)

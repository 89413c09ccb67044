// The methods of the services' door (coordinator.Store), each through
// enter (faultstore.go). A method added to the door is added here the same
// way: coordinator's TestFaultStoreIsTheDoor fails to compile until it is,
// and checks that each goes through enter.

package faultstore

import (
	"context"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// AdvanceDeathTimers calls the wrapped store's, unless a fault is set for it.
func (f *Store) AdvanceDeathTimers(ctx context.Context, threshold int, includeReported bool) (r0 []store.DeadJob, err error) {
	after, err := f.enter(ctx, "AdvanceDeathTimers")
	if err != nil {
		return
	}
	r0, err = f.next.AdvanceDeathTimers(ctx, threshold, includeReported)
	return r0, after(err)
}

// FailJobNotice calls the wrapped store's, unless a fault is set for it.
func (f *Store) FailJobNotice(ctx context.Context, ident string, reason string, by string, notice *store.AdminNotice) (r0 *record.Job, err error) {
	after, err := f.enter(ctx, "FailJobNotice")
	if err != nil {
		return
	}
	r0, err = f.next.FailJobNotice(ctx, ident, reason, by, notice)
	return r0, after(err)
}

// MarkDeathReported calls the wrapped store's, unless a fault is set for it.
func (f *Store) MarkDeathReported(ctx context.Context, ident string) (err error) {
	after, err := f.enter(ctx, "MarkDeathReported")
	if err != nil {
		return
	}
	err = f.next.MarkDeathReported(ctx, ident)
	return after(err)
}

// RemoveGhosts calls the wrapped store's, unless a fault is set for it.
func (f *Store) RemoveGhosts(ctx context.Context) (r0 []string, r1 []string, err error) {
	after, err := f.enter(ctx, "RemoveGhosts")
	if err != nil {
		return
	}
	r0, r1, err = f.next.RemoveGhosts(ctx)
	return r0, r1, after(err)
}

// NoticesInDelivery calls the wrapped store's, unless a fault is set for it.
func (f *Store) NoticesInDelivery(ctx context.Context, q store.NoticeQueue, limit int) (r0 []string, err error) {
	after, err := f.enter(ctx, "NoticesInDelivery")
	if err != nil {
		return
	}
	r0, err = f.next.NoticesInDelivery(ctx, q, limit)
	return r0, after(err)
}

// TakeNotice calls the wrapped store's, unless a fault is set for it.
func (f *Store) TakeNotice(ctx context.Context, q store.NoticeQueue) (r0 string, r1 bool, err error) {
	after, err := f.enter(ctx, "TakeNotice")
	if err != nil {
		return
	}
	r0, r1, err = f.next.TakeNotice(ctx, q)
	return r0, r1, after(err)
}

// AckNotice calls the wrapped store's, unless a fault is set for it.
func (f *Store) AckNotice(ctx context.Context, q store.NoticeQueue, doc string) (err error) {
	after, err := f.enter(ctx, "AckNotice")
	if err != nil {
		return
	}
	err = f.next.AckNotice(ctx, q, doc)
	return after(err)
}

// IndexFinished calls the wrapped store's, unless a fault is set for it.
func (f *Store) IndexFinished(ctx context.Context, ident string) (err error) {
	after, err := f.enter(ctx, "IndexFinished")
	if err != nil {
		return
	}
	err = f.next.IndexFinished(ctx, ident)
	return after(err)
}

// RecordJobEnd calls the wrapped store's, unless a fault is set for it.
func (f *Store) RecordJobEnd(ctx context.Context, ident string, aborted bool, by string) (err error) {
	after, err := f.enter(ctx, "RecordJobEnd")
	if err != nil {
		return
	}
	err = f.next.RecordJobEnd(ctx, ident, aborted, by)
	return after(err)
}

// ScanStarts calls the wrapped store's, unless a fault is set for it.
func (f *Store) ScanStarts(ctx context.Context, notifyDefault bool) (r0 store.StartScan, err error) {
	after, err := f.enter(ctx, "ScanStarts")
	if err != nil {
		return
	}
	r0, err = f.next.ScanStarts(ctx, notifyDefault)
	return r0, after(err)
}

// AllAvoidNotice calls the wrapped store's, unless a fault is set for it.
func (f *Store) AllAvoidNotice(ctx context.Context, ident, site string, period time.Duration, n store.AdminNotice) (r0 store.AllAvoid, err error) {
	after, err := f.enter(ctx, "AllAvoidNotice")
	if err != nil {
		return
	}
	r0, err = f.next.AllAvoidNotice(ctx, ident, site, period, n)
	return r0, after(err)
}

// WaitingOf calls the wrapped store's, unless a fault is set for it.
func (f *Store) WaitingOf(ctx context.Context, ident string, url string) (r0 *store.Waiting, err error) {
	after, err := f.enter(ctx, "WaitingOf")
	if err != nil {
		return
	}
	r0, err = f.next.WaitingOf(ctx, ident, url)
	return r0, after(err)
}

// GetJob calls the wrapped store's, unless a fault is set for it.
func (f *Store) GetJob(ctx context.Context, ident string) (r0 *record.Job, err error) {
	after, err := f.enter(ctx, "GetJob")
	if err != nil {
		return
	}
	r0, err = f.next.GetJob(ctx, ident)
	return r0, after(err)
}

// GetFailure calls the wrapped store's, unless a fault is set for it.
func (f *Store) GetFailure(ctx context.Context, ident string) (r0 *record.Failure, err error) {
	after, err := f.enter(ctx, "GetFailure")
	if err != nil {
		return
	}
	r0, err = f.next.GetFailure(ctx, ident)
	return r0, after(err)
}

// JobsExist calls the wrapped store's, unless a fault is set for it.
func (f *Store) JobsExist(ctx context.Context, idents []string) (r0 []bool, err error) {
	after, err := f.enter(ctx, "JobsExist")
	if err != nil {
		return
	}
	r0, err = f.next.JobsExist(ctx, idents)
	return r0, after(err)
}

// FailReasons calls the wrapped store's, unless a fault is set for it.
func (f *Store) FailReasons(ctx context.Context, idents []string) (r0 map[string]string, err error) {
	after, err := f.enter(ctx, "FailReasons")
	if err != nil {
		return
	}
	r0, err = f.next.FailReasons(ctx, idents)
	return r0, after(err)
}

// ReadEndState calls the wrapped store's, unless a fault is set for it.
func (f *Store) ReadEndState(ctx context.Context, ident string) (r0 store.EndState, err error) {
	after, err := f.enter(ctx, "ReadEndState")
	if err != nil {
		return
	}
	r0, err = f.next.ReadEndState(ctx, ident)
	return r0, after(err)
}

// WorkingJobs calls the wrapped store's, unless a fault is set for it.
func (f *Store) WorkingJobs(ctx context.Context) (r0 []string, err error) {
	after, err := f.enter(ctx, "WorkingJobs")
	if err != nil {
		return
	}
	r0, err = f.next.WorkingJobs(ctx)
	return r0, after(err)
}

// Queues calls the wrapped store's, unless a fault is set for it.
func (f *Store) Queues(ctx context.Context, limit int) (r0 []store.Queue, err error) {
	after, err := f.enter(ctx, "Queues")
	if err != nil {
		return
	}
	r0, err = f.next.Queues(ctx, limit)
	return r0, after(err)
}

// RebuildQueueIndex calls the wrapped store's, unless a fault is set for it.
func (f *Store) RebuildQueueIndex(ctx context.Context) (r0 []store.NamedQueue, err error) {
	after, err := f.enter(ctx, "RebuildQueueIndex")
	if err != nil {
		return
	}
	r0, err = f.next.RebuildQueueIndex(ctx)
	return r0, after(err)
}

// LogBookmark calls the wrapped store's, unless a fault is set for it.
func (f *Store) LogBookmark(ctx context.Context, ident string) (r0 string, r1 bool, err error) {
	after, err := f.enter(ctx, "LogBookmark")
	if err != nil {
		return
	}
	r0, r1, err = f.next.LogBookmark(ctx, ident)
	return r0, r1, after(err)
}

// ReadLogBatch calls the wrapped store's, unless a fault is set for it.
func (f *Store) ReadLogBatch(ctx context.Context, ident string, bookmark string, limit int) (r0 store.LogBatch, err error) {
	after, err := f.enter(ctx, "ReadLogBatch")
	if err != nil {
		return
	}
	r0, err = f.next.ReadLogBatch(ctx, ident, bookmark, limit)
	return r0, after(err)
}

// CommitLogCounts calls the wrapped store's, unless a fault is set for it.
func (f *Store) CommitLogCounts(ctx context.Context, ident string, from string, to string, c record.LogCounts, trimAfter int, respectBroadcast bool, maxLag int) (r0 store.LogCommit, r1 store.LogTrim, err error) {
	after, err := f.enter(ctx, "CommitLogCounts")
	if err != nil {
		return
	}
	r0, r1, err = f.next.CommitLogCounts(ctx, ident, from, to, c, trimAfter, respectBroadcast, maxLag)
	return r0, r1, after(err)
}

// ReadUnbroadcastMany calls the wrapped store's, unless a fault is set for it.
func (f *Store) ReadUnbroadcastMany(ctx context.Context, idents []string, limit int) (r0 []store.Unbroadcast, r1 []error, err error) {
	after, err := f.enter(ctx, "ReadUnbroadcastMany")
	if err != nil {
		return
	}
	r0, r1, err = f.next.ReadUnbroadcastMany(ctx, idents, limit)
	return r0, r1, after(err)
}

// MarkBroadcastMany calls the wrapped store's, unless a fault is set for it.
func (f *Store) MarkBroadcastMany(ctx context.Context, marks []store.BroadcastMark) (r0 []bool, err error) {
	after, err := f.enter(ctx, "MarkBroadcastMany")
	if err != nil {
		return
	}
	r0, err = f.next.MarkBroadcastMany(ctx, marks)
	return r0, after(err)
}

// RelayBroadcast calls the wrapped store's, unless a fault is set for it.
func (f *Store) RelayBroadcast(ctx context.Context, msgs []string, marks []store.BroadcastMark) (r0 []bool, err error) {
	after, err := f.enter(ctx, "RelayBroadcast")
	if err != nil {
		return
	}
	r0, err = f.next.RelayBroadcast(ctx, msgs, marks)
	return r0, after(err)
}

// ReadRelay calls the wrapped store's, unless a fault is set for it.
func (f *Store) ReadRelay(ctx context.Context, after string, count int, block time.Duration) (r0 []store.RelayMessage, err error) {
	done, err := f.enter(ctx, "ReadRelay")
	if err != nil {
		return
	}
	r0, err = f.next.ReadRelay(ctx, after, count, block)
	return r0, done(err)
}

// RelayEnds calls the wrapped store's, unless a fault is set for it.
func (f *Store) RelayEnds(ctx context.Context) (r0, r1 string, err error) {
	after, err := f.enter(ctx, "RelayEnds")
	if err != nil {
		return
	}
	r0, r1, err = f.next.RelayEnds(ctx)
	return r0, r1, after(err)
}

// PublishAPILog calls the wrapped store's, unless a fault is set for it.
func (f *Store) PublishAPILog(ctx context.Context, msg string) (r0 int64, err error) {
	after, err := f.enter(ctx, "PublishAPILog")
	if err != nil {
		return
	}
	r0, err = f.next.PublishAPILog(ctx, msg)
	return r0, after(err)
}

// PipelineSnapshot calls the wrapped store's, unless a fault is set for it.
func (f *Store) PipelineSnapshot(ctx context.Context) (r0 map[string]store.PipelineInfo, r1 []string, err error) {
	after, err := f.enter(ctx, "PipelineSnapshot")
	if err != nil {
		return
	}
	r0, r1, err = f.next.PipelineSnapshot(ctx)
	return r0, r1, after(err)
}

// PipelineNoticeStates calls the wrapped store's, unless a fault is set for it.
func (f *Store) PipelineNoticeStates(ctx context.Context) (r0 map[string]string, err error) {
	after, err := f.enter(ctx, "PipelineNoticeStates")
	if err != nil {
		return
	}
	r0, err = f.next.PipelineNoticeStates(ctx)
	return r0, after(err)
}

// SetPipelineNoticeState calls the wrapped store's, unless a fault is set for it.
func (f *Store) SetPipelineNoticeState(ctx context.Context, key string, state string) (err error) {
	after, err := f.enter(ctx, "SetPipelineNoticeState")
	if err != nil {
		return
	}
	err = f.next.SetPipelineNoticeState(ctx, key, state)
	return after(err)
}

// ForgetPipelineNoticeStates calls the wrapped store's, unless a fault is set for it.
func (f *Store) ForgetPipelineNoticeStates(ctx context.Context, keys ...string) (err error) {
	after, err := f.enter(ctx, "ForgetPipelineNoticeStates")
	if err != nil {
		return
	}
	err = f.next.ForgetPipelineNoticeStates(ctx, keys...)
	return after(err)
}

// ListenUpdates calls the wrapped store's, unless a fault is set for it.
func (f *Store) ListenUpdates(ctx context.Context, onSubscribed func(), onMessage func(ident string)) (r0 bool, err error) {
	after, err := f.enter(ctx, "ListenUpdates")
	if err != nil {
		return
	}
	r0, err = f.next.ListenUpdates(ctx, onSubscribed, onMessage)
	return r0, after(err)
}

// ListenJobEvents calls the wrapped store's, unless a fault is set for it.
func (f *Store) ListenJobEvents(ctx context.Context, onSubscribed func(), onMessage func(doc string)) (r0 bool, err error) {
	after, err := f.enter(ctx, "ListenJobEvents")
	if err != nil {
		return
	}
	r0, err = f.next.ListenJobEvents(ctx, onSubscribed, onMessage)
	return r0, after(err)
}

// ListenAPILog calls the wrapped store's, unless a fault is set for it.
func (f *Store) ListenAPILog(ctx context.Context, onSubscribed func(), onMessage func(msg string)) (r0 bool, err error) {
	after, err := f.enter(ctx, "ListenAPILog")
	if err != nil {
		return
	}
	r0, err = f.next.ListenAPILog(ctx, onSubscribed, onMessage)
	return r0, after(err)
}

// AcquireLease calls the wrapped store's, unless a fault is set for it.
func (f *Store) AcquireLease(ctx context.Context, node string, ttl time.Duration) (r0 store.LeaseHolder, r1 bool, err error) {
	after, err := f.enter(ctx, "AcquireLease")
	if err != nil {
		return
	}
	r0, r1, err = f.next.AcquireLease(ctx, node, ttl)
	return r0, r1, after(err)
}

// RenewLease calls the wrapped store's, unless a fault is set for it.
func (f *Store) RenewLease(ctx context.Context, value string, ttl time.Duration) (r0 bool, err error) {
	after, err := f.enter(ctx, "RenewLease")
	if err != nil {
		return
	}
	r0, err = f.next.RenewLease(ctx, value, ttl)
	return r0, after(err)
}

// ReleaseLease calls the wrapped store's, unless a fault is set for it.
func (f *Store) ReleaseLease(ctx context.Context, value string) (r0 bool, err error) {
	after, err := f.enter(ctx, "ReleaseLease")
	if err != nil {
		return
	}
	r0, err = f.next.ReleaseLease(ctx, value)
	return r0, after(err)
}

// ClockOffset calls the wrapped store's, unless a fault is set for it.
func (f *Store) ClockOffset(ctx context.Context) (r0, r1 time.Duration, err error) {
	after, err := f.enter(ctx, "ClockOffset")
	if err != nil {
		return
	}
	r0, r1, err = f.next.ClockOffset(ctx)
	return r0, r1, after(err)
}

// methods are the door's methods, each wrapped above.
var methods = []string{"AdvanceDeathTimers", "FailJobNotice", "MarkDeathReported", "RemoveGhosts", "NoticesInDelivery", "TakeNotice", "AckNotice", "IndexFinished", "RecordJobEnd", "ScanStarts", "AllAvoidNotice", "WaitingOf", "GetJob", "GetFailure", "JobsExist", "FailReasons", "ReadEndState", "WorkingJobs", "Queues", "RebuildQueueIndex", "LogBookmark", "ReadLogBatch", "CommitLogCounts", "ReadUnbroadcastMany", "MarkBroadcastMany", "RelayBroadcast", "ReadRelay", "RelayEnds", "PublishAPILog", "PipelineSnapshot", "PipelineNoticeStates", "SetPipelineNoticeState", "ForgetPipelineNoticeStates", "ListenUpdates", "ListenJobEvents", "ListenAPILog", "AcquireLease", "RenewLease", "ReleaseLease", "ClockOffset", "MasterReplication", "PushAdminNotice"}

// MasterReplication calls the wrapped store's, unless a fault is set for it.
func (f *Store) MasterReplication(ctx context.Context) (r0 store.ReplInfo, err error) {
	after, err := f.enter(ctx, "MasterReplication")
	if err != nil {
		return
	}
	r0, err = f.next.MasterReplication(ctx)
	return r0, after(err)
}

// PushAdminNotice calls the wrapped store's, unless a fault is set for it.
func (f *Store) PushAdminNotice(ctx context.Context, n store.AdminNotice) (err error) {
	after, err := f.enter(ctx, "PushAdminNotice")
	if err != nil {
		return
	}
	err = f.next.PushAdminNotice(ctx, n)
	return after(err)
}

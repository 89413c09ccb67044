package store

// The at-least-once delivery queues of channel notices (finish, start and
// admin; doc/protocol.md, Finish notices, Start notices, Operator
// commands): one pending list others push to, one processing list of ours.

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// DeliveryQueue is one notice queue delivered at least once: Take moves
// the oldest pending notice into the processing list (notice_take.lua),
// Ack removes it from there once its line was written (notice_ack.lua),
// and InDelivery lists what an earlier run took and never acknowledged,
// to be delivered first.
type DeliveryQueue struct {
	s *Store
	// what names the notices in errors ("finish notification").
	what                string
	pending, processing string
}

// FinishNotices is finish_notifications, the queue pipelines push a
// document to when a job ends.
func (s *Store) FinishNotices() DeliveryQueue {
	return DeliveryQueue{s: s, what: "finish notification", pending: KeyFinishNotifications, processing: KeyFinishProcessing}
}

// StartNotices is the queue the start scan (ScanStarts) fills.
func (s *Store) StartNotices() DeliveryQueue {
	return DeliveryQueue{s: s, what: "start notice", pending: KeyStartNotifications, processing: KeyStartProcessing}
}

// AdminNotices is the queue of the operator's commands' lines
// (PushAdminNotice).
func (s *Store) AdminNotices() DeliveryQueue {
	return DeliveryQueue{s: s, what: "admin notice", pending: KeyAdminNotices, processing: KeyAdminNoticesProcessing}
}

// InDelivery returns up to limit notices taken earlier whose delivery was
// not acknowledged (the bot stopped or IRC was down), oldest first.
func (q DeliveryQueue) InDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := q.s.rdb.LRange(ctx, q.processing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+q.processing, err)
}

// Take moves the oldest pending notice into delivery and returns it; ok
// is false when there is none.
func (q DeliveryQueue) Take(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = noticeTakeScript.Run(ctx, q.s.rdb, []string{q.pending, q.processing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take "+q.what, err)
	}
	return doc, true, nil
}

// Ack ends the delivery of doc (its line was sent, or it never can be).
func (q DeliveryQueue) Ack(ctx context.Context, doc string) error {
	err := noticeAckScript.Run(ctx, q.s.rdb, []string{q.processing}, doc).Err()
	return wrap("acknowledge "+q.what, err)
}

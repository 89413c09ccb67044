package store

// The at-least-once delivery queues of channel notices (finish, start and
// admin; doc/protocol.md, Finish notices, Start notices, Operator
// commands): one pending list others push to, one processing list of ours.

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// NoticeQueue names one notice queue delivered at least once: TakeNotice
// moves the oldest pending notice into the processing list
// (notice_take.lua), AckNotice removes it from there once its line was
// written (notice_ack.lua), and NoticesInDelivery lists what an earlier
// run took and never acknowledged, to be delivered first.
type NoticeQueue uint8

// The notice queues.
const (
	// FinishQueue is finish_notifications, the queue pipelines push a
	// document to when a job ends.
	FinishQueue NoticeQueue = iota + 1
	// StartQueue is the queue the start scan (ScanStarts) fills.
	StartQueue
	// AdminQueue is the queue of the operator's commands' lines
	// (PushAdminNotice).
	AdminQueue
)

// String names the notices in errors ("finish notification").
func (q NoticeQueue) String() string {
	switch q {
	case FinishQueue:
		return "finish notification"
	case StartQueue:
		return "start notice"
	case AdminQueue:
		return "admin notice"
	}
	return "notice queue " + strconv.Itoa(int(q))
}

// keys are the queue's pending and processing lists.
func (q NoticeQueue) keys() (pending, processing string) {
	switch q {
	case FinishQueue:
		return KeyFinishNotifications, KeyFinishProcessing
	case StartQueue:
		return KeyStartNotifications, KeyStartProcessing
	case AdminQueue:
		return KeyAdminNotices, KeyAdminNoticesProcessing
	}
	panic("store: unknown notice queue " + strconv.Itoa(int(q)))
}

// NoticesInDelivery returns up to limit notices of q taken earlier whose
// delivery was not acknowledged (the bot stopped or IRC was down), oldest
// first.
func (s *Store) NoticesInDelivery(ctx context.Context, q NoticeQueue, limit int) ([]string, error) {
	_, processing := q.keys()
	docs, err := s.rdb.LRange(ctx, processing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+processing, err)
}

// TakeNotice moves the oldest pending notice of q into delivery and
// returns it; ok is false when there is none.
func (s *Store) TakeNotice(ctx context.Context, q NoticeQueue) (doc string, ok bool, err error) {
	pending, processing := q.keys()
	doc, err = noticeTakeScript.Run(ctx, s.rdb, []string{pending, processing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take "+q.String(), err)
	}
	return doc, true, nil
}

// AckNotice ends the delivery of doc, a notice of q (its line was sent,
// or it never can be).
func (s *Store) AckNotice(ctx context.Context, q NoticeQueue, doc string) error {
	_, processing := q.keys()
	err := noticeAckScript.Run(ctx, s.rdb, []string{processing}, doc).Err()
	return wrap("acknowledge "+q.String(), err)
}

package store

// The channel notice queues (finish, start, admin): take, acknowledge and
// the in-delivery lists (doc/protocol.md, Finish notifications, Start
// notices, Operator commands), and the start scan of working.

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// FinishNoticesInDelivery returns up to limit notices taken earlier whose
// delivery was not acknowledged (the bot stopped or IRC was down), oldest
// first.
func (s *Store) FinishNoticesInDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := s.rdb.LRange(ctx, KeyFinishProcessing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+KeyFinishProcessing, err)
}

// TakeFinishNotice moves the oldest notice of finish_notifications into
// delivery and returns it; ok is false when there is none.
func (s *Store) TakeFinishNotice(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = finishTakeScript.Run(ctx, s.rdb, []string{KeyFinishNotifications, KeyFinishProcessing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take finish notification", err)
	}
	return doc, true, nil
}

// AckFinishNotice ends the delivery of doc (its line was sent, or it can
// never be).
func (s *Store) AckFinishNotice(ctx context.Context, doc string) error {
	err := finishAckScript.Run(ctx, s.rdb, []string{KeyFinishProcessing}, doc).Err()
	return wrap("acknowledge finish notification", err)
}

// ScanStarts notices the jobs pipelines have taken since the last scan
// (start_scan.lua, one round trip): each gets a "started" history entry
// and, unless it opted out, a start notice queued for delivery, in the same
// atomic step that marks it seen. notifyDefault is notifier.start_notices,
// for jobs without an origin record.
func (s *Store) ScanStarts(ctx context.Context, notifyDefault bool) (StartScan, error) {
	def := "0"
	if notifyDefault {
		def = "1"
	}
	now := strconv.FormatFloat(s.nowFloat(), 'f', -1, 64)
	res, err := startScanScript.Run(ctx, s.rdb, []string{KeyWorking, KeyStarted, KeyStartNotifications, KeyStartBaseline},
		now, def, KeyHistory(""), KeyOrigin("")).Slice()
	if err != nil {
		return StartScan{}, wrap("scan started jobs", err)
	}
	var sc StartScan
	var ok1, ok2, ok3 bool
	if len(res) == 5 {
		sc.Started, ok1 = res[0].(int64)
		sc.Notices, ok2 = res[1].(int64)
		sc.Working = stringsOf(res[2])
		sc.Skipped = stringsOf(res[3])
		sc.Unannounced, ok3 = res[4].(int64)
	}
	if !ok1 || !ok2 || !ok3 {
		return StartScan{}, errors.New("scan started jobs: unexpected reply")
	}
	return sc, nil
}

// StartScan is what one scan of `working` found.
type StartScan struct {
	Started int64    // jobs seen starting now
	Notices int64    // start notices queued
	Working []string // the idents in `working`, as the scan read them
	Skipped []string // idents in `working` that cannot be jobs, left alone
	// Unannounced is how many jobs the first scan against this Redis found
	// already running: marked seen, no notice (doc/protocol.md, Start
	// notices).
	Unannounced int64
}

// StartNoticesInDelivery returns up to limit start notices taken earlier
// whose delivery was not acknowledged, oldest first.
func (s *Store) StartNoticesInDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := s.rdb.LRange(ctx, KeyStartProcessing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+KeyStartProcessing, err)
}

// TakeStartNotice moves the oldest start notice into delivery and returns
// it; ok is false when there is none.
func (s *Store) TakeStartNotice(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = finishTakeScript.Run(ctx, s.rdb, []string{KeyStartNotifications, KeyStartProcessing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take start notice", err)
	}
	return doc, true, nil
}

// AckStartNotice ends the delivery of doc (its line was sent, or it can
// never be).
func (s *Store) AckStartNotice(ctx context.Context, doc string) error {
	err := finishAckScript.Run(ctx, s.rdb, []string{KeyStartProcessing}, doc).Err()
	return wrap("acknowledge start notice", err)
}

// AdminNotice is a line an operator's command wants said in a channel.
type AdminNotice struct {
	// Channel to say it in; "" means every channel.
	Channel string `json:"channel"`
	Text    string `json:"text"`
}

// PushAdminNotice queues n for the running node to deliver.
func (s *Store) PushAdminNotice(ctx context.Context, n AdminNotice) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return wrap("queue admin notice", s.rdb.RPush(ctx, KeyAdminNotices, b).Err())
}

// AdminNoticesInDelivery returns up to limit admin notices taken earlier
// whose delivery was not acknowledged, oldest first.
func (s *Store) AdminNoticesInDelivery(ctx context.Context, limit int) ([]string, error) {
	docs, err := s.rdb.LRange(ctx, KeyAdminNoticesProcessing, 0, int64(limit)-1).Result()
	return docs, wrap("read "+KeyAdminNoticesProcessing, err)
}

// TakeAdminNotice moves the oldest admin notice into delivery (the finish
// notices' script over the admin lists); ok is false when there is none.
func (s *Store) TakeAdminNotice(ctx context.Context) (doc string, ok bool, err error) {
	doc, err = finishTakeScript.Run(ctx, s.rdb, []string{KeyAdminNotices, KeyAdminNoticesProcessing}).Text()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("take admin notice", err)
	}
	return doc, true, nil
}

// AckAdminNotice ends the delivery of doc.
func (s *Store) AckAdminNotice(ctx context.Context, doc string) error {
	err := finishAckScript.Run(ctx, s.rdb, []string{KeyAdminNoticesProcessing}, doc).Err()
	return wrap("acknowledge admin notice", err)
}

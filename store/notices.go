package store

// What fills the channel notice queues: the start scan of working and the
// operator's admin notices (doc/protocol.md, Start notices, Operator
// commands). Their delivery is DeliveryQueue's (queue.go).

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
)

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

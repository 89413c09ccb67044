package coordinator

// Store operations of start notices and of the job-end history step
// (doc/protocol.md, Start notices and Job history).

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/start_scan.lua
	startScanBody   string
	startScanScript = fenced(historySrc + startScanBody)

	//go:embed scripts/job_end.lua
	jobEndBody   string
	jobEndScript = fenced(historySrc + jobEndBody)
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

// stringsOf reads a Lua array of strings from a script reply.
func stringsOf(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
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

// RecordJobEnd appends what the finish notifier observed (the job
// finished, or was aborted) to the job's history and gives its history and
// origin records their TTL: 48 hours for a finished job, 7 days for an
// aborted one (its record lives 5 s, the history is kept for !history).
// by is the pipeline id of the notice, or "node" when it has none. One
// round trip; a notice delivered twice appends once.
func (s *Store) RecordJobEnd(ctx context.Context, ident string, aborted bool, by string) error {
	event, ttl := EventFinished, HistoryFinishedTTL
	if aborted {
		event, ttl = EventAborted, HistoryEndedTTL
	}
	if by == "" {
		by = "node"
	}
	entry := s.entry(ident, event, by, nil)
	n, err := jobEndScript.Run(ctx, s.rdb, []string{KeyHistory(ident), KeyOrigin(ident)},
		entry, event, by, int64(ttl/time.Second)).Int()
	if err != nil {
		return wrap("record end of "+ident, err)
	}
	if n < 0 {
		return &NotAJobError{Key: KeyHistory(ident)}
	}
	return nil
}

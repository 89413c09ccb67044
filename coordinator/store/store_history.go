package store

// Job history and audit (doc/protocol.md, Job history): every change to a
// job is appended, as one JSON entry, to archivebot:history:IDENT by the
// same script that makes the change, and published on
// archivebot:job_events.

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// HistoryMax is the most entries a job's history keeps (the oldest go).
const HistoryMax = 100

// History TTLs, set when the job ends. A finished job's history lives as
// long as its record (48 h); an aborted or failed job's record lives 5 s,
// but its history is kept as long as its failure record, so !history still
// answers afterwards.
const (
	HistoryFinishedTTL = 48 * time.Hour
	HistoryEndedTTL    = 7 * 24 * time.Hour
)

// History events.
const (
	EventQueued        = "queued"
	EventSettings      = "settings"
	EventIgnoreAdded   = "ignore_added"
	EventIgnoreRemoved = "ignore_removed"
	EventStarted       = "started"
	EventAborted       = "aborted"
	EventFailed        = "failed"
	EventFinished      = "finished"
	EventMoved         = "moved"
	EventUserAgent     = "useragent"
	EventExpired       = "expired"
)

// HistoryEntry is one entry of a job's history.
type HistoryEntry struct {
	TS    float64 `json:"ts"`
	Ident string  `json:"ident"`
	Event string  `json:"event"`
	// By is who or what made the change: a nick, a pipeline id, "reaper"
	// or "node".
	By     string         `json:"by"`
	Detail map[string]any `json:"detail"`
}

// Time is the entry's time.
func (e HistoryEntry) Time() time.Time {
	sec := int64(e.TS)
	return time.Unix(sec, int64((e.TS-float64(sec))*1e9))
}

// entry builds the JSON of a history entry stamped now.
func (s *Store) entry(ident, event, by string, detail map[string]any) string {
	if detail == nil {
		detail = map[string]any{}
	}
	b, _ := json.Marshal(HistoryEntry{TS: s.nowFloat(), Ident: ident, Event: event, By: by, Detail: detail})
	return string(b)
}

// nowFloat is the store's clock as UNIX seconds with millisecond fraction.
func (s *Store) nowFloat() float64 {
	return float64(s.Now().UnixMilli()) / 1000
}

// History returns the last n entries of the job's history, oldest first
// (one round trip). Entries that are not valid JSON are skipped.
func (s *Store) History(ctx context.Context, ident string, n int) ([]HistoryEntry, error) {
	raw, err := s.rdb.LRange(ctx, KeyHistory(ident), int64(-n), -1).Result()
	if isWrongType(err) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, wrap("read history of "+ident, err)
	}
	return parseHistory(raw), nil
}

func parseHistory(raw []string) []HistoryEntry {
	out := make([]HistoryEntry, 0, len(raw))
	for _, r := range raw {
		var e HistoryEntry
		if json.Unmarshal([]byte(r), &e) == nil && e.Event != "" {
			out = append(out, e)
		}
	}
	return out
}

// secs formats a TTL for a script argument.
func secs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

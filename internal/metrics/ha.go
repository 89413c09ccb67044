package metrics

import (
	"sync"
	"time"
)

var (
	leaderMu    sync.Mutex
	leaderSince time.Time // zero when not leading

	leaderGauge = newGaugeFunc("archivebot_leader",
		"1 when this node holds the leader lease (or runs alone), 0 on a standby.",
		func() float64 {
			if leadingSince().IsZero() {
				return 0
			}
			return 1
		})
	leaseAge = newGaugeFunc("archivebot_leader_lease_age_seconds",
		"How long this node has held the leader lease; 0 on a standby.",
		func() float64 {
			since := leadingSince()
			if since.IsZero() {
				return 0
			}
			return time.Since(since).Seconds()
		})
)

// leadingSince returns since when this node leads (zero: not leading).
func leadingSince() time.Time {
	leaderMu.Lock()
	defer leaderMu.Unlock()
	return leaderSince
}

// SetLeader records whether this node leads, and since when.
func SetLeader(leading bool, since time.Time) {
	leaderMu.Lock()
	defer leaderMu.Unlock()
	if !leading {
		leaderSince = time.Time{}
		return
	}
	if since.IsZero() {
		since = time.Now()
	}
	leaderSince = since
}

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	leaderMu    sync.Mutex
	leaderSince time.Time // zero when not leading

	leaderGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "archivebot_leader",
		Help: "1 when this node holds the leader lease (or runs alone), 0 on a standby.",
	}, func() float64 {
		leaderMu.Lock()
		defer leaderMu.Unlock()
		if leaderSince.IsZero() {
			return 0
		}
		return 1
	})
	leaseAge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "archivebot_leader_lease_age_seconds",
		Help: "How long this node has held the leader lease; 0 on a standby.",
	}, func() float64 {
		leaderMu.Lock()
		defer leaderMu.Unlock()
		if leaderSince.IsZero() {
			return 0
		}
		return time.Since(leaderSince).Seconds()
	})
)

func init() { Registry.MustRegister(leaderGauge, leaseAge) }

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

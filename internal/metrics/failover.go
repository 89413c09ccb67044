package metrics

// The leader's check of each Redis master change (doc/reliability.md, A
// failover that loses writes).
var (
	failoverChecks = newCounterVec("archivebot_redis_master_changes_total",
		"Changes of Redis master the leader saw, by what the new master holds of this node's writes: held (every write it acknowledged), lost (it lacks the last write WAIT confirmed, or a take answered to a pipeline), unknown (its replication history does not say).",
		"verdict")
	lostTakes = newCounter("archivebot_redis_lost_takes_total",
		"Pipeline API takes a Redis failover lost (the new master never had them); each holder was told to let go (released).")
)

// FailoverChecked counts one change of master and its verdict.
func FailoverChecked(verdict string) { failoverChecks.WithLabelValues(verdict).Inc() }

// LostTakes counts n takes a failover lost.
func LostTakes(n int) { lostTakes.Add(float64(n)) }

func init() {
	for _, v := range []string{"held", "lost", "unknown"} {
		failoverChecks.WithLabelValues(v)
	}
}

package metrics

// The take rule's metrics (doc/pipeline-api.md, The take rule).
var (
	takeScanBound = newCounter("archivebot_take_scan_bound_total",
		"Takes whose scan of queued jobs stopped at jobs.take_scan_limit.")
	takeSkipped = newCounter("archivebot_take_skipped_total",
		"Queued jobs a take passed over because of a per-user limit or an avoid rule (they keep their place).")
)

// TakeScanned records one take: whether the scan bound stopped it and
// how many jobs the rules passed over.
func TakeScanned(boundHit bool, skipped int) {
	if boundHit {
		takeScanBound.Inc()
	}
	if skipped > 0 {
		takeSkipped.Add(float64(skipped))
	}
}

package metrics

// The pipeline API's log entries on their way to the live streams
// (doc/pipeline-api.md, Logs off Redis; doc/web.md, Metrics).
var (
	apiLogRelayed = newCounterVec("archivebot_stream_api_entries_total",
		"Pipeline API log entries relayed to the live streams through Redis: published (by the leader), published_unheard (no node listened), received (by this node's stream).",
		"what")
	apiLogDropped = newCounterVec("archivebot_stream_api_dropped_total",
		"Pipeline API log entries not relayed to the live streams, by reason: queue_full, publish_failed, too_large (publisher); bad_message (a message on the channel that is not one, counted once, or an entry in it that is not one).",
		"reason")
)

// APILogRelayed counts n API log entries published, published with no
// listener, or received.
func APILogRelayed(what string, n int) { apiLogRelayed.WithLabelValues(what).Add(float64(n)) }

// APILogDropped counts n API log entries (or bad messages) dropped for reason.
func APILogDropped(reason string, n int) { apiLogDropped.WithLabelValues(reason).Add(float64(n)) }

func init() {
	for _, w := range []string{"published", "published_unheard", "received"} {
		apiLogRelayed.WithLabelValues(w)
	}
	for _, r := range []string{"queue_full", "publish_failed", "too_large", "bad_message"} {
		apiLogDropped.WithLabelValues(r)
	}
}

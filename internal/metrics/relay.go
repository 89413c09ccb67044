package metrics

// The live stream's relay under ha.enabled (coordinator/relay.go).
var (
	relayEntries = newCounterVec("archivebot_stream_relay_entries_total",
		"Log entries and job events on the live stream's relay (the Redis stream archivebot:stream_relay): relayed (appended by the leader's firehose), received (read by this node's stream).",
		"what")
	relayLost = newCounterVec("archivebot_stream_relay_lost_total",
		"What this node's live stream lost of the relay, by reason: trimmed (messages trimmed before this node read them: it fell further behind than the stream's bound), bad_message (a message that is not one), too_large (an entry the leader could not relay), event_failed (job events the leader could not append, that found its queue full, or that still waited when its firehose stopped).",
		"reason")
)

// RelayEntries counts n relayed or received entries and events.
func RelayEntries(what string, n int) { relayEntries.WithLabelValues(what).Add(float64(n)) }

// RelayLost counts n messages, entries or events lost for reason.
func RelayLost(reason string, n int) { relayLost.WithLabelValues(reason).Add(float64(n)) }

func init() {
	for _, w := range []string{"relayed", "received"} {
		relayEntries.WithLabelValues(w)
	}
	for _, r := range []string{"trimmed", "bad_message", "too_large", "event_failed"} {
		relayLost.WithLabelValues(r)
	}
}

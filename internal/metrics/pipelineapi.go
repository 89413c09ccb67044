package metrics

import "strconv"

// The pipeline API's metrics (doc/pipeline-api.md, Metrics). key is a
// registered key name ("-" when the request named no registered key, so
// that strangers cannot grow the label set).
var (
	apiRequests = newCounterVec("archivebot_pipelineapi_requests_total",
		"Pipeline API requests answered, by key, operation and HTTP status.",
		"key", "op", "code")
	apiRefusals = newCounterVec("archivebot_pipelineapi_refusals_total",
		"Pipeline API requests refused (401, 403, 413, 429, 503 body_budget), by key and reason.",
		"key", "reason")
	apiLogEntries = newCounterVec("archivebot_pipelineapi_log_entries_total",
		"Log entries accepted through the pipeline API, by key.",
		"key")
	apiTakesAgain = newCounterVec("archivebot_pipelineapi_takes_answered_again_total",
		"Takes whose take_id had already taken a job the key still holds, answered that job again (a lost answer retried), by key.",
		"key")
	apiStreams = newGauge("archivebot_pipelineapi_control_streams",
		"Open pipeline API control streams.")
	banLines = newCounter("archivebot_ban_lines_total",
		"Ban lines queued: jobs whose first responses were all errors (doc/pipeline-api.md, A ban shows itself).")
	apiConns = newGauge("archivebot_pipelineapi_connections",
		"Open pipeline API connections (within pipelines.max_conns).")
	apiConnRefusals = newCounterVec("archivebot_pipelineapi_connections_refused_total",
		"Pipeline API connections refused over a cap, by the cap (max_conns, max_conns_per_addr).",
		"limit")
	apiBodyBytes = newGauge("archivebot_pipelineapi_body_bytes",
		"Bytes of pipeline API request bodies held now while they are read and checked (within pipelines.body_budget).")
)

// APIBodyBytes moves the held body bytes gauge by d.
func APIBodyBytes(d int64) { apiBodyBytes.Add(float64(d)) }

// APIConnections moves the open API connection gauge by d.
func APIConnections(d int) { apiConns.Add(float64(d)) }

// APIConnectionRefused counts a connection refused over limit.
func APIConnectionRefused(limit string) { apiConnRefusals.WithLabelValues(limit).Inc() }

// APIRequest counts an answered pipeline API request.
func APIRequest(key, op string, code int) {
	apiRequests.WithLabelValues(key, op, itoa(code)).Inc()
}

// APIRefusal counts a refused pipeline API request.
func APIRefusal(key, reason string) { apiRefusals.WithLabelValues(key, reason).Inc() }

// APILogEntries counts log entries accepted from key.
func APILogEntries(key string, n int) { apiLogEntries.WithLabelValues(key).Add(float64(n)) }

// APITakeAnsweredAgain counts a take of key answered again by its take_id.
func APITakeAnsweredAgain(key string) { apiTakesAgain.WithLabelValues(key).Inc() }

// APIStreams moves the open control stream gauge by d.
func APIStreams(d int) { apiStreams.Add(float64(d)) }

func itoa(n int) string { return strconv.Itoa(n) }

// BanLine counts a ban line queued.
func BanLine() { banLines.Inc() }

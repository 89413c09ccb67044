package wire

import "encoding/json"

// Paths of the API (doc/pipeline-api.md). IDENT is path-escaped.
const (
	PathTake     = "/v1/jobs/take"
	PathJobs     = "/v1/jobs/" // + IDENT, + IDENT + "/update" | "/abort" | "/done"
	PathControl  = "/v1/control"
	PathPipeline = "/v1/pipeline"
)

// Limits a node applies; requests past them are refused (413 or 429),
// never cut.
const (
	// MaxBody is the largest request body.
	MaxBody = 4 << 20
	// MaxLogEntries is the most log entries in one update.
	MaxLogEntries = 1000
	// MaxLogEntry is the largest log entry (its JSON text).
	MaxLogEntry = 64 << 10
	// MaxTakeWait is the longest long-poll of a take.
	MaxTakeWaitMS = 30000
	// MaxReportFields is the most fields of a pipeline report; each
	// field name at most 64 bytes and value at most 1 KiB.
	MaxReportFields = 64
)

// TakeRequest asks for a job (POST /v1/jobs/take).
type TakeRequest struct {
	// Queues, when set, are the queues to try, in order (at most 32): each
	// must be one this key may take from (pending, pending-ao,
	// pending-large, or pending:NAME with NAME a substring of the key
	// name). When empty, the node chooses as upstream's candidate_queues,
	// from AOOnly and Large.
	Queues []string `json:"queues,omitempty"`
	AOOnly bool     `json:"ao_only,omitempty"`
	Large  bool     `json:"large,omitempty"`
	// WaitMS is how long to wait for a job when every queue is empty
	// (0: answer at once; at most MaxTakeWaitMS).
	WaitMS int `json:"wait_ms,omitempty"`
	// TakeID, when set, makes the take idempotent (doc/pipeline-api.md, A
	// lost answer): the client chooses it, one per logical take
	// (ValidTakeID), and sends it again when it retries a take whose
	// answer it did not get. A take whose TakeID already took a job the
	// key still holds answers that job again and takes nothing.
	TakeID string `json:"take_id,omitempty"`
}

// MinTakeID and MaxTakeID bound a TakeID's length.
const (
	MinTakeID = 8
	MaxTakeID = 64
)

// ValidTakeID reports whether id can be a TakeID: 8 to 64 characters of
// A-Z a-z 0-9 _ -.
func ValidTakeID(id string) bool {
	if len(id) < MinTakeID || len(id) > MaxTakeID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Job is a held job's record and ignore set, as Redis holds them.
type Job struct {
	Ident string `json:"ident"`
	// Queue it was taken from (take answers only).
	Queue string `json:"queue,omitempty"`
	// PipelineID is the pipeline record key the node wrote as the job's
	// pipeline_id: pipeline:<md5hex of "api:" + key name>.
	PipelineID string `json:"pipeline_id"`
	// Fields is the job hash (HGETALL).
	Fields map[string]string `json:"fields"`
	// Ignores is the ignore set (SMEMBERS of ignore_patterns_set_key),
	// sorted.
	Ignores []string `json:"ignores"`
}

// TakeResponse answers a take: Job is nil when no job came within the
// wait (the answer is then 200 with {"job":null}).
type TakeResponse struct {
	Job *Job `json:"job"`
}

// UpdateRequest changes a held job (POST /v1/jobs/IDENT/update). Every
// part is optional; the whole request is refused or accepted.
type UpdateRequest struct {
	// Heartbeat is added to the job's heartbeat (upstream sends 1 a
	// second).
	Heartbeat int64 `json:"heartbeat,omitempty"`
	// Incr adds to counters (HINCRBY): bytes_downloaded,
	// items_downloaded, items_queued, heartbeat.
	Incr map[string]int64 `json:"incr,omitempty"`
	// Set writes fields (HMSET): warc_size. started_at and pipeline_id
	// are accepted and ignored (the take wrote them).
	Set map[string]string `json:"set,omitempty"`
	// Log entries, oldest first, each the JSON text upstream would have
	// ZADDed to the job's log.
	Log []json.RawMessage `json:"log,omitempty"`
}

// UpdateResponse answers an update.
type UpdateResponse struct {
	// LogAccepted is how many entries were taken in (all, or the request
	// was refused).
	LogAccepted int `json:"log_accepted"`
	// LogScore is the job's log score after them (upstream's log_score).
	LogScore int64 `json:"log_score"`
	// SettingsAge is the job's settings_age as last known to the node.
	SettingsAge int64 `json:"settings_age"`
	// AbortRequested is true once !abort asked the job to stop.
	AbortRequested bool `json:"abort_requested"`
}

// DoneResponse answers done and abort.
type DoneResponse struct {
	Ident string `json:"ident"`
	// Aborted is whether the job counted as aborted (done) or is now
	// marked aborted (abort).
	Aborted bool `json:"aborted"`
}

// Settings are a held job's settings, sent on the control stream and
// read by crawlers as upstream's get_settings does.
type Settings struct {
	Ident                 string   `json:"ident"`
	Age                   int64    `json:"settings_age"`
	DelayMin              string   `json:"delay_min"`
	DelayMax              string   `json:"delay_max"`
	Concurrency           string   `json:"concurrency"`
	AbortRequested        bool     `json:"abort_requested"`
	SuppressIgnoreReports bool     `json:"suppress_ignore_reports"`
	IgnorePatterns        []string `json:"ignore_patterns"`
}

// Control stream events (GET /v1/control, text/event-stream).
const (
	// EventSettings carries Settings: sent for every held job when the
	// stream opens, and whenever a job's settings_age rises (a settings,
	// ignore or abort change).
	EventSettings = "settings"
	// EventReleased carries Released: the key no longer holds the job
	// (failed, requeued, rerouted or expired by an operator); stop
	// sending for it.
	EventReleased = "released"
	// EventBye carries Error: the node closes the stream (key revoked,
	// node shutting down or no longer the leader).
	EventBye = "bye"
)

// ReleasedRerouted starts the reason of a released event for a job an
// operator rerouted (!reroute): it was taken back and queued again, not
// finished; the pipeline should stop crawling it as it would an abort.
const ReleasedRerouted = "rerouted:"

// ReleasedLost starts the reason of a released event for a job whose
// take a Redis failover lost: the new master never had it, so the job is
// as it was before the take (queued, or taken by another key); the
// pipeline should stop crawling it as it would an abort.
const ReleasedLost = "lost:"

// Released is the data of a released event.
type Released struct {
	Ident  string `json:"ident"`
	Reason string `json:"reason"`
}

// PipelineReport is the pipeline record (PUT /v1/pipeline): upstream's
// report fields (version, hostname, fqdn, pid, python, status, mem_*,
// disk_*, load_average_*, nickname…). The node writes id, nickname (the
// key name), api_key and ts itself; the reported nickname is kept as
// reported_nickname.
type PipelineReport struct {
	Fields map[string]string `json:"fields"`
}

// PipelineResponse answers a report or unregister.
type PipelineResponse struct {
	// ID is the pipeline record key: pipeline:<md5hex of "api:" + key>.
	ID       string `json:"id"`
	Nickname string `json:"nickname"`
}

// Error is every refusal's body.
type Error struct {
	// Error is a stable code: missing_signature, malformed_signature,
	// stale_timestamp, bad_signature, unknown_key, revoked_key,
	// replayed_nonce, not_held, forbidden_queue, forbidden_field,
	// bad_request, too_large, rate_limited, not_leader, not_found,
	// internal.
	Error string `json:"error"`
	// Reason says what was wrong, for a person.
	Reason string `json:"reason"`
}

// WhoAmI answers GET /v1/pipeline: the key the node verified the request
// with, and the node's clock (the bridge checks both when it starts).
type WhoAmI struct {
	Key string `json:"key"`
	// ID is the pipeline record key the key reports as.
	ID string `json:"id"`
	// NodeTime is the node's clock, Unix milliseconds.
	NodeTime int64 `json:"node_time"`
}

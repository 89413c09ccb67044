package record

// The job record as one type: the hash IDENT (doc/protocol.md, Job
// record) decoded once, and the one rule that derives a job's state.

import (
	"math"
	"strconv"
)

// Job is one job record, decoded once (DecodeJob) into the fields the
// node reads. Fields keeps the hash exactly as read: the outputs that echo
// it (the live stream's job_data, `archivebot job -json`) pass it through
// byte for byte.
//
// Pipelines write most of the hash, and what they write is untrusted: a
// number that is not one reads as absent (Number.OK false; 0 for a
// counter), a flag is true only when it is "true". Decoding never fails.
type Job struct {
	Ident  string
	Fields map[string]string

	// Written by the bot when the job is queued (settings also later).
	URL                   Text   // url; for "<" jobs the URL of the list
	URLFile               Text   // url_file: set only for "<" jobs
	FetchDepth            Text   // fetch_depth: inf or shallow
	Slug                  Text   // slug
	UserAgent             Text   // user_agent
	StartedBy             Text   // started_by: the nick
	StartedIn             Text   // started_in: the channel
	Note                  Text   // note (!explain)
	QueuedAt              Number // queued_at
	DelayMin              Number // delay_min (ms)
	DelayMax              Number // delay_max (ms)
	Concurrency           Number // concurrency
	SettingsAge           int64  // settings_age
	SuppressIgnoreReports bool   // suppress_ignore_reports
	NoOffsiteLinks        bool   // no_offsite_links
	AbortRequested        bool   // abort_requested (!abort)

	// Written by the pipeline.
	PipelineID      Text   // pipeline_id
	StartedAt       Number // started_at
	FinishedAt      Number // finished_at: set once the pipeline is done
	Aborted         bool   // aborted
	BytesDownloaded int64  // bytes_downloaded
	ItemsDownloaded int64  // items_downloaded
	ItemsQueued     int64  // items_queued
	WarcSize        int64  // warc_size
	LogScore        int64  // log_score: the score of the job's last log entry

	// Counts are the analyzer's response counts (r1xx … runk) and
	// error_count.
	Counts LogCounts
	// LastBroadcast is last_broadcasted_log_entry, the live stream's
	// bookmark ("" = none).
	LastBroadcast string

	// Written by the control node when it gave up on the job.
	Failed       bool // failed
	FailedReason Text // failed_reason
}

// Text is a text field of the record. Set reports whether the hash has
// the field at all: upstream's JSON says null for a missing field and ""
// for an empty one.
type Text struct {
	Value string
	Set   bool
}

func (t Text) String() string { return t.Value }

// Ptr is the value, or nil when the field is missing.
func (t Text) Ptr() *string {
	if !t.Set {
		return nil
	}
	v := t.Value
	return &v
}

// Number is a numeric field of the record: Text as stored, and, when OK,
// its value. OK is false when the field is missing or is not a number the
// node can use: it must parse as an integer or as a finite float whose
// integer part fits in an int64. Int is the integer part (exact for
// integers, cut towards zero for floats, as upstream's to_i), Float the
// value.
type Number struct {
	Text
	OK    bool
	Int   int64
	Float float64
}

// Ptr is the integer part, or nil when the field is no number.
func (n Number) Ptr() *int64 {
	if !n.OK {
		return nil
	}
	v := n.Int
	return &v
}

// CounterFields are the counters of the record (pipeline and
// analyzer): fields that start at 0 when absent.
var CounterFields = []string{"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "error_count",
	"bytes_downloaded", "items_downloaded", "items_queued"}

// DecodeJob decodes a job hash (every value a string, as Redis stores
// it). fields is kept as Job.Fields, not copied; a nil or empty map gives
// a record with every field missing.
func DecodeJob(ident string, fields map[string]string) *Job {
	m := fields
	text := func(k string) Text { v, ok := m[k]; return Text{Value: v, Set: ok} }
	number := func(k string) Number {
		n := Number{Text: text(k)}
		n.Int, n.Float, n.OK = parseNumber(n.Value)
		return n
	}
	counter := func(k string) int64 { n, _, _ := parseNumber(m[k]); return n }
	flag := func(k string) bool { return m[k] == "true" }
	return &Job{
		Ident:                 ident,
		Fields:                fields,
		URL:                   text("url"),
		URLFile:               text("url_file"),
		FetchDepth:            text("fetch_depth"),
		Slug:                  text("slug"),
		UserAgent:             text("user_agent"),
		StartedBy:             text("started_by"),
		StartedIn:             text("started_in"),
		Note:                  text("note"),
		QueuedAt:              number("queued_at"),
		DelayMin:              number("delay_min"),
		DelayMax:              number("delay_max"),
		Concurrency:           number("concurrency"),
		SettingsAge:           counter("settings_age"),
		SuppressIgnoreReports: flag("suppress_ignore_reports"),
		NoOffsiteLinks:        flag("no_offsite_links"),
		AbortRequested:        flag("abort_requested"),
		PipelineID:            text("pipeline_id"),
		StartedAt:             number("started_at"),
		FinishedAt:            number("finished_at"),
		Aborted:               flag("aborted"),
		BytesDownloaded:       counter("bytes_downloaded"),
		ItemsDownloaded:       counter("items_downloaded"),
		ItemsQueued:           counter("items_queued"),
		WarcSize:              counter("warc_size"),
		LogScore:              counter("log_score"),
		Counts: LogCounts{
			R1xx: counter("r1xx"), R2xx: counter("r2xx"), R3xx: counter("r3xx"),
			R4xx: counter("r4xx"), R5xx: counter("r5xx"), Runk: counter("runk"),
			Errors: counter("error_count"),
		},
		LastBroadcast: m["last_broadcasted_log_entry"],
		Failed:        flag("failed"),
		FailedReason:  text("failed_reason"),
	}
}

// parseNumber reads v as an integer, else as a float cut to its integer
// part; ok is false (and the values 0) for anything else, NaN, ±Inf and
// floats outside the int64 range included.
func parseNumber(v string) (n int64, f float64, ok bool) {
	if v == "" {
		return 0, 0, false // most counters, before the pipeline writes them
	}
	if isDecimal(v) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, float64(n), true
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, 0, false
	}
	return int64(f), f, true
}

// isDecimal reports whether v is digits with an optional sign: worth
// trying as an integer (a failed parse costs an allocated error).
func isDecimal(v string) bool {
	if v[0] == '-' || v[0] == '+' {
		v = v[1:]
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}

// Get returns a field of the hash as read ("" when absent). The node's
// own reads use the typed fields; Get is for fields it does not type.
func (j *Job) Get(field string) string { return j.Fields[field] }

// Flag reports whether a field of the hash as read is "true".
func (j *Job) Flag(field string) bool { return j.Fields[field] == "true" }

// State is where a job is in its life.
type State int

// Job states, in the order a job passes through them.
const (
	StateQueued State = iota
	StateRunning
	StateFinished
	StateAborted
	StateFailed
)

var stateNames = [...]string{"queued", "running", "finished", "aborted", "failed"}

// String is the state's name, as the web API, the stream and the admin
// CLI spell it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "state" + strconv.Itoa(int(s))
	}
	return stateNames[s]
}

// Ended reports whether a job in state s will not run any more.
func (s State) Ended() bool { return s >= StateFinished }

// Ghost reports whether the hash as read is a ghost: it exists but has no
// url, the field every registration writes (this node's and upstream's)
// and no pipeline writes. A pipeline's late write after the job ended
// (HINCRBY heartbeat, bytes, items; a log_score; a finished_at) re-creates
// such a hash. A ghost is never a job: readers treat it as no record, `!a`
// registers over it, and the reaper removes it (doc/protocol.md, Which
// record speaks for a job).
func (j *Job) Ghost() bool { return j != nil && len(j.Fields) > 0 && j.URL.Value == "" }

// Speaking is the one rule of which record speaks for a job, given its
// hash as read (nil when there is none) and its failure record (nil when
// none): it returns the job record to show (nil when absent or a ghost)
// and the failure record to show (nil when none, or when a newer
// registration exists). A failure record speaks only while no newer
// registration of the same ident exists: register deletes it in the same
// atomic step, and, since fail marks the hash `failed` in the step that
// writes the failure record, a registered hash without `failed` beside a
// failure record is always the newer registration (a record written
// before register deleted them, or read between two steps).
func Speaking(j *Job, fail *Failure) (*Job, *Failure) {
	if j.Ghost() {
		j = nil
	}
	if fail != nil && j != nil && !j.Failed {
		fail = nil
	}
	return j, fail
}

// StateOf is the one rule for a job's state, from its record (nil when
// it has expired), its failure record (nil when none) and whether it is
// in `working`, after Speaking (a ghost is no record; a failure record
// beside a newer registration is none):
//
//   - failed: a failure record, or failed is true;
//   - aborted: finished_at set and aborted true;
//   - finished: finished_at set;
//   - running: started_at or pipeline_id set, or in `working`;
//   - queued: otherwise.
func StateOf(j *Job, fail *Failure, working bool) State {
	j, fail = Speaking(j, fail)
	if j == nil {
		j = &Job{}
	}
	switch {
	case fail != nil || j.Failed:
		return StateFailed
	case j.Done() && j.Aborted:
		return StateAborted
	case j.Done():
		return StateFinished
	case j.StartedAt.Value != "" || j.PipelineID.Value != "" || working:
		return StateRunning
	}
	return StateQueued
}

// State is the job's state from its record alone (StateOf).
func (j *Job) State() State { return StateOf(j, nil, false) }

// Done reports whether the pipeline marked the job done (finished_at set,
// to anything): upstream's `finished`, aborted jobs included.
func (j *Job) Done() bool { return j.FinishedAt.Value != "" }

// Finished reports whether the job will not run any more (finished,
// aborted or failed).
func (j *Job) Finished() bool { return j.State().Ended() }

package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// Job states of /jobs and /jobs/IDENT.
const (
	StateQueued   = "queued"
	StateRunning  = "running"
	StateFinished = "finished"
	StateAborted  = "aborted"
	StateFailed   = "failed"
)

// JobView is /jobs/IDENT: one job's whole state. doc/web.md documents
// every field; fields that do not apply to the job's state are omitted.
type JobView struct {
	Ident string `json:"ident"`
	URL   string `json:"url"`
	// State is queued, running, finished, aborted or failed.
	State string `json:"state"`
	// Queue, Position (1 = next to run) and QueueLength: queued jobs.
	Queue       string `json:"queue,omitempty"`
	Position    int64  `json:"position,omitempty"`
	QueueLength int64  `json:"queue_length,omitempty"`
	// Pipeline: running jobs (and finished ones, which pipeline ran them).
	Pipeline *PipelineRef `json:"pipeline,omitempty"`
	// Failure: failed jobs.
	Failure *FailureView `json:"failure,omitempty"`
	// AbortRequested is true after !abort, until the pipeline stops.
	AbortRequested bool `json:"abort_requested"`

	Depth     string  `json:"depth"`
	URLFile   bool    `json:"url_file"`
	Slug      string  `json:"slug,omitempty"`
	Note      *string `json:"note"`
	StartedBy string  `json:"started_by"`
	StartedIn string  `json:"started_in"`

	Settings       JobSettings `json:"settings"`
	Progress       JobProgress `json:"progress"`
	IgnorePatterns []string    `json:"ignore_patterns"`

	QueuedAt   *int64 `json:"queued_at"`
	StartedAt  *int64 `json:"started_at"`
	FinishedAt *int64 `json:"finished_at"`
	// ExpiresIn is the number of seconds before the job record expires
	// and the URL can be archived again; null while it has no expiry.
	ExpiresIn *int64 `json:"expires_in"`
	// History is every recorded change of the job, oldest first
	// (doc/protocol.md, Job history).
	History []store.HistoryEntry `json:"history"`
}

// PipelineRef names a pipeline.
type PipelineRef struct {
	ID       string `json:"id"`
	Nickname string `json:"nickname,omitempty"`
}

// FailureView is why and when a job failed.
type FailureView struct {
	Reason   string `json:"reason"`
	FailedBy string `json:"failed_by,omitempty"`
	FailedAt *int64 `json:"failed_at"`
	// Queue is where the job was when it failed (pending…, or working).
	Queue string `json:"queue,omitempty"`
}

// JobSettings are the settings the crawler follows.
type JobSettings struct {
	DelayMin              *int64 `json:"delay_min"`
	DelayMax              *int64 `json:"delay_max"`
	Concurrency           *int64 `json:"concurrency"`
	SuppressIgnoreReports bool   `json:"suppress_ignore_reports"`
	NoOffsiteLinks        bool   `json:"no_offsite_links"`
	UserAgent             string `json:"user_agent"`
	SettingsAge           int64  `json:"settings_age"`
}

// JobProgress are the pipeline's counters and the analyzer's response
// counts.
type JobProgress struct {
	BytesDownloaded int64            `json:"bytes_downloaded"`
	ItemsDownloaded int64            `json:"items_downloaded"`
	ItemsQueued     int64            `json:"items_queued"`
	ErrorCount      int64            `json:"error_count"`
	Responses       map[string]int64 `json:"responses"`
}

// handleJob is GET /jobs/IDENT. An ident that is malformed is a 400; one
// with neither a job record nor a failure record a 404; both with a JSON
// error.
// Redis: one pipeline (HGETALL job, SMEMBERS ignores, PTTL, HGETALL
// failure record, LPOS + LLEN in working and the three fixed queues);
// a queued job in none of those costs the SCAN for pending:* and one more
// pipeline; a running job one HGETALL of its pipeline record.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	if s.page(w, r, "page.html", typeJSON) {
		return
	}
	if accepts(w, r, typeJSON, typeHTML) == "" {
		return
	}
	id := r.PathValue("ident")
	if !identRE.MatchString(id) {
		jsonError(w, http.StatusBadRequest, "not a job ident (lowercase letters and digits): "+clip(id, 40))
		return
	}
	d, err := s.store.JobDetail(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if d == nil {
		jsonError(w, http.StatusNotFound, "unknown job "+id)
		return
	}
	v := jobView(d)
	if v.Pipeline != nil && v.State == StateRunning {
		if p, err := s.store.GetPipeline(r.Context(), v.Pipeline.ID); err == nil && p != nil {
			v.Pipeline.Nickname = p.Nickname()
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// jobView builds the view from what the store read.
func jobView(d *store.JobDetail) JobView {
	fields := map[string]string{}
	if d.Failure != nil && d.Failure.Job != nil {
		fields = d.Failure.Job
	}
	if d.Job != nil {
		fields = d.Job.Fields
	}
	f := fieldsOf(fields)
	v := JobView{
		Ident: d.Ident, URL: fields["url"], Depth: fields["fetch_depth"],
		URLFile: fields["url_file"] != "", Slug: fields["slug"], Note: f.str("note"),
		StartedBy: fields["started_by"], StartedIn: fields["started_in"],
		AbortRequested: f.flag("abort_requested"),
		Settings: JobSettings{
			DelayMin: f.optNum("delay_min"), DelayMax: f.optNum("delay_max"),
			Concurrency: f.optNum("concurrency"), SuppressIgnoreReports: f.flag("suppress_ignore_reports"),
			NoOffsiteLinks: f.flag("no_offsite_links"), UserAgent: fields["user_agent"],
			SettingsAge: f.num("settings_age"),
		},
		Progress: JobProgress{
			BytesDownloaded: f.num("bytes_downloaded"), ItemsDownloaded: f.num("items_downloaded"),
			ItemsQueued: f.num("items_queued"), ErrorCount: f.num("error_count"),
			Responses: map[string]int64{},
		},
		IgnorePatterns: d.Ignores,
		QueuedAt:       f.optNum("queued_at"), StartedAt: f.optNum("started_at"), FinishedAt: f.optNum("finished_at"),
	}
	if v.IgnorePatterns == nil {
		v.IgnorePatterns = []string{}
	}
	v.History = d.History
	if v.History == nil {
		v.History = []store.HistoryEntry{}
	}
	for _, b := range []string{"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk"} {
		v.Progress.Responses[b] = f.num(b)
	}
	if pid := fields["pipeline_id"]; pid != "" {
		v.Pipeline = &PipelineRef{ID: pid}
	}
	if d.Job != nil && d.TTL > 0 {
		secs := int64((d.TTL + time.Second - 1) / time.Second)
		v.ExpiresIn = &secs
	}
	switch {
	case d.Failure != nil || f.flag("failed"):
		v.State = StateFailed
		fv := &FailureView{Reason: fields["failed_reason"]}
		if d.Failure != nil {
			at := int64(d.Failure.FailedAt)
			fv = &FailureView{Reason: d.Failure.Reason, FailedBy: d.Failure.FailedBy, FailedAt: &at, Queue: d.Failure.Queue}
			if v.URL == "" {
				v.URL = d.Failure.URL
			}
		}
		v.Failure = fv
	case fields["finished_at"] != "" && f.flag("aborted"):
		v.State = StateAborted
	case fields["finished_at"] != "":
		v.State = StateFinished
	case fields["started_at"] != "" || fields["pipeline_id"] != "" || d.Working:
		v.State = StateRunning
	default:
		v.State = StateQueued
		v.Queue, v.Position, v.QueueLength = d.Queue, d.Position, d.QueueLen
	}
	return v
}

// JobSummary is one entry of /jobs.
type JobSummary struct {
	Ident string `json:"ident"`
	URL   string `json:"url"`
	State string `json:"state"`
	// Queue is the pending queue of a queued job; Position 1 = next.
	Queue      string  `json:"queue,omitempty"`
	Position   int64   `json:"position,omitempty"`
	PipelineID string  `json:"pipeline_id,omitempty"`
	Depth      string  `json:"depth"`
	StartedBy  string  `json:"started_by"`
	StartedIn  string  `json:"started_in"`
	Note       *string `json:"note"`
	QueuedAt   *int64  `json:"queued_at"`
	StartedAt  *int64  `json:"started_at"`
}

// handleJobs is GET /jobs: queued jobs (queues in the order pipelines
// check them, next first) then running jobs, as {"jobs":[…],"count":N}.
// Filters, combined with AND: state=queued|running, pipeline=ID or
// nickname (running jobs of that pipeline), started_by=NICK (exact,
// case-insensitive). Unknown filter values for state are a 400.
// Redis: the SCAN for pending:*, one pipeline of LRANGEs, one pipeline of
// HMGET per job; with pipeline= also SMEMBERS + one pipeline of HGETALL.
func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	if accepts(w, r, typeJSON, typeHTML) == "" {
		return
	}
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "state", "pipeline", "started_by":
		default:
			jsonError(w, http.StatusBadRequest, "unknown parameter "+clip(k, 40)+" (known: state, pipeline, started_by)")
			return
		}
	}
	state := q.Get("state")
	if state != "" && state != StateQueued && state != StateRunning {
		jsonError(w, http.StatusBadRequest, "state must be queued or running (finished jobs are at /finished)")
		return
	}
	pipeline, by := q.Get("pipeline"), q.Get("started_by")
	var pipelineIDs map[string]bool
	if pipeline != "" {
		pipelineIDs = map[string]bool{pipeline: true, store.PipelinePrefix + pipeline: true}
		ps, err := s.store.Pipelines(r.Context())
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		for _, p := range ps {
			if p.Nickname() == pipeline {
				pipelineIDs[p.Key] = true
			}
		}
	}
	jobs, err := s.store.ActiveJobs(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := make([]JobSummary, 0, len(jobs))
	for _, j := range jobs {
		f := fieldsOf(j.Fields)
		if j.Fields["finished_at"] != "" {
			continue // between mark-done steps: not active any more
		}
		js := JobSummary{Ident: j.Ident, URL: j.Fields["url"], PipelineID: j.Fields["pipeline_id"],
			Depth: j.Fields["fetch_depth"], StartedBy: j.Fields["started_by"], StartedIn: j.Fields["started_in"],
			Note: f.str("note"), QueuedAt: f.optNum("queued_at"), StartedAt: f.optNum("started_at")}
		if j.Queue == store.KeyWorking {
			js.State = StateRunning
		} else {
			js.State, js.Queue, js.Position = StateQueued, j.Queue, j.Position
		}
		if state != "" && js.State != state {
			continue
		}
		if by != "" && !strings.EqualFold(js.StartedBy, by) {
			continue
		}
		if pipelineIDs != nil && !pipelineIDs[js.PipelineID] {
			continue
		}
		out = append(out, js)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out, "count": len(out)})
}

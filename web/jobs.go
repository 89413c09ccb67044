package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Job states of /jobs and /jobs/IDENT: the store's names (record.State).
var (
	StateQueued   = record.StateQueued.String()
	StateRunning  = record.StateRunning.String()
	StateFinished = record.StateFinished.String()
	StateAborted  = record.StateAborted.String()
	StateFailed   = record.StateFailed.String()
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
	// Waiting: queued jobs, what holds them (doc/pipeline-api.md, The take
	// rule), as !status IDENT says it.
	Waiting *WaitingView `json:"waiting,omitempty"`
}

// WaitingView is what holds a queued job; absent parts do not hold it.
type WaitingView struct {
	// Paused: the pause of its queue (or of all).
	Paused *PauseView `json:"paused,omitempty"`
	// UserLimit: its nick has Running jobs running, at the Limit.
	UserLimit *UserLimitView `json:"user_limit,omitempty"`
	// Avoided: every connected pipeline avoids its site.
	Avoided *AvoidedView `json:"avoided,omitempty"`
	// LegacyPipelines take straight from Redis: the limits do not bind them.
	LegacyPipelines int `json:"legacy_pipelines"`
}

// PauseView is a pause: the queue (or "all"), who, when (UNIX seconds), why.
type PauseView struct {
	Queue  string `json:"queue"`
	By     string `json:"by"`
	At     int64  `json:"at"`
	Reason string `json:"reason"`
}

// UserLimitView is the per-user running limit holding a job.
type UserLimitView struct {
	Nick    string `json:"nick"`
	Running int    `json:"running"`
	Limit   int    `json:"limit"`
}

// AvoidedView is the avoid rule every connected pipeline has for the site.
type AvoidedView struct {
	Rule      string   `json:"rule"`
	Pipelines []string `json:"pipelines"`
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
	if s.pageOrNotJSON(w, r) {
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
	if v.State == StateQueued {
		wt, err := s.store.WaitingOf(r.Context(), id, v.URL)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		if v.Queue == "" && wt.Position > 0 {
			// Waiting aside while its queue is paused.
			v.Queue, v.Position = wt.Queue, wt.Position
		}
		wv := &WaitingView{LegacyPipelines: wt.Legacy}
		if p := wt.Paused; p != nil {
			wv.Paused = &PauseView{Queue: p.Queue, By: p.By, At: p.AtUnix, Reason: p.Reason}
		}
		if wt.AtLimit() {
			wv.UserLimit = &UserLimitView{Nick: wt.Nick, Running: wt.Running, Limit: wt.Limit}
		}
		if wt.AllAvoid() {
			wv.Avoided = &AvoidedView{Rule: wt.AvoidRule, Pipelines: wt.AvoidedBy}
		}
		v.Waiting = wv
	}
	if v.Pipeline != nil && v.State == StateRunning {
		if p, err := s.store.GetPipeline(r.Context(), v.Pipeline.ID); err == nil && p != nil {
			v.Pipeline.Nickname = p.Nickname()
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// jobView builds the view from what the store read.
func jobView(d *store.JobDetail) JobView {
	j := d.Record()
	v := JobView{
		Ident: d.Ident, URL: j.URL.Value, Depth: j.FetchDepth.Value,
		URLFile: j.URLFile.Value != "", Slug: j.Slug.Value, Note: j.Note.Ptr(),
		StartedBy: j.StartedBy.Value, StartedIn: j.StartedIn.Value,
		AbortRequested: j.AbortRequested,
		Settings: JobSettings{
			DelayMin: j.DelayMin.Ptr(), DelayMax: j.DelayMax.Ptr(),
			Concurrency: j.Concurrency.Ptr(), SuppressIgnoreReports: j.SuppressIgnoreReports,
			NoOffsiteLinks: j.NoOffsiteLinks, UserAgent: j.UserAgent.Value,
			SettingsAge: j.SettingsAge,
		},
		Progress: JobProgress{
			BytesDownloaded: j.BytesDownloaded, ItemsDownloaded: j.ItemsDownloaded,
			ItemsQueued: j.ItemsQueued, ErrorCount: j.Counts.Errors,
			Responses: map[string]int64{
				"r1xx": j.Counts.R1xx, "r2xx": j.Counts.R2xx, "r3xx": j.Counts.R3xx,
				"r4xx": j.Counts.R4xx, "r5xx": j.Counts.R5xx, "runk": j.Counts.Runk,
			},
		},
		IgnorePatterns: d.Ignores,
		QueuedAt:       j.QueuedAt.Ptr(), StartedAt: j.StartedAt.Ptr(), FinishedAt: j.FinishedAt.Ptr(),
	}
	if v.IgnorePatterns == nil {
		v.IgnorePatterns = []string{}
	}
	v.History = d.History
	if v.History == nil {
		v.History = []store.HistoryEntry{}
	}
	if pid := j.PipelineID.Value; pid != "" {
		v.Pipeline = &PipelineRef{ID: pid}
	}
	if d.Job != nil && d.TTL > 0 {
		secs := int64((d.TTL + time.Second - 1) / time.Second)
		v.ExpiresIn = &secs
	}
	st := d.State()
	v.State = st.String()
	switch st {
	case record.StateFailed:
		fv := &FailureView{Reason: j.FailedReason.Value}
		if d.Failure != nil {
			at := int64(d.Failure.FailedAt)
			fv = &FailureView{Reason: d.Failure.Reason, FailedBy: d.Failure.FailedBy, FailedAt: &at, Queue: d.Failure.Queue}
			if v.URL == "" {
				v.URL = d.Failure.URL
			}
		}
		v.Failure = fv
	case record.StateQueued:
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
	for _, a := range jobs {
		j := a.Job
		if j.Done() {
			continue // between mark-done steps: not active any more
		}
		js := JobSummary{Ident: a.Ident, URL: j.URL.Value, PipelineID: j.PipelineID.Value,
			Depth: j.FetchDepth.Value, StartedBy: j.StartedBy.Value, StartedIn: j.StartedIn.Value,
			Note: j.Note.Ptr(), QueuedAt: j.QueuedAt.Ptr(), StartedAt: j.StartedAt.Ptr(), State: a.State().String()}
		if a.State() == record.StateQueued {
			js.Queue, js.Position = a.Queue, a.Position
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

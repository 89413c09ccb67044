package web

import (
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// JobData is a job as upstream's Job#as_json typed it: the `job_data` of
// /logs/recent and /finished. Counters are numbers (0 when absent, as
// upstream's to_i), timestamps whole UNIX seconds or null, flags booleans.
//
// The Failed… fields are ours and appear on /finished only.
type JobData struct {
	Ident                 string  `json:"ident"`
	URL                   *string `json:"url"`
	Depth                 *string `json:"depth"`
	Aborted               bool    `json:"aborted"`
	Finished              bool    `json:"finished"`
	BytesDownloaded       int64   `json:"bytes_downloaded"`
	ItemsDownloaded       int64   `json:"items_downloaded"`
	ItemsQueued           int64   `json:"items_queued"`
	ErrorCount            int64   `json:"error_count"`
	WarcSize              int64   `json:"warc_size"`
	PipelineID            *string `json:"pipeline_id"`
	QueuedAt              *int64  `json:"queued_at"`
	StartedAt             *int64  `json:"started_at"`
	FinishedAt            *int64  `json:"finished_at"`
	StartedBy             *string `json:"started_by"`
	StartedIn             *string `json:"started_in"`
	SuppressIgnoreReports bool    `json:"suppress_ignore_reports"`
	Concurrency           *int64  `json:"concurrency"`
	DelayMin              *int64  `json:"delay_min"`
	DelayMax              *int64  `json:"delay_max"`
	Note                  *string `json:"note"`
	R1xx                  int64   `json:"r1xx"`
	R2xx                  int64   `json:"r2xx"`
	R3xx                  int64   `json:"r3xx"`
	R4xx                  int64   `json:"r4xx"`
	R5xx                  int64   `json:"r5xx"`
	Runk                  int64   `json:"runk"`

	Failed       *bool   `json:"failed,omitempty"`
	FailedReason *string `json:"failed_reason,omitempty"`
	FailedBy     *string `json:"failed_by,omitempty"`
}

// jobData is j as upstream's Job#as_json typed it.
func jobData(j *record.Job) JobData {
	return JobData{
		Ident:                 j.Ident,
		URL:                   j.URL.Ptr(),
		Depth:                 j.FetchDepth.Ptr(),
		Aborted:               j.Aborted,
		Finished:              j.Done(),
		BytesDownloaded:       j.BytesDownloaded,
		ItemsDownloaded:       j.ItemsDownloaded,
		ItemsQueued:           j.ItemsQueued,
		ErrorCount:            j.Counts.Errors,
		WarcSize:              j.WarcSize,
		PipelineID:            j.PipelineID.Ptr(),
		QueuedAt:              j.QueuedAt.Ptr(),
		StartedAt:             j.StartedAt.Ptr(),
		FinishedAt:            j.FinishedAt.Ptr(),
		StartedBy:             j.StartedBy.Ptr(),
		StartedIn:             j.StartedIn.Ptr(),
		SuppressIgnoreReports: j.SuppressIgnoreReports,
		Concurrency:           j.Concurrency.Ptr(),
		DelayMin:              j.DelayMin.Ptr(),
		DelayMax:              j.DelayMax.Ptr(),
		Note:                  j.Note.Ptr(),
		R1xx:                  j.Counts.R1xx,
		R2xx:                  j.Counts.R2xx,
		R3xx:                  j.Counts.R3xx,
		R4xx:                  j.Counts.R4xx,
		R5xx:                  j.Counts.R5xx,
		Runk:                  j.Counts.Runk,
	}
}

// finishedData is the /finished entry of a finished, aborted or failed job.
// A failed job's record has usually expired (5 s after the fail): its
// data then comes from the job record kept in the failure record (its URL
// from the failure record when that copy has none), and finished_at is
// the time it failed.
func finishedData(fj store.FinishedJob) JobData {
	rec := fj.Record()
	d := jobData(rec)
	if fj.Failure != nil && rec.URL.Value == "" && fj.Failure.URL != "" {
		url := fj.Failure.URL
		d.URL = &url
	}
	failed := fj.State() == record.StateFailed
	d.Failed = &failed
	if fj.Failure != nil {
		d.Finished = true
		at := int64(fj.Failure.FailedAt)
		if d.FinishedAt == nil {
			d.FinishedAt = &at
		}
		d.FailedReason = &fj.Failure.Reason
		d.FailedBy = &fj.Failure.FailedBy
	} else if failed {
		d.Finished = true
		d.FailedReason = rec.FailedReason.Ptr()
	}
	return d
}

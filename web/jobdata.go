package web

import (
	"strconv"

	"github.com/archiveteam/archivebot-go/coordinator/store"
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

// fieldsOf gives typed access to a raw job hash.
type fieldsOf map[string]string

func (f fieldsOf) str(k string) *string {
	if v, ok := f[k]; ok {
		return &v
	}
	return nil
}

// num parses a counter as upstream's to_i would: 0 when absent or junk;
// a float such as "12.0" is cut to its integer part.
func (f fieldsOf) num(k string) int64 {
	v := f[k]
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		return int64(x)
	}
	return 0
}

// optNum is num, or null when the field is absent or not a number.
func (f fieldsOf) optNum(k string) *int64 {
	v, ok := f[k]
	if !ok {
		return nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return &n
	}
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		n := int64(x)
		return &n
	}
	return nil
}

func (f fieldsOf) flag(k string) bool { return f[k] == "true" }

// jobData types a job hash. ident is the job's ident (the hash has none).
func jobData(ident string, fields map[string]string) JobData {
	f := fieldsOf(fields)
	return JobData{
		Ident:                 ident,
		URL:                   f.str("url"),
		Depth:                 f.str("fetch_depth"),
		Aborted:               f.flag("aborted"),
		Finished:              f["finished_at"] != "",
		BytesDownloaded:       f.num("bytes_downloaded"),
		ItemsDownloaded:       f.num("items_downloaded"),
		ItemsQueued:           f.num("items_queued"),
		ErrorCount:            f.num("error_count"),
		WarcSize:              f.num("warc_size"),
		PipelineID:            f.str("pipeline_id"),
		QueuedAt:              f.optNum("queued_at"),
		StartedAt:             f.optNum("started_at"),
		FinishedAt:            f.optNum("finished_at"),
		StartedBy:             f.str("started_by"),
		StartedIn:             f.str("started_in"),
		SuppressIgnoreReports: f.flag("suppress_ignore_reports"),
		Concurrency:           f.optNum("concurrency"),
		DelayMin:              f.optNum("delay_min"),
		DelayMax:              f.optNum("delay_max"),
		Note:                  f.str("note"),
		R1xx:                  f.num("r1xx"),
		R2xx:                  f.num("r2xx"),
		R3xx:                  f.num("r3xx"),
		R4xx:                  f.num("r4xx"),
		R5xx:                  f.num("r5xx"),
		Runk:                  f.num("runk"),
	}
}

// finishedData is the /finished entry of a finished, aborted or failed job.
// A failed job's record has usually expired (5 s after the fail): its
// data then comes from the job record kept in the failure record, and
// finished_at is the time it failed.
func finishedData(fj store.FinishedJob) JobData {
	fields := map[string]string{}
	if fj.Failure != nil && fj.Failure.Job != nil {
		fields = fj.Failure.Job
	}
	if fj.Job != nil {
		fields = fj.Job.Fields
	}
	if fj.Failure != nil && fields["url"] == "" && fj.Failure.URL != "" {
		fields = cloneWith(fields, "url", fj.Failure.URL)
	}
	d := jobData(fj.Ident, fields)
	failed := fj.Failure != nil || fields["failed"] == "true"
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
		if r, ok := fields["failed_reason"]; ok {
			d.FailedReason = &r
		}
	}
	return d
}

func cloneWith(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

package record

import (
	"encoding/json"
	"strconv"
)

// Failure is a failure record, archivebot:failed:IDENT (a hash the store
// keeps a week): what operators need after a job failed, since its job
// record expires 5 seconds after the fail. Fields (all strings):
//
//	url         the job's URL
//	reason      why it failed ("no heartbeat for 2h0m", "failed by NICK")
//	failed_by   who or what failed it: "reaper", or the operator's nick
//	failed_at   UNIX seconds (may have a fraction)
//	queue       where it was: pending, pending-ao, pending-large,
//	            pending:NAME, or working (it was running)
//	job         JSON object: the job record as it was at the fail (every
//	            field a string, as in Redis): fetch_depth, started_by,
//	            started_in, queued_at, settings… — what a requeue needs
//
// Unknown fields are kept in Extra.
type Failure struct {
	Ident    string
	URL      string
	Reason   string
	FailedBy string
	FailedAt float64
	Queue    string
	// Job is the job record at the time of the fail (nil when absent).
	Job   map[string]string
	Extra map[string]string
}

// DecodeFailure decodes a failure record hash (nil for none: an empty
// or nil map). Like DecodeJob it never fails: a job copy that is not a
// JSON object is dropped, a failed_at that is no number reads as 0.
func DecodeFailure(ident string, m map[string]string) *Failure {
	if len(m) == 0 {
		return nil
	}
	f := &Failure{Ident: ident, URL: m["url"], Reason: m["reason"], FailedBy: m["failed_by"], Queue: m["queue"]}
	f.FailedAt, _ = strconv.ParseFloat(m["failed_at"], 64)
	if raw := m["job"]; raw != "" {
		var job map[string]any
		if json.Unmarshal([]byte(raw), &job) == nil {
			f.Job = make(map[string]string, len(job))
			for k, v := range job {
				switch v := v.(type) {
				case string:
					f.Job[k] = v
				case nil:
				default:
					b, _ := json.Marshal(v)
					f.Job[k] = string(b)
				}
			}
		}
	}
	for k, v := range m {
		switch k {
		case "url", "reason", "failed_by", "failed_at", "queue", "job":
		default:
			if f.Extra == nil {
				f.Extra = map[string]string{}
			}
			f.Extra[k] = v
		}
	}
	return f
}

// JobRecord is the copy of the job record the failure record keeps,
// decoded (every field missing when it keeps none).
func (f *Failure) JobRecord() *Job { return DecodeJob(f.Ident, f.Job) }

// Shown is the job record to show for a job (after Speaking): its record,
// else the copy its failure record keeps, else an empty one.
func Shown(ident string, job *Job, fail *Failure) *Job {
	job, fail = Speaking(job, fail)
	if job != nil {
		return job
	}
	if fail != nil {
		return fail.JobRecord()
	}
	return DecodeJob(ident, nil)
}

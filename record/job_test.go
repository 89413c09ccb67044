package record_test

import (
	"reflect"
	"testing"

	"github.com/archiveteam/archivebot-go/record"
)

// TestDecodeJobNumbers: numeric fields are untrusted; a value that is no
// usable number reads as absent (counters: 0), never as an error.
func TestDecodeJobNumbers(t *testing.T) {
	for _, c := range []struct {
		in    string
		ok    bool
		n     int64
		float float64
	}{
		{"0", true, 0, 0},
		{"1732900000", true, 1732900000, 1732900000},
		{"1732900000.75", true, 1732900000, 1732900000.75},
		{"-5", true, -5, -5},
		{"+7", true, 7, 7},
		{"-", false, 0, 0},
		{"0x10", false, 0, 0},
		{"-2.9", true, -2, -2.9},
		{"12.0", true, 12, 12},
		{"1e3", true, 1000, 1000},
		{"9223372036854775807", true, 9223372036854775807, 9223372036854775807},
		{"9007199254740993", true, 9007199254740993, 9007199254740992}, // exact as an integer
		{"", false, 0, 0},
		{"abc", false, 0, 0},
		{"12abc", false, 0, 0},
		{" 12", false, 0, 0},
		{"true", false, 0, 0},
		{"NaN", false, 0, 0},
		{"Inf", false, 0, 0},
		{"-Inf", false, 0, 0},
		{"1e300", false, 0, 0},
		{"1e400", false, 0, 0},
		{"-1e19", false, 0, 0},
		{"99999999999999999999", false, 0, 0},
		{`{"a":1}`, false, 0, 0},
	} {
		j := record.DecodeJob("x", map[string]string{"queued_at": c.in, "bytes_downloaded": c.in})
		q := j.QueuedAt
		if q.OK != c.ok || q.Int != c.n || q.Float != c.float || q.Value != c.in || !q.Set {
			t.Errorf("queued_at %q: %+v, want ok %v int %d float %v", c.in, q, c.ok, c.n, c.float)
		}
		if p := q.Ptr(); (p != nil) != c.ok || (p != nil && *p != c.n) {
			t.Errorf("queued_at %q: Ptr %v", c.in, p)
		}
		if j.BytesDownloaded != c.n {
			t.Errorf("bytes_downloaded %q: %d, want %d", c.in, j.BytesDownloaded, c.n)
		}
	}
}

// TestDecodeJob: every field the node reads, from a full hash, an empty
// one and one with junk everywhere.
func TestDecodeJob(t *testing.T) {
	full := map[string]string{
		"url": "http://example.com/", "url_file": "http://example.com/", "fetch_depth": "inf",
		"slug": "example.com-inf", "user_agent": "", "started_by": "alice", "started_in": "#archivebot",
		"note": "why", "queued_at": "1732900000", "delay_min": "250", "delay_max": "375.5",
		"concurrency": "3", "settings_age": "2", "suppress_ignore_reports": "true", "no_offsite_links": "true",
		"abort_requested": "true", "pipeline_id": "pipeline:abc", "started_at": "1732900001.25",
		"finished_at": "1732900100.5", "aborted": "true", "bytes_downloaded": "123456789",
		"items_downloaded": "20", "items_queued": "50", "warc_size": "99", "r1xx": "1", "r2xx": "2",
		"r3xx": "3", "r4xx": "4", "r5xx": "5", "runk": "6", "error_count": "7",
		"last_broadcasted_log_entry": "42", "failed": "true", "failed_reason": "gone", "heartbeat": "9",
	}
	num := func(v string, n int64, f float64) record.Number {
		return record.Number{Text: record.Text{Value: v, Set: true}, OK: true, Int: n, Float: f}
	}
	txt := func(v string) record.Text { return record.Text{Value: v, Set: true} }
	want := &record.Job{Ident: "abc", Fields: full,
		URL: txt("http://example.com/"), URLFile: txt("http://example.com/"), FetchDepth: txt("inf"),
		Slug: txt("example.com-inf"), UserAgent: txt(""), StartedBy: txt("alice"), StartedIn: txt("#archivebot"),
		Note: txt("why"), QueuedAt: num("1732900000", 1732900000, 1732900000), DelayMin: num("250", 250, 250),
		DelayMax: num("375.5", 375, 375.5), Concurrency: num("3", 3, 3), SettingsAge: 2,
		SuppressIgnoreReports: true, NoOffsiteLinks: true, AbortRequested: true,
		PipelineID: txt("pipeline:abc"), StartedAt: num("1732900001.25", 1732900001, 1732900001.25),
		FinishedAt: num("1732900100.5", 1732900100, 1732900100.5), Aborted: true,
		BytesDownloaded: 123456789, ItemsDownloaded: 20, ItemsQueued: 50, WarcSize: 99,
		Counts:        record.LogCounts{R1xx: 1, R2xx: 2, R3xx: 3, R4xx: 4, R5xx: 5, Runk: 6, Errors: 7},
		LastBroadcast: "42", Failed: true, FailedReason: txt("gone"),
	}
	if got := record.DecodeJob("abc", full); !reflect.DeepEqual(got, want) {
		t.Errorf("full hash:\n got %+v\nwant %+v", got, want)
	}
	if got, want := record.DecodeJob("abc", nil), (&record.Job{Ident: "abc"}); !reflect.DeepEqual(got, want) {
		t.Errorf("no hash: %+v", got)
	}
	if p := record.DecodeJob("abc", nil).URL.Ptr(); p != nil {
		t.Errorf("a missing text field has a value: %q", *p)
	}
	if p := record.DecodeJob("abc", map[string]string{"url": ""}).URL.Ptr(); p == nil || *p != "" {
		t.Errorf("an empty text field is not \"\": %v", p)
	}

	// Junk: every field present with a value of the wrong kind.
	junk := map[string]string{}
	for k := range full {
		junk[k] = "TRUE\x00\xff1e999"
	}
	j := record.DecodeJob("abc", junk)
	for name, n := range map[string]record.Number{"queued_at": j.QueuedAt, "started_at": j.StartedAt,
		"finished_at": j.FinishedAt, "delay_min": j.DelayMin, "delay_max": j.DelayMax, "concurrency": j.Concurrency} {
		if n.OK || n.Int != 0 || n.Float != 0 || n.Ptr() != nil || !n.Set || n.Value != junk[name] {
			t.Errorf("junk %s: %+v", name, n)
		}
	}
	if j.SettingsAge != 0 || j.BytesDownloaded != 0 || j.ItemsDownloaded != 0 || j.ItemsQueued != 0 ||
		j.WarcSize != 0 || j.Counts != (record.LogCounts{}) {
		t.Errorf("junk counters: %+v", j)
	}
	if j.Aborted || j.AbortRequested || j.Failed || j.SuppressIgnoreReports || j.NoOffsiteLinks {
		t.Errorf("junk flags read as true: %+v", j)
	}
	if j.URL.Value != junk["url"] || j.Note.Value != junk["note"] || !reflect.DeepEqual(j.Fields, junk) {
		t.Errorf("junk text not kept as is: %+v", j)
	}
	// A junk finished_at still marks the job done: the rule tests presence.
	if !j.Done() || j.State() != record.StateFinished {
		t.Errorf("junk: done %v state %v", j.Done(), j.State())
	}
}

// TestJobState: the one rule, every state, with and without a failure
// record and a place in working.
func TestJobState(t *testing.T) {
	fail := &record.Failure{Ident: "x", Reason: "gone"}
	for _, c := range []struct {
		name    string
		fields  map[string]string
		nilJob  bool
		fail    *record.Failure
		working bool
		want    record.State
	}{
		{"just queued", map[string]string{"url": "u", "queued_at": "1"}, false, nil, false, record.StateQueued},
		{"abort requested, still queued", map[string]string{"url": "u", "abort_requested": "true"}, false, nil, false, record.StateQueued},
		{"aborted without finished_at", map[string]string{"url": "u", "aborted": "true"}, false, nil, false, record.StateQueued},
		{"failed not true", map[string]string{"url": "u", "failed": "yes"}, false, nil, false, record.StateQueued},
		{"in working only", map[string]string{"url": "u"}, false, nil, true, record.StateRunning},
		{"started_at", map[string]string{"url": "u", "started_at": "1.5"}, false, nil, false, record.StateRunning},
		{"pipeline_id", map[string]string{"url": "u", "pipeline_id": "pipeline:a"}, false, nil, false, record.StateRunning},
		{"empty started_at", map[string]string{"url": "u", "started_at": ""}, false, nil, false, record.StateQueued},
		{"finished", map[string]string{"url": "u", "started_at": "1", "finished_at": "2"}, false, nil, true, record.StateFinished},
		{"finished, junk time", map[string]string{"url": "u", "finished_at": "soon"}, false, nil, false, record.StateFinished},
		{"finished, aborted not true", map[string]string{"url": "u", "finished_at": "2", "aborted": "1"}, false, nil, false, record.StateFinished},
		{"empty finished_at", map[string]string{"url": "u", "finished_at": "", "aborted": "true"}, false, nil, false, record.StateQueued},
		{"aborted", map[string]string{"url": "u", "finished_at": "2", "aborted": "true"}, false, nil, false, record.StateAborted},
		{"failed flag", map[string]string{"url": "u", "failed": "true", "finished_at": "2", "aborted": "true"}, false, nil, false, record.StateFailed},
		{"failure record, failed job", map[string]string{"url": "u", "failed": "true"}, false, fail, false, record.StateFailed},
		// A failure record speaks only while no newer registration exists:
		// a registered hash without `failed` is newer (doc/protocol.md, Which
		// record speaks for a job).
		{"failure record, newer job finished", map[string]string{"url": "u", "finished_at": "2"}, false, fail, false, record.StateFinished},
		{"failure record, newer job queued", map[string]string{"url": "u", "queued_at": "9"}, false, fail, false, record.StateQueued},
		{"failure record, newer job running", map[string]string{"url": "u"}, false, fail, true, record.StateRunning},
		// A hash without url is a ghost: no record.
		{"ghost, failure record", map[string]string{"heartbeat": "7", "bytes_downloaded": "10"}, false, fail, false, record.StateFailed},
		{"ghost with finished_at, failure record", map[string]string{"finished_at": "3", "pipeline_id": "pipeline:a"}, false, fail, false, record.StateFailed},
		{"failure record, no job", nil, true, fail, false, record.StateFailed},
		{"no job, nothing", nil, true, nil, false, record.StateQueued},
	} {
		var j *record.Job
		if !c.nilJob {
			j = record.DecodeJob("x", c.fields)
		}
		if got := record.StateOf(j, c.fail, c.working); got != c.want {
			t.Errorf("%s: StateOf %v, want %v", c.name, got, c.want)
		}
		if j != nil && c.fail == nil && !c.working {
			if got := j.State(); got != c.want {
				t.Errorf("%s: State %v, want %v", c.name, got, c.want)
			}
			if j.Finished() != c.want.Ended() {
				t.Errorf("%s: Finished %v", c.name, j.Finished())
			}
		}
	}
	for s, name := range map[record.State]string{record.StateQueued: "queued", record.StateRunning: "running",
		record.StateFinished: "finished", record.StateAborted: "aborted", record.StateFailed: "failed"} {
		if s.String() != name {
			t.Errorf("state %d is %q, want %q", int(s), s.String(), name)
		}
		if s.Ended() != (s >= record.StateFinished) {
			t.Errorf("%s: Ended %v", name, s.Ended())
		}
	}
}

// BenchmarkDecodeJob: the cost of the one decode, paid once per hash read
// (a running job's hash, as the stream reads it).
func BenchmarkDecodeJob(b *testing.B) {
	m := map[string]string{"url": "http://example.com/", "fetch_depth": "inf", "started_by": "alice",
		"started_in": "#archivebot", "queued_at": "1732900000", "started_at": "1732900001.25",
		"pipeline_id": "pipeline:abc", "delay_min": "250", "delay_max": "375", "concurrency": "3",
		"settings_age": "1", "bytes_downloaded": "123456789", "items_downloaded": "2000",
		"items_queued": "5000", "r2xx": "1000", "r4xx": "3", "error_count": "3",
		"last_broadcasted_log_entry": "12345", "heartbeat": "400", "log_key": "abc_log"}
	b.ReportAllocs()
	for range b.N {
		_ = record.DecodeJob("abc", m)
	}
}

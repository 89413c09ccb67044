package web

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

const (
	ctJSON = "application/json; charset=utf-8"
	ctText = "text/plain; charset=utf-8"
)

// Every endpoint against upstream-like state, on miniredis and real Redis.
func TestEndpoints(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f := newFixture(t, b)
		h := f.srv.Handler()
		t.Run("status", func(t *testing.T) { testStatus(t, f, h) })
		t.Run("pending", func(t *testing.T) { testPending(t, f, h) })
		t.Run("pipelines", func(t *testing.T) { testPipelines(t, f, h) })
		t.Run("logs/recent", func(t *testing.T) { testRecent(t, f, h) })
		t.Run("finished", func(t *testing.T) { testFinished(t, f, h) })
		t.Run("ignores", func(t *testing.T) { testIgnores(t, f, h) })
		t.Run("feed", func(t *testing.T) { testFeed(t, f, h) })
		t.Run("jobs/IDENT", func(t *testing.T) { testJob(t, f, h) })
		t.Run("jobs", func(t *testing.T) { testJobs(t, f, h) })
		t.Run("bad input", func(t *testing.T) { testBadInput(t, f, h) })
	})
}

func testStatus(t *testing.T, f *fixture, h http.Handler) {
	for _, accept := range []string{"", "*/*", "application/json", "text/html,application/xhtml+xml,*/*;q=0.8"} {
		r := get(t, h, "/status", accept)
		expect(t, r, 200, ctJSON)
		if r.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("no CORS header: %v", r.Header)
		}
		var got map[string]any
		decode(t, r, &got)
		want := map[string]any{
			"pending": 2.0, "pending-ao": 1.0, "pending-others": 2.0,
			"pending-others-details": map[string]any{"pending:foo": 1.0, "pending-large": 1.0},
			"working":                2.0, "completed": 1.0, "aborted": 1.0, "failed": 1.0,
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("Accept %q: /status (-want +got):\n%s", accept, d)
		}
	}
}

func testPending(t *testing.T, f *fixture, h http.Handler) {
	r := get(t, h, "/pending", "*/*")
	expect(t, r, 200, ctText)
	want := "pending\n" +
		"  1. http://pend1.example.com/ (" + f.pend1 + ")\n" +
		"  2. http://pend2.example.com/ (" + f.pend2 + ")\n" +
		"\n" +
		"pending-ao\n" +
		"  1. http://ao.example.com/page (" + f.ao + ")\n" +
		"\n" +
		"pending-large\n" +
		"  1. http://large.example.com/ (" + f.large + ")\n" +
		"\n" +
		"pending:foo\n" +
		"  1. http://named.example.com/ (" + f.named + ")"
	if got := body(t, r); got != want {
		t.Fatalf("/pending:\n%s", cmp.Diff(want, got))
	}
}

func testPipelines(t *testing.T, f *fixture, h http.Handler) {
	r := get(t, h, "/pipelines", "application/json")
	expect(t, r, 200, ctJSON)
	var got struct {
		Pipelines []map[string]string `json:"pipelines"`
	}
	decode(t, r, &got)
	if len(got.Pipelines) != 1 {
		t.Fatalf("pipelines: %+v", got)
	}
	p := got.Pipelines[0]
	for k, v := range map[string]string{"id": f.pipe.Key(), "nickname": "simpipe", "version": "20250101.01",
		"hostname": "sim.invalid", "fqdn": "sim.invalid", "ts": "1732900000", "status": "Running",
		"mem_usage": "0.25", "mem_available": "4000000000", "disk_usage": "0.5", "disk_available": "100000000000",
		"load_average_1m": "0.5", "load_average_5m": "0.4", "load_average_15m": "0.3"} {
		if p[k] != v {
			t.Errorf("pipeline %s = %q, want %q", k, p[k], v)
		}
	}
	if p["pid"] == "" || p["python"] == "" || len(p) != len(pipelineFields) {
		t.Errorf("pipeline record %v: want exactly the fields %v", p, pipelineFields)
	}
}

// wantRun1 is job_data of the first running job, typed as upstream's
// Job#as_json.
func wantRun1(f *fixture) map[string]any {
	return map[string]any{
		"ident": f.run1, "url": "http://run1.example.com/", "depth": "inf",
		"aborted": false, "finished": false,
		"bytes_downloaded": 123456.0, "items_downloaded": 5.0, "items_queued": 40.0,
		"error_count": 1.0, "warc_size": 0.0,
		"pipeline_id": f.pipe.Key(), "queued_at": 1732900000.0, "started_at": 1732900000.0, "finished_at": nil,
		"started_by": "alice", "started_in": "#archivebot",
		"suppress_ignore_reports": true, "concurrency": 3.0, "delay_min": 250.0, "delay_max": 375.0, "note": nil,
		"r1xx": 0.0, "r2xx": 2.0, "r3xx": 1.0, "r4xx": 1.0, "r5xx": 1.0, "runk": 0.0,
	}
}

func testRecent(t *testing.T, f *fixture, h http.Handler) {
	cases := []struct {
		query         string
		run1, run2, n int
	}{
		// run1's log: 5 downloads, 1 ignore, 1 line that is not JSON (skipped).
		{"", 6, 1, 7},
		{"?count=10", 6, 1, 7},
		{"?count=11", 6, 1, 7},   // clamped to 10
		{"?count=1000", 6, 1, 7}, // clamped
		{"?count=99999999999999999999999", 6, 1, 7},
		{"?count=2", 1, 1, 2},
		{"?count=1", 0, 1, 1},
	}
	for _, c := range cases {
		r := get(t, h, "/logs/recent"+c.query, "application/json")
		expect(t, r, 200, ctJSON)
		if r.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("no CORS header")
		}
		var got []map[string]any
		decode(t, r, &got)
		n := map[string]int{}
		for _, e := range got {
			jd, _ := e["job_data"].(map[string]any)
			n[jd["ident"].(string)]++
			if jd["ident"] == f.run1 {
				if d := cmp.Diff(wantRun1(f), jd); d != "" {
					t.Fatalf("job_data (-want +got):\n%s", d)
				}
			}
		}
		if len(got) != c.n || n[f.run1] != c.run1 || n[f.run2] != c.run2 {
			t.Fatalf("%s: %d entries, per job %v; want %d, %d/%d", c.query, len(got), n, c.n, c.run1, c.run2)
		}
	}
	// The entries themselves: the last one of run1 with count=2 is the ignore.
	var got []map[string]any
	decode(t, get(t, h, "/logs/recent?count=2", ""), &got)
	for _, e := range got {
		if e["job_data"].(map[string]any)["ident"] != f.run1 {
			continue
		}
		for k, v := range map[string]any{"type": "ignore", "url": "http://run1.example.com/cgi-bin/x",
			"pattern": testSets["global"][0], "source": "global", "ts": 1732900000.0} {
			if e[k] != v {
				t.Errorf("entry %s = %v, want %v", k, e[k], v)
			}
		}
	}
}

func testFinished(t *testing.T, f *fixture, h http.Handler) {
	r := get(t, h, "/finished", "")
	expect(t, r, 200, ctJSON)
	if r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("no CORS header")
	}
	var got []map[string]any
	decode(t, r, &got)
	by := map[string]map[string]any{}
	for _, e := range got {
		by[e["ident"].(string)] = e
	}
	if len(got) != 3 || by[f.finished] == nil || by[f.aborted] == nil || by[f.failed] == nil {
		t.Fatalf("/finished: %v", got)
	}
	fin := by[f.finished]
	for k, v := range map[string]any{"url": "http://done.example.com/", "finished": true, "aborted": false,
		"failed": false, "finished_at": 1732900000.0, "started_at": 1732900000.0, "queued_at": 1732900000.0,
		"pipeline_id": f.pipe.Key(), "depth": "inf", "concurrency": 3.0, "r2xx": 0.0} {
		if fin[k] != v {
			t.Errorf("finished job %s = %#v, want %#v", k, fin[k], v)
		}
	}
	if _, ok := fin["failed_reason"]; ok {
		t.Errorf("finished job has failed_reason: %v", fin)
	}
	ab := by[f.aborted]
	if ab["aborted"] != true || ab["finished"] != true || ab["failed"] != false {
		t.Errorf("aborted job: %v", ab)
	}
	fl := by[f.failed]
	for k, v := range map[string]any{"url": "http://failed.example.com/", "failed": true, "finished": true,
		"failed_reason": "failed by bob", "failed_by": "bob", "finished_at": 1732900100.0, "depth": "shallow",
		"aborted": false, "started_by": "alice"} {
		if fl[k] != v {
			t.Errorf("failed job %s = %#v, want %#v", k, fl[k], v)
		}
	}
}

func testIgnores(t *testing.T, f *fixture, h http.Handler) {
	r := get(t, h, "/ignores/"+f.run1, "")
	expect(t, r, 200, ctText)
	want := f.run1 + "\t/\\.git/\n" +
		f.run1 + "\t^http://run1\\.example\\.com/private/\n" +
		f.run1 + "\t^https?://[^/]+/cgi-bin/"
	if got := body(t, r); got != want {
		t.Fatalf("/ignores:\n%s", cmp.Diff(want, got))
	}
	// Several idents; one without patterns adds no line.
	if got := body(t, get(t, h, "/ignores/"+f.run2+","+f.run1, "")); got != want {
		t.Fatalf("/ignores two idents:\n%s", cmp.Diff(want, got))
	}
	r = get(t, h, "/ignores/"+f.run1+"?compact=true", "")
	expect(t, r, 200, ctText)
	want = "Ignore sets for job " + f.run1 + ":\n" +
		"  global\n" +
		"\n" +
		"Manual ignores for job " + f.run1 + ":\n" +
		"  ^http://run1\\.example\\.com/private/"
	if got := body(t, r); got != want {
		t.Fatalf("/ignores compact:\n%s", cmp.Diff(want, got))
	}
	// The failed job's record has gone (or soon will) but its failure
	// record makes it known.
	expect(t, get(t, h, "/ignores/"+f.failed, ""), 200, ctText)
}

func TestCompactIgnores(t *testing.T) {
	sets := map[string][]string{
		"global": {"g1", "g2"},
		"blogs":  {"b1", "b2", "g1"}, // g1 is also global: it must not make blogs match
		"forums": {"f1"},
	}
	got := compactIgnores("x", []string{"g1", "g2", "b1", "m2", "m1"}, sets)
	want := "Ignore sets for job x:\n  global\n  blogs, excluding:\n    b2\n\nManual ignores for job x:\n  m1\n  m2"
	if got != want {
		t.Fatalf("%s", cmp.Diff(want, got))
	}
	got = compactIgnores("x", []string{"g1"}, sets)
	if want := "Ignore sets for job x:\n  global, excluding:\n    g2"; got != want {
		t.Fatalf("%s", cmp.Diff(want, got))
	}
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func testFeed(t *testing.T, f *fixture, h http.Handler) {
	// JSON: newest first, sha1 of "SCORE-TEXT" with SCORE as Ruby writes it.
	r := get(t, h, "/feed", "application/json")
	expect(t, r, 200, ctJSON)
	// The answer depends on Accept: caches must not hand Atom to a JSON client.
	if v := r.Header.Values("Vary"); len(v) != 1 || v[0] != "Accept" {
		t.Errorf("/feed Vary = %q, want exactly [Accept]", v)
	}
	raw := body(t, r)
	if !strings.Contains(raw, "?a=1&b=<2>") {
		t.Errorf("JSON escapes URLs (Ruby's to_json does not): %s", raw)
	}
	var got [][]string
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"2024-11-29T17:06:41+00:00", f.tweet2, sha1hex("1732900001.5-" + f.tweet2)},
		{"2024-11-29T17:06:40+00:00", f.tweet1, sha1hex("1732900000.0-" + f.tweet1)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("/feed JSON (-want +got):\n%s", d)
	}
	// Atom for */* and no Accept (listed first upstream), and on its path.
	for _, c := range []struct{ path, accept string }{{"/feed", "*/*"}, {"/feed", ""}, {"/feed/archivebot.atom", "*/*"}, {"/feed", "application/atom+xml"}} {
		r := get(t, h, c.path, c.accept)
		expect(t, r, 200, "application/atom+xml; charset=utf-8")
		var doc struct {
			Title   string `xml:"title"`
			Updated string `xml:"updated"`
			Entries []struct {
				Title   string `xml:"title"`
				Content string `xml:"content"`
				Updated string `xml:"updated"`
				ID      string `xml:"id"`
			} `xml:"entry"`
		}
		if err := xml.Unmarshal([]byte(body(t, r)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Title != "ArchiveBot" || doc.Updated != "2024-11-29T17:06:40+00:00" || len(doc.Entries) != 2 {
			t.Fatalf("atom: %+v", doc)
		}
		e := doc.Entries[0]
		if e.Title != f.tweet2 || e.Content != f.tweet2 || e.Updated != want[0][0] || e.ID != "urn:X-SHA1:"+want[0][2] {
			t.Fatalf("atom entry: %+v", e)
		}
	}
	for _, c := range []struct{ path, accept string }{{"/feed", "application/rss+xml"}, {"/feed/archivebot.rss", ""}} {
		r := get(t, h, c.path, c.accept)
		expect(t, r, 200, "application/rss+xml; charset=utf-8")
		var doc struct {
			Items []struct {
				Title   string `xml:"title"`
				PubDate string `xml:"pubDate"`
				GUID    string `xml:"guid"`
			} `xml:"channel>item"`
		}
		if err := xml.Unmarshal([]byte(body(t, r)), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Items) != 2 || doc.Items[1].Title != f.tweet1 || doc.Items[1].PubDate != "Fri, 29 Nov 2024 17:06:40 +0000" ||
			doc.Items[1].GUID != "urn:X-SHA1:"+want[1][2] {
			t.Fatalf("rss: %+v", doc)
		}
	}
	// The RSS path serves only RSS.
	expect(t, get(t, h, "/feed/archivebot.rss", "application/json"), 406, ctJSON)
}

func TestRubyFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1732900000: "1732900000.0", 1732900001.5: "1732900001.5", 0: "0.0", 1e16: "1.0e+16",
		1.5e20: "1.5e+20", 0.0001: "0.0001", 0.00001: "1.0e-05", -3: "-3.0", 123.456: "123.456",
	} {
		if got := rubyFloat(f); got != want {
			t.Errorf("rubyFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func testJob(t *testing.T, f *fixture, h http.Handler) {
	view := func(id string) JobView {
		t.Helper()
		r := get(t, h, "/jobs/"+id, "")
		expect(t, r, 200, ctJSON)
		var v JobView
		decode(t, r, &v)
		return v
	}
	for _, c := range []struct {
		id, queue   string
		pos, length int64
	}{{f.pend1, "pending", 1, 2}, {f.pend2, "pending", 2, 2}, {f.ao, "pending-ao", 1, 1},
		{f.large, "pending-large", 1, 1}, {f.named, "pending:foo", 1, 1}} {
		v := view(c.id)
		if v.State != StateQueued || v.Queue != c.queue || v.Position != c.pos || v.QueueLength != c.length ||
			v.URL != f.urls[c.id] || v.Pipeline != nil || v.StartedAt != nil || v.ExpiresIn != nil {
			t.Errorf("%s: %+v, want queued in %s at %d of %d", c.id, v, c.queue, c.pos, c.length)
		}
	}
	v := view(f.run1)
	want := JobView{Ident: f.run1, URL: "http://run1.example.com/", State: StateRunning,
		Pipeline: &PipelineRef{ID: f.pipe.Key(), Nickname: "simpipe"}, Depth: "inf", Slug: "x-inf",
		StartedBy: "alice", StartedIn: "#archivebot",
		Settings: JobSettings{DelayMin: ptr(int64(250)), DelayMax: ptr(int64(375)), Concurrency: ptr(int64(3)),
			SuppressIgnoreReports: true, SettingsAge: 4},
		Progress: JobProgress{BytesDownloaded: 123456, ItemsDownloaded: 5, ItemsQueued: 40, ErrorCount: 1,
			Responses: map[string]int64{"r1xx": 0, "r2xx": 2, "r3xx": 1, "r4xx": 1, "r5xx": 1, "runk": 0}},
		IgnorePatterns: []string{`/\.git/`, `^http://run1\.example\.com/private/`, `^https?://[^/]+/cgi-bin/`},
		QueuedAt:       ptr(int64(1732900000)), StartedAt: ptr(int64(1732900000)),
		// The job's history: its registration, written by the same script.
		History: []store.HistoryEntry{{TS: 1732900000, Ident: f.run1, Event: "queued", By: "alice",
			Detail: map[string]any{"channel": "#archivebot", "queue": "pending", "url": "http://run1.example.com/"}}},
	}
	if d := cmp.Diff(want, v); d != "" {
		t.Errorf("running job (-want +got):\n%s", d)
	}
	v = view(f.finished)
	if v.State != StateFinished || v.FinishedAt == nil || *v.FinishedAt != 1732900000 || v.ExpiresIn == nil ||
		*v.ExpiresIn > int64(pipelinesim.CompletedExpiry.Seconds()) || *v.ExpiresIn < int64(pipelinesim.CompletedExpiry.Seconds())-60 {
		t.Errorf("finished job: %+v", v)
	}
	v = view(f.aborted)
	if v.State != StateAborted || v.ExpiresIn == nil || *v.ExpiresIn > 5 || !v.AbortRequested {
		t.Errorf("aborted job: %+v", v)
	}
	v = view(f.failed)
	if v.State != StateFailed || v.Failure == nil || v.Failure.Reason != "failed by bob" || v.Failure.FailedBy != "bob" ||
		v.Failure.FailedAt == nil || *v.Failure.FailedAt != 1732900100 || v.Failure.Queue != "pending-ao" ||
		v.URL != "http://failed.example.com/" || v.Depth != "shallow" {
		t.Errorf("failed job: %+v (failure %+v)", v, v.Failure)
	}
	r := get(t, h, "/jobs/zzzzzzzzzz", "")
	expect(t, r, 404, ctJSON)
	if b := body(t, r); b != `{"error":"unknown job zzzzzzzzzz"}`+"\n" {
		t.Errorf("404 body %q", b)
	}
}

func ptr[T any](v T) *T { return &v }

func testJobs(t *testing.T, f *fixture, h http.Handler) {
	list := func(query string) []string {
		t.Helper()
		r := get(t, h, "/jobs"+query, "")
		expect(t, r, 200, ctJSON)
		var got struct {
			Jobs  []JobSummary `json:"jobs"`
			Count int          `json:"count"`
		}
		decode(t, r, &got)
		var ids []string
		for _, j := range got.Jobs {
			ids = append(ids, j.Ident+"/"+j.State)
		}
		if got.Count != len(got.Jobs) {
			t.Fatalf("count %d, %d jobs", got.Count, len(got.Jobs))
		}
		return ids
	}
	q, r := "/"+StateQueued, "/"+StateRunning
	all := []string{f.named + q, f.large + q, f.pend1 + q, f.pend2 + q, f.ao + q, f.run2 + r, f.run1 + r}
	if d := cmp.Diff(all, list("")); d != "" {
		t.Errorf("/jobs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(all[:5], list("?state=queued")); d != "" {
		t.Errorf("state=queued:\n%s", d)
	}
	if d := cmp.Diff(all[5:], list("?state=running&pipeline=simpipe")); d != "" {
		t.Errorf("running on simpipe:\n%s", d)
	}
	if d := cmp.Diff(all[5:], list("?pipeline="+f.pipe.Key())); d != "" {
		t.Errorf("pipeline by id:\n%s", d)
	}
	if d := cmp.Diff(all, list("?started_by=ALICE")); d != "" {
		t.Errorf("started_by:\n%s", d)
	}
	if got := list("?started_by=bob"); len(got) != 0 {
		t.Errorf("started_by=bob: %v", got)
	}
	if got := list("?pipeline=nosuch"); len(got) != 0 {
		t.Errorf("pipeline=nosuch: %v", got)
	}
}

func testBadInput(t *testing.T, f *fixture, h http.Handler) {
	long := strings.Repeat("a", MaxPathBytes+1)
	cases := []struct {
		method, path, accept string
		status               int
		ctype, contains      string
	}{
		{"POST", "/status", "", 405, ctJSON, "read-only"},
		{"DELETE", "/jobs/" + f.run1, "", 405, ctJSON, "read-only"},
		{"PUT", "/nowhere", "", 405, ctJSON, "read-only"},
		{"GET", "/nowhere", "", 404, ctJSON, "no such endpoint"},
		{"GET", "/jobs/", "", 404, ctJSON, "no such endpoint"},
		{"GET", "/ignores/", "", 404, ctJSON, "no such endpoint"},
		{"GET", "/logs/recent?count=0", "", 400, ctJSON, "positive integer"},
		{"GET", "/logs/recent?count=-3", "", 400, ctJSON, "positive integer"},
		{"GET", "/logs/recent?count=abc", "", 400, ctJSON, "positive integer"},
		{"GET", "/logs/recent?count=1.5", "", 400, ctJSON, "positive integer"},
		{"GET", "/logs/recent?count=", "", 400, ctJSON, "positive integer"},
		{"GET", "/logs/recent?count=%20", "", 400, ctJSON, "positive integer"},
		{"GET", "/" + long, "", 414, ctJSON, "path longer"},
		{"GET", "/status?x=" + long, "", 414, ctJSON, "query string longer"},
		{"GET", "/status", "image/png", 406, ctJSON, "acceptable"},
		{"GET", "/status", "application/json;q=0", 406, ctJSON, "acceptable"},
		{"GET", "/pending", "application/json", 406, ctJSON, "acceptable"},
		{"GET", "/feed", "text/html", 406, ctJSON, "acceptable"},
		{"GET", "/status", ";;;,,/,*/x,q=2", 200, ctJSON, "pending"},
		{"GET", "/status", "text/html", 200, ctJSON, "pending"},
		{"GET", "/jobs/NotAnIdent", "", 400, ctJSON, "not a job ident"},
		{"GET", "/jobs/" + strings.Repeat("a", 33), "", 400, ctJSON, "not a job ident"},
		{"GET", "/jobs?state=finished", "", 400, ctJSON, "state must be"},
		{"GET", "/jobs?colour=red", "", 400, ctJSON, "unknown parameter"},
		{"GET", "/ignores/" + f.run1 + ",," + f.run2, "", 400, ctText, "not a job ident"},
		{"GET", "/ignores/" + f.run1 + "," + f.run2 + "?compact=true", "", 400, ctText, "exactly one"},
		{"GET", "/ignores/zzzzzzzz", "", 404, ctText, "unknown job: zzzzzzzz"},
		{"GET", "/ignores/" + strings.Repeat("a,", 60) + "a", "", 400, ctText, "at most"},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		b := body(t, res)
		if res.StatusCode != c.status || res.Header.Get("Content-Type") != c.ctype || !strings.Contains(b, c.contains) {
			t.Errorf("%s %s (Accept %q): %d %q %q; want %d %q containing %q",
				c.method, clip(c.path, 60), c.accept, res.StatusCode, res.Header.Get("Content-Type"), b, c.status, c.ctype, c.contains)
		}
		if c.status == 405 && res.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
	}
	// HEAD is GET without a body.
	req := httptest.NewRequest("HEAD", "/status", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("HEAD /status: %d", rec.Code)
	}
}

func TestWithJobData(t *testing.T) {
	jd := []byte(`{"ident":"x"}`)
	for in, want := range map[string]string{
		`{}`:                       `{"job_data":{"ident":"x"}}`,
		`{ }`:                      `{"job_data":{"ident":"x"}}`,
		`{"a":1}`:                  `{"a":1,"job_data":{"ident":"x"}}`,
		`{"a":{"b":[1,2]} }`:       `{"a":{"b":[1,2]},"job_data":{"ident":"x"}}`,
		`{"job_data":1,"x":"y"}`:   `{"job_data":{"ident":"x"},"x":"y"}`,
		`{"url":"http://a/\"}\""}`: `{"url":"http://a/\"}\"","job_data":{"ident":"x"}}`,
	} {
		var buf bytes.Buffer
		appendWithJobData(&buf, []byte(in), jd)
		if got := buf.String(); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

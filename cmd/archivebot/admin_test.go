package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// admin runs `archivebot ARGS...` against backend b (through REDIS_URL).
func admin(t *testing.T, b *redistest.Backend, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if b != nil {
		t.Setenv("REDIS_URL", b.URL)
	}
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// adminRefused runs a command that must be refused: exit code 1, each of
// wants in stderr.
func adminRefused(t *testing.T, b *redistest.Backend, wants []string, args ...string) {
	t.Helper()
	code, _, errs := admin(t, b, args...)
	for _, w := range wants {
		if code != 1 || !strings.Contains(errs, w) {
			t.Fatalf("archivebot %v: exit %d, stderr %q; want exit 1 saying %q", args, code, errs, w)
		}
	}
}

// adminJSON runs a command with -json, expects success and decodes stdout.
func adminJSON(t *testing.T, b *redistest.Backend, v any, args ...string) {
	t.Helper()
	code, out, errs := admin(t, b, append(args, "-json")...)
	if code != 0 {
		t.Fatalf("archivebot %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("archivebot %v -json: %v in %q", args, err, out)
	}
}

// queueJob registers a job as !a would.
func queueJob(t *testing.T, s *store.Store, rawURL, nick, queue string) string {
	t.Helper()
	norm, id, err := ident.FromURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	depth := "inf"
	if queue == store.KeyPendingAO {
		depth = "shallow"
	}
	if err := s.Register(context.Background(), store.NewJob{
		Ident: id, URL: norm, FetchDepth: depth, Slug: "slug", StartedBy: nick, StartedIn: "#archivebot",
		DelayMin: 250, DelayMax: 375, Concurrency: 3, SettingsAge: 4, Queue: queue, Patterns: []string{"global"},
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// runningPipeline starts a simulated pipeline (cfg) that reports
// "Running" and takes the next job, which it returns (nil: none queued).
func runningPipeline(t *testing.T, b *redistest.Backend, cfg pipelinesim.Config) (*pipelinesim.Pipeline, *pipelinesim.Job) {
	t.Helper()
	ctx := context.Background()
	p := pipelinesim.New(b.Client, cfg)
	if err := p.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	j, err := p.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return p, j
}

// adminNotices returns what the admin notice list holds.
func adminNotices(t *testing.T, b *redistest.Backend) []store.AdminNotice {
	t.Helper()
	docs, err := b.Client.LRange(context.Background(), store.KeyAdminNotices, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AdminNotice
	for _, d := range docs {
		var n store.AdminNotice
		if err := json.Unmarshal([]byte(d), &n); err != nil {
			t.Fatalf("notice %q: %v", d, err)
		}
		out = append(out, n)
	}
	return out
}

func TestAdminRefusesWithoutRedis(t *testing.T) {
	for _, env := range []struct{ name, value string }{
		{"REDIS_URL", "redis://127.0.0.1:1/0"},
		{"ARCHIVEBOT_REDIS_LISTEN", "127.0.0.1:1"},
	} {
		t.Run(env.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", "")
			t.Setenv(env.name, env.value)
			for _, args := range [][]string{
				{"jobs"}, {"job", "abc"}, {"fail", "abc"}, {"abort", "abc"}, {"expire", "abc"},
				{"pipelines"}, {"requeue", "abc"}, {"reap-pipeline", "abc123"},
			} {
				code, out, errs := admin(t, nil, args...)
				if code != 1 || out != "" || !strings.Contains(errs, "cannot reach Redis") ||
					!strings.Contains(errs, "127.0.0.1:1") || !strings.Contains(errs, "nothing was done") ||
					!strings.Contains(errs, "-config FILE or ARCHIVEBOT_CONFIG") {
					t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
				}
			}
		})
	}
}

func TestAdminBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fail"}, "needs exactly 1 argument"},
		{[]string{"fail", "a", "b"}, "needs exactly 1 argument"},
		{[]string{"fail", "http://example.com/"}, "archivebot ident URL"},
		{[]string{"jobs", "x"}, "takes no arguments"},
		{[]string{"jobs", "-state", "done"}, "-state must be queued or running"},
		{[]string{"reap-pipeline", "nothex!"}, "is not a pipeline id"},
		{[]string{"requeue", "abc", "-nosuchflag"}, "flag provided but not defined"},
	} {
		code, _, errs := admin(t, nil, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

func TestAdminJobsAndJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, _ context.Context) {
		running := queueJob(t, s, "http://running.example.com/", "alice", store.KeyPending)
		queued := queueJob(t, s, "http://queued.example.com/", "bob", store.KeyPendingAO)
		named := queueJob(t, s, "http://named.example.com/", "bob", "pending:fast")
		p, j := runningPipeline(t, b, pipelinesim.Config{Nickname: "slowpipe", ID: "aa11"})
		if j == nil || j.Ident != running {
			t.Fatalf("take: %v", j)
		}

		var rows []jobRow
		adminJSON(t, b, &rows, "jobs")
		got := map[string]jobRow{}
		for _, r := range rows {
			got[r.Ident] = r
		}
		if len(rows) != 3 || got[running].State != "running" || got[running].Pipeline != p.Key() ||
			got[queued].Queue != "pending-ao" || got[queued].Position != 1 || got[named].Queue != "pending:fast" ||
			got[queued].URL != "http://queued.example.com/" || got[queued].StartedBy != "bob" {
			t.Fatalf("jobs: %+v", rows)
		}
		adminJSON(t, b, &rows, "jobs", "-state", "queued", "-user", "BOB")
		if len(rows) != 2 {
			t.Fatalf("queued by bob: %+v", rows)
		}
		adminJSON(t, b, &rows, "jobs", "-pipeline", "aa11")
		if len(rows) != 1 || rows[0].Ident != running {
			t.Fatalf("on pipeline aa11: %+v", rows)
		}
		code, out, _ := admin(t, b, "jobs")
		if code != 0 || !strings.Contains(out, "IDENT") || !strings.Contains(out, named) {
			t.Fatalf("table: %d %q", code, out)
		}

		var v jobView
		adminJSON(t, b, &v, "job", running)
		if v.State != "running" || !v.Working || v.Pipeline == nil || v.Pipeline.Nickname != "slowpipe" ||
			v.Pipeline.Silent || len(v.Ignores) != 1 || v.Fields["started_by"] != "alice" {
			t.Fatalf("job: %+v", v)
		}
		adminJSON(t, b, &v, "job", "http://QUEUED.example.com")
		if v.Ident != queued || v.Queue != "pending-ao" || v.Position != 1 || v.QueueLen != 1 {
			t.Fatalf("job by URL: %+v", v)
		}
		code, out, _ = admin(t, b, "job", queued)
		if code != 0 || !strings.Contains(out, "pending-ao, position 1 of 1") {
			t.Fatalf("job table: %q", out)
		}
		adminRefused(t, b, []string{"no job nosuchjob"}, "job", "nosuchjob")
	})
}

func TestAdminFailAbortExpire(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := queueJob(t, s, "http://fail.example.com/", "alice", store.KeyPending)
		var r actionResult
		adminJSON(t, b, &r, "fail", id)
		if r.Result != "failed" || r.URL != "http://fail.example.com/" || r.Notice == nil || r.Notice.Channel != "#archivebot" {
			t.Fatalf("fail: %+v", r)
		}
		job, _ := s.GetJob(ctx, id)
		if job == nil || !job.Flag("failed") || !strings.HasPrefix(job.Get("failed_reason"), "failed by ") {
			t.Fatalf("job after fail: %+v", job)
		}
		if n, _ := b.Client.LLen(ctx, store.KeyPending).Result(); n != 0 {
			t.Fatal("still queued")
		}
		notices := adminNotices(t, b)
		if len(notices) != 1 || !strings.Contains(notices[0].Text, id) || notices[0].Channel != "#archivebot" {
			t.Fatalf("notices: %+v", notices)
		}
		adminRefused(t, b, []string{"already finished"}, "fail", id)

		id2 := queueJob(t, s, "http://abort.example.com/", "alice", store.KeyPending)
		adminJSON(t, b, &r, "abort", id2)
		if r.Result != "aborted" {
			t.Fatalf("abort: %+v", r)
		}
		// An aborted job has its expiry timer: expire removes it now.
		adminJSON(t, b, &r, "expire", id2)
		if r.Result != "expired" {
			t.Fatalf("expire: %+v", r)
		}
		if ok, _ := s.Exists(ctx, id2); ok {
			t.Fatal("record left after expire")
		}
		id3 := queueJob(t, s, "http://noexpiry.example.com/", "alice", store.KeyPending)
		adminRefused(t, b, []string{"does not yet have an expiry timer"}, "expire", id3)
	})
}

func TestAdminPipelinesAndReap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := queueJob(t, s, "http://reap.example.com/", "carol", store.KeyPending)
		p, _ := runningPipeline(t, b, pipelinesim.Config{Nickname: "gonepipe", ID: "bb22", Version: "v9"})
		var views []pipelineView
		adminJSON(t, b, &views, "pipelines")
		if len(views) != 1 || views[0].Key != p.Key() || views[0].Nickname != "gonepipe" || views[0].Version != "v9" ||
			views[0].Silent || len(views[0].Jobs) != 1 || views[0].Jobs[0] != id {
			t.Fatalf("pipelines: %+v", views)
		}
		// It still reports: refused, nothing done.
		adminRefused(t, b, []string{"still reports"}, "reap-pipeline", "bb22")
		// Silent for an hour: reaped.
		old := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
		if err := b.Client.HSet(ctx, p.Key(), "ts", old).Err(); err != nil {
			t.Fatal(err)
		}
		var res reapResult
		adminJSON(t, b, &res, "reap-pipeline", p.Key())
		if !res.Removed || len(res.Failed) != 1 || res.Failed[0].Ident != id || res.Failed[0].Notice == nil {
			t.Fatalf("reap: %+v", res)
		}
		job, _ := s.GetJob(ctx, id)
		if job == nil || !job.Flag("failed") || !strings.Contains(job.Get("failed_reason"), "bb22 is gone") {
			t.Fatalf("job after reap: %+v", job)
		}
		if n, _ := b.Client.Exists(ctx, p.Key(), store.KeyPipelines, store.KeyWorking).Result(); n != 0 {
			t.Fatalf("%d of record, pipelines, working left", n)
		}
		if len(adminNotices(t, b)) != 1 {
			t.Fatal("no notice")
		}
	})
}

// A failed job requeued from its failure record and origin record (as
// doc/web.md and doc/protocol.md describe them) is taken again by a
// pipeline and runs to the end.
func TestAdminRequeueRunsAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		norm, id, _ := ident.FromURL("http://again.example.com/")
		job := map[string]string{
			"url": norm, "fetch_depth": "inf", "log_key": id + "_log", "ignore_patterns_set_key": id + "_ignores",
			"user_agent": "", "slug": "again.example.com-inf", "started_by": "dave", "started_in": "#archivebot",
			"delay_min": "250", "delay_max": "375", "concurrency": "3", "settings_age": "5",
			"suppress_ignore_reports": "true", "queued_at": "1732800000",
			"started_at": "1732800001.25", "pipeline_id": "pipeline:cc33", "heartbeat": "7", "death_timer": "3600",
			"log_score": "99", "failed": "true", "failed_reason": "no heartbeat for 2h0m",
		}
		jb, _ := json.Marshal(job)
		b.Client.HSet(ctx, store.KeyFailed(id), "url", norm, "reason", "no heartbeat for 2h0m", "failed_by", "reaper",
			"failed_at", "1732807200", "queue", "working", "job", string(jb), "ignores", `["ig1","ig2"]`)
		b.Client.HSet(ctx, "archivebot:origin:"+id, "queue", "pending:again")

		var r actionResult
		adminJSON(t, b, &r, "requeue", id)
		if r.Result != "requeued" || r.Queue != "pending:again" || r.Ignores == nil || *r.Ignores != 2 ||
			r.Notice == nil || !strings.HasPrefix(r.Notice.Text, "dave: ") {
			t.Fatalf("requeue: %+v", r)
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "againpipe"})
		events := make(chan pipelinesim.Event, 1000)
		err := p.Run(ctx, pipelinesim.RunOptions{
			ReportInterval: 10 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
			PollInterval: 5 * time.Millisecond, EntryInterval: time.Millisecond, Entries: 3, MaxJobs: 1,
			OnEvent: func(e pipelinesim.Event) {
				select {
				case events <- e:
				default:
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var took bool
		for len(events) > 0 {
			if e := <-events; e.Kind == pipelinesim.EventTake && e.Ident == id {
				took = true
			}
		}
		if !took {
			t.Fatal("the pipeline did not take the requeued job")
		}
		notices, _ := b.Client.LRange(ctx, "finish_notifications", 0, -1).Result()
		if len(notices) != 1 || !strings.Contains(notices[0], norm) {
			t.Fatalf("finish notifications: %q", notices)
		}

		// A dead job whose pipeline still reports: refused without -force,
		// requeued with it (the flag after the argument).
		id2 := queueJob(t, s, "http://dead.example.com/", "erin", store.KeyPending)
		runningPipeline(t, b, pipelinesim.Config{Nickname: "p2"})
		adminRefused(t, b, []string{"still reports", "-force"}, "requeue", id2)
		code, out, errs := admin(t, b, "requeue", id2, "--force")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("Job %s for http://dead.example.com/ requeued in pending", id2)) {
			t.Fatalf("forced requeue: %d %q %q", code, out, errs)
		}
	})
}

// TestAdminFailThenRequeueFromRecords: the failure and origin records that
// the fail script and register write themselves (not planted by the test)
// are enough for requeue to put the job back in its named queue with its
// settings and ignore patterns, even after the job record has expired.
func TestAdminFailThenRequeueFromRecords(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		queue := store.PendingNamedPrefix + "again"
		id := queueJob(t, s, "http://records.example.com/", "erin", queue)
		b.Client.SAdd(ctx, store.KeyIgnores(id), "^http://records\\.example\\.com/skip/")
		var r actionResult
		adminJSON(t, b, &r, "fail", id)
		if r.Result != "failed" {
			t.Fatalf("fail: %+v", r)
		}
		// The failure record names the operator, as !fail names the op.
		if by := b.Client.HGet(ctx, store.KeyFailed(id), "failed_by").Val(); by != operator() {
			t.Fatalf("failure record failed_by = %q, want the operator %q", by, operator())
		}
		// The job record expires 5 s after a fail; the records stay.
		b.Client.Del(ctx, store.KeyJob(id), store.KeyIgnores(id))
		adminJSON(t, b, &r, "requeue", id)
		if r.Result != "requeued" || r.Queue != queue || r.Ignores == nil || *r.Ignores != 2 {
			t.Fatalf("requeue: %+v (ignores %v)", r, r.Ignores)
		}
		ids, err := b.Client.LRange(ctx, queue, 0, -1).Result()
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("%s holds %v, %v; want [%s]", queue, ids, err, id)
		}
		job, err := s.GetJob(ctx, id)
		if err != nil || job == nil || job.Get("started_by") != "erin" || job.Get("delay_min") != "250" || job.Flag("failed") {
			t.Fatalf("requeued job: %+v, %v", job, err)
		}
		patterns, _ := b.Client.SMembers(ctx, store.KeyIgnores(id)).Result()
		if len(patterns) != 2 {
			t.Fatalf("ignore patterns after requeue: %v", patterns)
		}
	})
}

// What pipelines write reaches the operator's terminal through the tables
// of `archivebot pipelines`, `jobs` and `job`: no escape sequence, CR, LF
// or tab from Redis may reach it raw (a title change, a screen clear, a
// forged row or column).
func TestAdminTablesCleanTerminalEscapes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := queueJob(t, s, "http://escape.example.com/", "alice", store.KeyPending)
		p, _ := runningPipeline(t, b, pipelinesim.Config{Nickname: "pipe\x1b]0;pwned\x07", ID: "cc33", Version: "\x1b[2J\x1b[H"})
		if err := b.Client.HSet(ctx, p.Key(), "hostname", "host\r\nforged\trow", "status", "\u009b31mred").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.HSet(ctx, id, "started_by", "alice\x1b[8m", "title\x1b]8;;x\x07", "a\nb\tc\xff").Err(); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"pipelines"}, {"jobs"}, {"job", id}} {
			code, out, errs := admin(t, b, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, errs)
			}
			if i := strings.IndexFunc(out, func(r rune) bool {
				return r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError)
			}); i >= 0 {
				t.Errorf("%v: raw control character %q in %q", args, out[i:min(len(out), i+8)], out)
			}
			if !strings.Contains(out, `\x1b`) {
				t.Errorf("%v: escapes not shown visibly: %q", args, out)
			}
		}
		_, out, _ := admin(t, b, "pipelines")
		if n := strings.Count(out, "\n"); n != 2 {
			t.Errorf("pipelines: %d lines, want header and one row: %q", n, out)
		}
		_, out, _ = admin(t, b, "jobs")
		if n := strings.Count(out, "\n"); n != 2 {
			t.Errorf("jobs: %d lines, want header and one row: %q", n, out)
		}
	})
}

// decodeError expects one {"command","error"} object on stdout.
func decodeError(t *testing.T, what, out string) errorResult {
	t.Helper()
	var e errorResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || dec.More() {
		t.Fatalf("%s: stdout is not one JSON error: %v in %q", what, err, out)
	}
	return e
}

// With -json, errors are JSON on stdout and the exit status is not 0:
// a refusal, a bad flag, and a Redis that does not answer.
func TestAdminJSONErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, _ context.Context) {
		id := queueJob(t, s, "http://json.example.com/", "alice", store.KeyPending)
		var r actionResult
		adminJSON(t, b, &r, "abort", id)
		code, out, errs := admin(t, b, "abort", id, "-json")
		if code != 1 || errs != "" {
			t.Fatalf("abort of a finished job: exit %d, stderr %q", code, errs)
		}
		if e := decodeError(t, "abort", out); e.Command != "abort" || !strings.Contains(e.Error, "already finished") {
			t.Fatalf("error %+v", e)
		}
		code, out, errs = admin(t, b, "jobs", "-json", "-bogus")
		if code != 2 || errs != "" {
			t.Fatalf("bad flag: exit %d, stderr %q", code, errs)
		}
		if e := decodeError(t, "bad flag", out); !strings.Contains(e.Error, "-bogus") {
			t.Fatalf("error %+v", e)
		}
		code, out, _ = admin(t, b, "job", "-json", "not/an/ident")
		if code != 2 {
			t.Fatalf("bad ident: exit %d", code)
		}
		decodeError(t, "bad ident", out)
	})
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	var out, errb bytes.Buffer
	if code := run([]string{"jobs", "-json"}, strings.NewReader(""), &out, &errb); code != 1 || errb.Len() != 0 {
		t.Fatalf("no Redis: exit %d, stderr %q", code, errb.String())
	}
	decodeError(t, "no Redis", out.String())
}

// queued_at (and started_at) are integers, as in the web API.
func TestJobsTimesAreIntegers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		queueJob(t, s, "http://int.example.com/", "alice", store.KeyPending)
		queueJob(t, s, "http://int2.example.com/", "alice", store.KeyPending)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "intpipe"})
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		adminJSON(t, b, &rows, "jobs")
		if len(rows) != 2 {
			t.Fatalf("rows %v", rows)
		}
		started := 0
		for _, r := range rows {
			q, ok := r["queued_at"].(float64)
			if !ok || q != float64(int64(q)) || q < float64(time.Now().Add(-time.Hour).Unix()) {
				t.Errorf("queued_at %#v", r["queued_at"])
			}
			if v, ok := r["started_at"]; ok {
				started++
				if f, ok := v.(float64); !ok || f != float64(int64(f)) {
					t.Errorf("started_at %#v", v)
				}
			}
		}
		if started != 1 {
			t.Errorf("%d rows with started_at", started)
		}
	})
}

// Reaping a pipeline that was reaped already is an error, not "0 jobs
// failed" with exit 0.
func TestReapTwice(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "twice", ID: "cc33"})
		if err := p.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		old := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
		if err := b.Client.HSet(ctx, p.Key(), "ts", old).Err(); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := admin(t, b, "reap-pipeline", "cc33"); code != 0 {
			t.Fatalf("first reap: %d %q %q", code, out, errs)
		}
		code, out, errs := admin(t, b, "reap-pipeline", "cc33")
		if code != 1 || !strings.Contains(errs, "no pipeline") {
			t.Fatalf("second reap: exit %d, %q %q", code, out, errs)
		}
	})
}

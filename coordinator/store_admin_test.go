package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// writeFailureRecord writes a failure record and an origin record the way
// doc/web.md (Failure records) and doc/protocol.md describe them, as the
// reaper and !fail do: the job JSON, the queue it was in, the ignores.
func writeFailureRecord(t *testing.T, b *redistest.Backend, id string, job map[string]string, queue, origin string, ignores []string) {
	t.Helper()
	ctx := context.Background()
	jb, _ := json.Marshal(job)
	fields := []any{"url", job["url"], "reason", "no heartbeat for 2h0m", "failed_by", "reaper",
		"failed_at", "1732900000.5", "queue", queue, "job", string(jb)}
	if ignores != nil {
		ib, _ := json.Marshal(ignores)
		fields = append(fields, "ignores", string(ib))
	}
	if err := b.Client.HSet(ctx, store.KeyFailed(id), fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.ZAdd(ctx, store.KeyFinishedIndex, redis.Z{Score: 1732900000.5, Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		if err := b.Client.HSet(ctx, "archivebot:origin:"+id, "queue", origin).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// failedJobFields is a job record as it was when the reaper failed it: a
// run's fields on top of what register wrote.
func failedJobFields(id, url string) map[string]string {
	return svcJobFields(id, url, "alice", map[string]string{
		"queued_at": "1732800000", "started_at": "1732800001.5", "pipeline_id": "pipeline:dead",
		"heartbeat": "40", "last_acknowledged_heartbeat": "40", "death_timer": "3600",
		"bytes_downloaded": "1000", "items_downloaded": "10", "items_queued": "12", "log_score": "22",
		"r2xx": "10", "error_count": "1", "last_analyzed_log_entry": "22", "last_trimmed_log_entry": "0",
		"failed": "true", "failed_reason": "no heartbeat for 2h0m", "note": "keep me", "user_agent": "UA 1",
	})
}

// livePipeline is a simulated pipeline with the nickname and id given
// that has reported itself running.
func livePipeline(t *testing.T, ctx context.Context, b *redistest.Backend, nick, id string) *pipelinesim.Pipeline {
	t.Helper()
	p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: nick, ID: id})
	if err := p.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRequeueFailedJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		const id, url = "requeue1", "http://requeue.example.com/"
		writeFailureRecord(t, b, id, failedJobFields(id, url), store.KeyWorking, "pending:fast", []string{"p1", "(?i)p2"})

		res, err := s.Requeue(ctx, id, false, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if res.Queue != "pending:fast" || res.Ignores != 2 || res.Source != "failed" {
			t.Fatalf("result %+v", res)
		}
		d := svcDump(t, b)
		want := svcJobFields(id, url, "alice", map[string]string{"note": "keep me", "user_agent": "UA 1"})
		if diff := cmp.Diff(want, d[id].Value); diff != "" {
			t.Errorf("job record (-want +got):\n%s", diff)
		}
		if d[id].TTL != -1 {
			t.Errorf("job record keeps a TTL %v", d[id].TTL)
		}
		if got := d[store.KeyIgnores(id)].Value; !cmp.Equal(got, []string{"(?i)p2", "p1"}) {
			t.Errorf("ignores %v", got)
		}
		if got := d["pending:fast"].Value; !cmp.Equal(got, []string{id}) {
			t.Errorf("pending:fast %v", got)
		}
		if got := d[store.KeyQueues].Value; !cmp.Equal(got, []string{"pending:fast"}) {
			t.Errorf("queue index %v", got)
		}
		if _, ok := d[store.KeyFailed(id)]; ok {
			t.Error("failure record left behind")
		}
		if _, ok := d[store.KeyFinishedIndex]; ok {
			t.Error("job left in the finished index")
		}
		// Requeued once, it is queued: a second requeue is refused.
		if _, err := s.Requeue(ctx, id, false, time.Minute); !errors.Is(err, store.ErrJobNotRequeueable) {
			t.Fatalf("second requeue: %v", err)
		}
		// The simulated pipeline that takes pending:fast takes it.
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "fastpipe", ID: "f1"})
		job, err := p.Take(ctx)
		if err != nil || job == nil || job.Ident != id {
			t.Fatalf("take: %v %v", job, err)
		}
	}, store.WithClock(func() time.Time { return time.Unix(1732950000, 0) }))
}

func TestRequeueQueueFallbacks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		// No origin record: the failure record's pending queue.
		j := failedJobFields("rq2", "http://a.example.com/")
		writeFailureRecord(t, b, "rq2", j, store.KeyPendingLarge, "", nil)
		if r, err := s.Requeue(ctx, "rq2", false, time.Minute); err != nil || r.Queue != store.KeyPendingLarge || r.Ignores != 0 {
			t.Fatalf("%+v %v", r, err)
		}
		// Neither: the depth decides.
		j = failedJobFields("rq3", "http://b.example.com/")
		j["fetch_depth"] = "shallow"
		writeFailureRecord(t, b, "rq3", j, store.KeyWorking, "", nil)
		if r, err := s.Requeue(ctx, "rq3", false, time.Minute); err != nil || r.Queue != store.KeyPendingAO {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

// A job failed less than 5 s ago still has its record (failed=true, TTL):
// it is rebuilt all the same and loses the TTL.
func TestRequeueJustFailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://justfailed.example.com/", "bob", "#ab", store.KeyPendingAO)
		if _, err := s.FailJob(ctx, id, "failed by op"); err != nil {
			t.Fatal(err)
		}
		r, err := s.Requeue(ctx, id, false, time.Minute)
		if err != nil || r.Queue != store.KeyPendingAO || r.Ignores != 1 {
			t.Fatalf("%+v %v", r, err)
		}
		d := svcDump(t, b)
		if d[id].TTL != -1 || d[store.KeyIgnores(id)].TTL != -1 {
			t.Errorf("TTLs left: job %v ignores %v", d[id].TTL, d[store.KeyIgnores(id)].TTL)
		}
		if _, ok := d[id].Value.(map[string]string)["failed"]; ok {
			t.Error("failed field kept")
		}
	})
}

func TestRequeueDeadJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://dead.example.com/", "carol", "#ab", store.KeyPending)
		p := livePipeline(t, ctx, b, "p", "d1")
		job := mustTake(t, ctx, p)
		if _, err := job.LogDownload(ctx, "http://dead.example.com/a", 200); err != nil {
			t.Fatal(err)
		}
		before := svcDump(t, b)
		_, err := s.Requeue(ctx, id, false, time.Minute)
		var alive *store.PipelineAliveError
		if !errors.As(err, &alive) || alive.Pipeline != p.Key() {
			t.Fatalf("requeue of a job whose pipeline reports: %v", err)
		}
		if diff := cmp.Diff(before, svcDump(t, b)); diff != "" {
			t.Fatalf("refused requeue changed Redis:\n%s", diff)
		}
		// With force it goes back, out of working, its log gone.
		r, err := s.Requeue(ctx, id, true, time.Minute)
		if err != nil || r.Source != "dead" || r.Queue != store.KeyPending {
			t.Fatalf("%+v %v", r, err)
		}
		d := svcDump(t, b)
		if _, ok := d[store.KeyWorking]; ok {
			t.Errorf("still in working: %v", d[store.KeyWorking].Value)
		}
		if _, ok := d[store.KeyLog(id)]; ok {
			t.Error("old log kept")
		}
		for _, f := range store.RequeueResetFields {
			if _, ok := r.Job[f]; ok {
				t.Errorf("field %s kept", f)
			}
		}
		// A pipeline that has been silent long enough needs no force.
		job, err = p.Take(ctx)
		if err != nil || job == nil || job.Ident != id {
			t.Fatalf("take again: %v %v", job, err)
		}
		if err := b.Client.HSet(ctx, p.Key(), "ts", strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Requeue(ctx, id, false, time.Minute); err != nil {
			t.Fatalf("requeue from a silent pipeline: %v", err)
		}
	})
}

func TestRequeueRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		if _, err := s.Requeue(ctx, "nosuchjob", false, time.Minute); !errors.Is(err, store.ErrNoJob) {
			t.Errorf("unknown job: %v", err)
		}
		id := svcQueue(t, s, "http://queued.example.com/", "dan", "#ab", store.KeyPending)
		if _, err := s.Requeue(ctx, id, true, time.Minute); !errors.Is(err, store.ErrJobNotRequeueable) {
			t.Errorf("queued job: %v", err)
		}
		b.Client.HSet(ctx, "fin", "url", "http://x/", "finished_at", "1")
		if _, err := s.Requeue(ctx, "fin", true, time.Minute); !errors.Is(err, store.ErrJobFinished) {
			t.Errorf("finished job: %v", err)
		}
		b.Client.HSet(ctx, store.KeyFailed("nojob"), "url", "http://y/", "reason", "r")
		if _, err := s.Requeue(ctx, "nojob", false, time.Minute); !errors.Is(err, store.ErrFailureWithoutJob) {
			t.Errorf("failure record without job: %v", err)
		}
		b.Client.Set(ctx, "astring", "x", 0)
		var nj *store.NotAJobError
		if _, err := s.Requeue(ctx, "astring", false, time.Minute); !errors.As(err, &nj) {
			t.Errorf("not a job: %v", err)
		}
	})
}

func TestAdminNotices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		for _, n := range []store.AdminNotice{{Channel: "#a", Text: "one"}, {Channel: "", Text: "two"}} {
			if err := s.PushAdminNotice(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		b.Client.RPush(ctx, store.KeyAdminNotices, "not json")
		ann := newSvcAnnouncer("#x", "#y")
		ann.setDown(errIRCDown) // the first attempt fails: the notice is kept
		a := NewAdminNotifier(s, ann, svcLog(t))
		if err := a.runOnce(ctx); err == nil {
			t.Fatal("announce error not returned")
		}
		if n, _ := b.Client.LLen(ctx, store.KeyAdminNoticesProcessing).Result(); n != 1 {
			t.Fatalf("processing holds %d", n)
		}
		ann.setDown(nil)
		if err := a.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		want := []svcLine{{"#a", "one"}, {"#x", "two"}, {"#y", "two"}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		d := svcDump(t, b)
		if len(d) != 0 {
			t.Errorf("left in Redis: %v", d)
		}
	})
}

func TestRemovePipeline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		p := livePipeline(t, ctx, b, "p", "r1")
		var alive *store.PipelineAliveError
		if _, err := s.RemovePipeline(ctx, p.Key(), time.Minute, false); !errors.As(err, &alive) {
			t.Fatalf("live pipeline: %v", err)
		}
		if ok, err := s.RemovePipeline(ctx, p.Key(), time.Minute, true); !ok || err != nil {
			t.Fatalf("forced: %v %v", ok, err)
		}
		if n, _ := b.Client.Exists(ctx, p.Key(), store.KeyPipelines).Result(); n != 0 {
			t.Fatal("record or member left")
		}
		if ok, err := s.RemovePipeline(ctx, p.Key(), time.Minute, false); ok || err != nil {
			t.Fatalf("gone pipeline: %v %v", ok, err)
		}
	})
}

// Failing a running job does not stop its pipeline: while that pipeline
// still reports, its mark-done would finish the requeued record, so the
// requeue needs force.
func TestRequeueFailedJobOfLivePipeline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://stillrunning.example.com/", "alice", "#ab", store.KeyPending)
		p := livePipeline(t, ctx, b, "live", "e5")
		mustTake(t, ctx, p)
		if _, err := s.FailJob(ctx, id, "failed by op"); err != nil {
			t.Fatal(err)
		}
		before := svcDump(t, b)
		var alive *store.PipelineAliveError
		if _, err := s.Requeue(ctx, id, false, time.Minute); !errors.As(err, &alive) || alive.Pipeline != p.Key() {
			t.Fatalf("requeue while the pipeline reports: %v", err)
		}
		if diff := cmp.Diff(before, svcDump(t, b)); diff != "" {
			t.Fatalf("refused requeue changed Redis:\n%s", diff)
		}
		if r, err := s.Requeue(ctx, id, true, time.Minute); err != nil || r.Source != "failed" {
			t.Fatalf("forced: %+v %v", r, err)
		}
	})
}

// svcDump is the database minus fields that change with the clock.
func svcDump(t *testing.T, b *redistest.Backend) map[string]redistest.Entry {
	t.Helper()
	d := b.Dump(t)
	for k, e := range d {
		// A history shows as its events, "event by WHO".
		if strings.HasPrefix(k, "archivebot:history:") {
			var evs []string
			for _, raw := range e.Value.([]string) {
				var he store.HistoryEntry
				if err := json.Unmarshal([]byte(raw), &he); err != nil {
					t.Fatalf("history entry %q: %v", raw, err)
				}
				evs = append(evs, he.Event+" by "+he.By)
			}
			e.Value = evs
			d[k] = e
		}
		if h, ok := e.Value.(map[string]string); ok {
			for _, f := range []string{"queued_at", "started_at", "finished_at", "ts", "failed_at", "job"} {
				if _, ok := h[f]; ok {
					h[f] = "*"
				}
			}
			d[k] = e
		}
	}
	return d
}

// svcJobFields is the record svcQueue writes, with extra fields.
func svcJobFields(id, url, nick string, extra map[string]string) map[string]string {
	m := map[string]string{
		"url": url, "fetch_depth": "inf", "log_key": id + "_log", "ignore_patterns_set_key": id + "_ignores",
		"user_agent": "", "slug": "slug-inf", "started_by": nick, "started_in": "#ab",
		"delay_min": "250", "delay_max": "375", "concurrency": "3", "settings_age": "4",
		"suppress_ignore_reports": "true", "queued_at": "*",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestFailJob(t *testing.T) {
	const url = "http://fail.example.com/"
	tests := []struct {
		name string
		// setup queues the job (or not) and returns its ident.
		setup   func(t *testing.T, s *store.Store, b *redistest.Backend) string
		wantErr error
		// state is the expected database afterwards, given the ident.
		state func(id string) map[string]redistest.Entry
	}{
		{
			name: "queued in a named queue",
			setup: func(t *testing.T, s *store.Store, b *redistest.Backend) string {
				svcQueue(t, s, "http://other.example.com/", "bob", "#ab", store.KeyPendingNamed("fast"))
				return svcQueue(t, s, url, "alice", "#ab", store.KeyPendingNamed("fast"))
			},
			state: func(id string) map[string]redistest.Entry {
				other := ident.Of("http://other.example.com/")
				return map[string]redistest.Entry{
					id:                         {Type: "hash", Value: svcJobFields(id, url, "alice", map[string]string{"failed": "true", "failed_reason": "failed by op"}), TTL: "set"},
					id + "_ignores":            {Type: "set", Value: []string{"global-pattern"}, TTL: "set"},
					"pending:fast":             {Type: "list", Value: []string{other}, TTL: -1},
					store.KeyQueues:            {Type: "set", Value: []string{"pending:fast"}, TTL: -1},
					"jobs_failed":              {Type: "string", Value: "1", TTL: -1},
					other:                      {Type: "hash", Value: svcJobFields(other, "http://other.example.com/", "bob", nil), TTL: -1},
					other + "_ignores":         {Type: "set", Value: []string{"global-pattern"}, TTL: -1},
					store.KeyHistory(id):       {Type: "list", Value: []string{"queued by alice", "failed by node"}, TTL: "set"},
					store.KeyHistory(other):    {Type: "list", Value: []string{"queued by bob"}, TTL: -1},
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending:fast", "notify_start": "0", "nick": "alice", "op": "0"}, TTL: "set"},
					store.KeyOrigin(other):     {Type: "hash", Value: map[string]string{"queue": "pending:fast", "notify_start": "0", "nick": "bob", "op": "0"}, TTL: -1},
					store.KeyQueuedBy("alice"): {Type: "set", Value: []string{id}, TTL: "set"},
					store.KeyQueuedBy("bob"):   {Type: "set", Value: []string{other}, TTL: "set"},
					store.KeyFailed(id): {Type: "hash", Value: map[string]string{"url": url, "reason": "failed by op", "failed_by": "node",
						"failed_at": "*", "queue": "pending:fast", "origin_queue": "pending:fast", "job": "*", "ignores": `["global-pattern"]`}, TTL: "set"},
					store.KeyFinishedIndex: {Type: "zset", Value: "*", TTL: -1},
				}
			},
		},
		{
			name: "running on a pipeline, with a log",
			setup: func(t *testing.T, s *store.Store, b *redistest.Backend) string {
				id := svcQueue(t, s, url, "alice", "#ab", store.KeyPending)
				j := mustTake(t, context.Background(), pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p1"}))
				if _, err := j.LogDownload(context.Background(), url, 200); err != nil {
					t.Fatal(err)
				}
				return id
			},
			state: func(id string) map[string]redistest.Entry {
				return map[string]redistest.Entry{
					id: {Type: "hash", Value: svcJobFields(id, url, "alice", map[string]string{
						"failed": "true", "failed_reason": "failed by op", "started_at": "*",
						"pipeline_id": "pipeline:ec6ef230f1828039ee794566b9c58adc", "log_score": "1"}), TTL: "set"},
					id + "_ignores":            {Type: "set", Value: []string{"global-pattern"}, TTL: "set"},
					id + "_log":                {Type: "zset", Value: "*", TTL: "set"},
					"jobs_failed":              {Type: "string", Value: "1", TTL: -1},
					store.KeyHistory(id):       {Type: "list", Value: []string{"queued by alice", "failed by node"}, TTL: "set"},
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending", "notify_start": "0", "nick": "alice", "op": "0"}, TTL: "set"},
					store.KeyQueuedBy("alice"): {Type: "set", Value: []string{id}, TTL: "set"},
					store.KeyFailed(id): {Type: "hash", Value: map[string]string{"url": url, "reason": "failed by op", "failed_by": "node",
						"failed_at": "*", "queue": "working", "origin_queue": "pending", "job": "*", "ignores": `["global-pattern"]`}, TTL: "set"},
					store.KeyFinishedIndex: {Type: "zset", Value: "*", TTL: -1},
				}
			},
		},
		{
			name:    "no such job",
			setup:   func(t *testing.T, s *store.Store, b *redistest.Backend) string { return "nosuchjob" },
			wantErr: store.ErrNoJob,
			state:   func(id string) map[string]redistest.Entry { return map[string]redistest.Entry{} },
		},
		{
			name: "already finished",
			setup: func(t *testing.T, s *store.Store, b *redistest.Backend) string {
				id := svcQueue(t, s, url, "alice", "#ab", store.KeyPendingAO)
				j := mustTake(t, context.Background(), pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p1"}))
				if err := j.Done(context.Background()); err != nil {
					t.Fatal(err)
				}
				b.Client.Del(context.Background(), "finish_notifications")
				return id
			},
			wantErr: store.ErrJobFinished,
			state: func(id string) map[string]redistest.Entry {
				f := svcJobFields(id, url, "alice", map[string]string{"started_at": "*", "finished_at": "*",
					"pipeline_id": "pipeline:ec6ef230f1828039ee794566b9c58adc", "fetch_depth": "shallow", "slug": "slug-shallow"})
				return map[string]redistest.Entry{
					id:                         {Type: "hash", Value: f, TTL: "set"},
					id + "_ignores":            {Type: "set", Value: []string{"global-pattern"}, TTL: "set"},
					"jobs_completed":           {Type: "string", Value: "1", TTL: -1},
					store.KeyHistory(id):       {Type: "list", Value: []string{"queued by alice"}, TTL: -1},
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending-ao", "notify_start": "0", "nick": "alice", "op": "0"}, TTL: -1},
					store.KeyQueuedBy("alice"): {Type: "set", Value: []string{id}, TTL: "set"},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
				id := tc.setup(t, s, b)
				job, err := s.FailJob(ctx, id, "failed by op")
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("FailJob error %v, want %v", err, tc.wantErr)
				}
				if err == nil && (job == nil || !job.Flag("failed") || job.URL.Value != url || job.State() != record.StateFailed) {
					t.Errorf("returned job %+v, want the failed record", job)
				}
				if errors.Is(err, store.ErrJobFinished) && (job == nil || job.State() != record.StateFinished) {
					t.Errorf("returned job %+v, want the finished record", job)
				}
				got := svcDump(t, b)
				for _, k := range []string{id + "_log", store.KeyFinishedIndex} {
					if e, ok := got[k]; ok {
						e.Value = "*"
						got[k] = e
					}
				}
				if diff := cmp.Diff(tc.state(id), got); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
			})
		})
	}
}

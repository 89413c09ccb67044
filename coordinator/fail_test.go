package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// svcDump is the database minus fields that change with the clock.
func svcDump(t *testing.T, b *redistest.Backend) map[string]redistest.Entry {
	t.Helper()
	d, err := redistest.Dump(context.Background(), b.Client)
	if err != nil {
		t.Fatal(err)
	}
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
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending:fast", "notify_start": "0"}, TTL: "set"},
					store.KeyOrigin(other):     {Type: "hash", Value: map[string]string{"queue": "pending:fast", "notify_start": "0"}, TTL: -1},
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
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending", "notify_start": "0"}, TTL: "set"},
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
					store.KeyOrigin(id):        {Type: "hash", Value: map[string]string{"queue": "pending-ao", "notify_start": "0"}, TTL: -1},
					store.KeyQueuedBy("alice"): {Type: "set", Value: []string{id}, TTL: "set"},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
				id := tc.setup(t, s, b)
				job, err := s.FailJob(ctx, id, "failed by op")
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("FailJob error %v, want %v", err, tc.wantErr)
				}
				if err == nil && (job == nil || !job.Flag("failed") || job.URL.Value != url || job.State() != store.StateFailed) {
					t.Errorf("returned job %+v, want the failed record", job)
				}
				if errors.Is(err, store.ErrJobFinished) && (job == nil || job.State() != store.StateFinished) {
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

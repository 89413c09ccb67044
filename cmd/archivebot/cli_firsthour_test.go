package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// The command line as a newcomer and an operator met it (issue "first
// hour"); each test fails on the code before the fix.

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
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := store.NewStore(b.Client)
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

// archivebot help documents the exit statuses.
func TestHelpExitStatus(t *testing.T) {
	var out bytes.Buffer
	run([]string{"help"}, strings.NewReader(""), &out, &out)
	_, sect, ok := strings.Cut(out.String(), "\nExit status:\n")
	if !ok {
		t.Fatalf("no exit status section:\n%s", out.String())
	}
	for _, code := range []string{"0 ", "1 ", "2 ", "3 "} {
		if !strings.Contains(sect, "  "+code) {
			t.Errorf("exit status %q not documented:\n%s", code, sect)
		}
	}
}

// queued_at (and started_at) are integers, as in the web API.
func TestJobsTimesAreIntegers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
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

// A single node leads: status -json says leader true, as /metrics does
// (archivebot_leader 1).
func TestStatusSingleNodeLeads(t *testing.T) {
	b := redistest.Mini(t)
	single := writeTemp(t, "single.toml", "[redis]\nurl = \""+b.URL+"\"\n")
	var out, errb bytes.Buffer
	if code := run([]string{"status", "-json", "-config", single}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v leaderView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || !v.Leader || !v.SingleNode {
		t.Fatalf("status -json: %v %s", err, out.String())
	}
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

// Help texts: -cpuprofile's argument is FILE (not `go tool pprof`), and
// the operator's commands' -config does not speak of the console.
func TestHelpTexts(t *testing.T) {
	var out bytes.Buffer
	run([]string{"-h"}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "-cpuprofile FILE") {
		t.Errorf("-cpuprofile:\n%s", out.String())
	}
	out.Reset()
	run([]string{"abort", "-h"}, strings.NewReader(""), &out, &out)
	_, cfg, _ := strings.Cut(out.String(), "-config")
	cfg, _, _ = strings.Cut(cfg, "\n  -")
	if strings.Contains(cfg, "console") || !strings.Contains(cfg, "REDIS_URL") {
		t.Errorf("abort -config help: %q", cfg)
	}
}

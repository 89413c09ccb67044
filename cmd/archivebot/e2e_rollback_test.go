package main

// Going back to upstream's bot after the node ran on its Redis
// (doc/migrating.md, Rolling back): the keys as the node leaves them are
// what upstream's readers expect, checked two ways. Always: every read
// upstream's bot, web app, plumbing and pipeline make of them, done in Go
// as their code does it (each cited). With ARCHIVEBOT_UPSTREAM pointing at
// a checkout of ArchiveTeam/ArchiveBot (never part of this repository):
// upstream's own Ruby and Python code run on them
// (testdata/migrate/upstream_bot.rb, upstream_pipeline.py).

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// envUpstream names a checkout of upstream's repository for the readers
// run as upstream's own code.
const envUpstream = "ARCHIVEBOT_UPSTREAM"

// upstreamReads does on rdb every read upstream's programs make of the
// keys they share with the node, as their code makes it, and fails on
// what would make one of them raise or misread.
func upstreamReads(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	scan := func(match string) []string {
		var out []string
		iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		return out
	}
	typ := func(k string) string { v, _ := rdb.Type(ctx, k).Result(); return v }
	// dashboard/resources/pending.rb: SCAN pending*, LRANGE each, HGET url.
	// bot/summary.rb, dashboard/resources/status.rb: SCAN pending:*, LLEN.
	// pipeline/archivebot/control.py: SCAN pending:*, RPOPLPUSH into working.
	var idents []string
	for _, q := range scan("pending*") {
		if typ(q) != "list" {
			t.Errorf("%s is a %s: upstream's /pending, !status and pipelines LRANGE, LLEN and RPOPLPUSH it", q, typ(q))
			continue
		}
		l, _ := rdb.LRange(ctx, q, 0, -1).Result()
		idents = append(idents, l...)
	}
	// lib/job.rb Job.working, from_ident: LRANGE working, HGET url, parse.
	w, _ := rdb.LRange(ctx, "working", 0, -1).Result()
	idents = append(idents, w...)
	for _, id := range idents {
		h, err := rdb.HGetAll(ctx, id).Result()
		if err != nil {
			t.Errorf("job %s: %v (upstream's Job#amplify HGETALLs it)", id, err)
			continue
		}
		// Job.from_ident returns nil without url; Addressable parses it.
		if u, err := url.Parse(h["url"]); err != nil || h["url"] == "" || !u.IsAbs() {
			t.Errorf("job %s: url %q, which upstream's Job.from_ident cannot use", id, h["url"])
		}
		// Job#from_hash: queued_at, started_at, finished_at to_i; the
		// pipeline's get_settings: delay_min, delay_max, concurrency,
		// settings_age, ignore_patterns_set_key (SMEMBERS).
		for _, f := range []string{"queued_at", "settings_age", "concurrency", "delay_min", "delay_max"} {
			if _, err := strconv.ParseFloat(h[f], 64); err != nil {
				t.Errorf("job %s: %s = %q is no number (upstream's pipeline and Job#from_hash read it as one)", id, f, h[f])
			}
		}
		if k := h["ignore_patterns_set_key"]; k != id+"_ignores" {
			t.Errorf("job %s: ignore_patterns_set_key %q", id, k)
		} else if tp := typ(k); tp != "set" && tp != "none" {
			t.Errorf("job %s: its ignore set is a %s (upstream's pipeline SMEMBERS it)", id, tp)
		}
		if h["log_key"] != id+"_log" {
			t.Errorf("job %s: log_key %q (upstream's pipeline logs into it)", id, h["log_key"])
		}
	}
	// dashboard/resources/status.rb: Integer(GET jobs_*).
	for _, k := range []string{"jobs_completed", "jobs_aborted", "jobs_failed"} {
		if v, err := rdb.Get(ctx, k).Result(); err == nil {
			if _, err := strconv.Atoi(v); err != nil {
				t.Errorf("%s = %q: upstream's /status calls Integer() on it", k, v)
			}
		}
	}
	// lib/pipeline_collection.rb: SCAN pipeline:*, HGETALL each.
	for _, k := range scan("pipeline:*") {
		if typ(k) != "hash" {
			t.Errorf("%s is a %s: upstream's pipeline notifier and /pipelines HGETALL it", k, typ(k))
		}
	}
	// dashboard/resources/finished.rb: SCAN *_ignores, HGETALL IDENT.
	for _, k := range scan("*_ignores") {
		if tp := typ(strings.TrimSuffix(k, "_ignores")); tp != "hash" && tp != "none" {
			t.Errorf("%s beside a %s: upstream's /finished HGETALLs the ident", k, tp)
		}
	}
	// bot/finish_notifier.rb: LPOP finish_notifications, JSON.parse.
	notes, _ := rdb.LRange(ctx, "finish_notifications", 0, -1).Result()
	for _, n := range notes {
		if !json.Valid([]byte(n)) {
			t.Errorf("finish notice %q: upstream's finish notifier JSON.parses it", n)
		}
	}
	// Nothing of the node's looks like one of upstream's keys.
	for _, k := range scan("archivebot:*") {
		if strings.HasSuffix(k, "_ignores") || strings.HasSuffix(k, "_log") {
			t.Errorf("key of the node %s would be read by upstream as a job's", k)
		}
	}
}

// TestE2EMigrateRollback: the node runs on upstream's Redis (pipelines
// crawling, an op pauses a queue, a job is queued for a pipeline that is
// not there, the dead job is failed), and is stopped again.
// migrate check -rollback names what blocks going back (the paused queue,
// and on a real Redis the node still running) until the documented steps
// are done; then upstream's readers read every key, and an upstream
// pipeline takes the job the node queued and finishes it.
func TestE2EMigrateRollback(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		fx := loadMigrateFixture(t, rdb)
		const ch = "#archivebot"
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		op, voice, _ := rolesIn(t, irc, ch)
		cfgPath := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t)
		o := fastRun(20, 50*time.Millisecond, 0)
		o.Resume = []string{fxRunning, fxAbort}
		pipeOne := runSim(t, rdb, pipelinesim.Config{ID: strings.TrimPrefix(fxPipeOne(t, fx), "pipeline:"), Nickname: "pipe-one"}, o)
		bot := startChild(t, cfgPath)
		op.WaitBotIn(botNick, ch)

		if got := ask(op, ch, "!pause pending-ao going back"); !strings.Contains(got, "aused") {
			t.Fatalf("!pause: %q", got)
		}
		_, nodeJob := identOf(t, "https://example.com/queued-by-the-node/")
		if got := ask(voice, ch, "!a https://example.com/queued-by-the-node/ --pipeline nobody"); !strings.Contains(got, "Queued") {
			t.Fatalf("!a: %q", got)
		}
		testproc.Eventually(t, "the dead job failed, the running ones ended", func() bool {
			n, _ := rdb.LLen(ctx, "working").Result()
			f, _ := rdb.Exists(ctx, store.KeyFailed(fxDead)).Result()
			return n == 0 && f == 1
		})

		check := func(wantCode int, wants ...string) *migrateReport {
			t.Helper()
			code, r, out := migrateCheck(t, b.URL, cfgPath, "-rollback")
			if code != wantCode {
				t.Fatalf("migrate check -rollback: exit %d, want %d\n%s", code, wantCode, out)
			}
			for _, w := range wants {
				if findingAbout(r.Blocks, w) == nil {
					t.Errorf("migrate check -rollback: no block about %q: %+v", w, r.Blocks)
				}
			}
			return r
		}
		wants := []string{"paused queues"}
		if b.Real() {
			wants = append(wants, "still runs on this Redis")
		}
		check(exitBlocked, wants...)
		// doc/migrating.md, Rolling back: resume what the check names,
		// stop the node.
		r := check(exitBlocked)
		if f := findingAbout(r.Blocks, "paused queues"); f == nil || f.Do != "archivebot resume pending-ao -config "+cfgPath+", before stopping the node" {
			t.Fatalf("the paused queue's finding: %+v", f)
		}
		// The command as the check prints it, typed as it is.
		asOperator(t, cfgPath, strings.TrimSuffix(findingAbout(r.Blocks, "paused queues").Do, ", before stopping the node"))
		// doc/migrating.md, The switch, 3: the commands from a shell.
		if out := runDocBlock(t, cfgPath, "archivebot pipelines -config"); !strings.Contains(out, "pipe-one") || !strings.Contains(out, nodeJob) {
			t.Errorf("the switch's shell commands, as the doc writes them:\n%s", out)
		}
		if code, _ := bot.term(); code != 0 {
			t.Fatalf("node exit %d", code)
		}
		check(0)
		upstreamReads(t, rdb)
		if err := pipeOne.stop(t); err != nil {
			t.Error(err)
		}

		// Upstream's pipeline named for the queue takes the node's job.
		p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "pipe-nobody", Upstream: false})
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != nodeJob {
			t.Fatalf("upstream's pipeline took %v (%v), want %s", j, err, nodeJob)
		}
		if _, err := j.LogDownload(ctx, j.Fields["url"], 200); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		upstreamReads(t, rdb)
		runUpstreamCode(t, b.URL, nodeJob)

		// The clean-ups of doc/migrating.md, as written there: notices a
		// killed node had taken go back to the head of
		// finish_notifications, in order; then every key of the node goes.
		rdb.Del(ctx, "finish_notifications")
		rdb.RPush(ctx, keyProcessing, `{"url":"https://example.com/p1"}`, `{"url":"https://example.com/p2"}`)
		rdb.RPush(ctx, "finish_notifications", `{"url":"https://example.com/n1"}`)
		if f := findingAbout(check(exitBlocked).Blocks, "2 finish notices are in archivebot:finish_notifications:processing"); f == nil || !strings.HasPrefix(f.Do, "archivebot migrate return-notices -config "+cfgPath+" puts them back") {
			t.Errorf("the notices taken: %+v", f)
		}
		if out := runDocBlock(t, cfgPath, "migrate return-notices"); !strings.Contains(out, "Moved 2 finish notices") {
			t.Errorf("return-notices said %q", out)
		}
		check(0)
		got, _ := rdb.LRange(ctx, "finish_notifications", 0, -1).Result()
		if want := []string{`{"url":"https://example.com/p1"}`, `{"url":"https://example.com/p2"}`, `{"url":"https://example.com/n1"}`}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("finish_notifications after the move back: %q, want %q", got, want)
		}
		if n, _ := rdb.Exists(ctx, keyProcessing).Result(); n != 0 {
			t.Errorf("the processing list is still there")
		}
		if n, _ := rdb.Keys(ctx, "archivebot:*").Result(); len(n) == 0 {
			t.Fatal("no key of the node to clean up: the test proves nothing")
		}
		runDocBlock(t, cfgPath, "migrate delete-node-keys -yes")
		if n, _ := rdb.Keys(ctx, "archivebot:*").Result(); len(n) != 0 {
			t.Errorf("keys of the node left after the clean-up: %q", n)
		}
		upstreamReads(t, rdb)
	})
}

// runDocBlock runs the shell block of doc/migrating.md that contains
// marker (see asOperator) and returns what it printed.
func runDocBlock(t *testing.T, cfgPath, marker string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "doc", "migrating.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(doc), "```")
	for i := 1; i < len(parts); i += 2 {
		if strings.Contains(parts[i], marker) {
			return asOperator(t, cfgPath, strings.TrimPrefix(parts[i], "\n"))
		}
	}
	t.Fatalf("doc/migrating.md has no shell block with %q", marker)
	return ""
}

// asOperator runs script with bash, as an operator would type it: in a
// directory holding the node's configuration as archivebot.toml
// (cfgPath), with archivebot on the PATH (this test binary) and no
// REDIS_URL (the doc configures Redis in the file). It returns what the
// script printed, and fails the test when it fails.
func asOperator(t *testing.T, cfgPath, script string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dir, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "archivebot.toml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "archivebot"), []byte("#!/bin/sh\nexec '"+exe+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as an operator, %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// runUpstreamCode runs upstream's own bot and pipeline code on the Redis
// the node left (ARCHIVEBOT_UPSTREAM: a checkout of upstream; skipped
// without it, which CI has not: upstream's code is never copied here).
func runUpstreamCode(t *testing.T, redisURL, nodeJob string) {
	t.Helper()
	up := os.Getenv(envUpstream)
	if up == "" {
		t.Logf("%s not set: upstream's own Ruby and Python readers not run (the Go readers above were)", envUpstream)
		return
	}
	ruby := testproc.Bin(t, "ruby")
	py := testproc.Python(t, "redis")
	dir := filepath.Join("..", "..", "testdata", "migrate")
	run := func(name string, cmd *exec.Cmd, input string) string {
		t.Helper()
		cmd.Env = append(os.Environ(), "REDIS_URL="+redisURL)
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("upstream's %s: %v\n%s", name, err, out)
		}
		t.Logf("upstream's %s:\n%s", name, out)
		return string(out)
	}
	bot := func(input string) string {
		return run("bot", exec.Command(ruby, filepath.Join(dir, "upstream_bot.rb"), up, filepath.Join("..", "..", "testdata", "reference")), input)
	}
	out := bot(strings.Join([]string{
		"@finish-notifier",
		"vera v #archivebot !status",
		"vera v #archivebot !pending",
		"@job " + nodeJob,
		"@pipelines",
		"@dashboard",
		"vera v #archivebot !a https://example.com/after-the-rollback/",
	}, "\n") + "\n")
	for _, w := range []string{
		"finish #archivebot vera: Your job for https://example.com/queued-by-the-node/ has finished.",
		"reply #archivebot vera: Job status: ",
		"job " + nodeJob + " Job " + nodeJob + " <https://example.com/queued-by-the-node/>. Started by vera. Job completed.",
		"/status {",
		"reply #archivebot vera: Queued https://example.com/after-the-rollback/.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("upstream's bot did not say %q", w)
		}
	}
	_, after := identOf(t, "https://example.com/after-the-rollback/")
	pout := run("pipeline", exec.Command(py, filepath.Join(dir, "upstream_pipeline.py"), up, "pipe-after"),
		"report\ntake\nlog "+after+" 200 200\ndone "+after+"\nexit\n")
	if !strings.Contains(pout, "done "+after+" finished") {
		t.Errorf("upstream's pipeline did not finish the job upstream's bot queued after the rollback")
	}
	if out := bot("@finish-notifier\n"); !strings.Contains(out, "Your job for https://example.com/after-the-rollback/ has finished.") {
		t.Errorf("upstream's finish notifier did not report it")
	}
}

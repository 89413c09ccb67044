package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// session runs the bot's main entry point with a pipe for stdin and a
// line reader over stdout.
type session struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
	done  chan int
	err   bytes.Buffer
}

func start(t *testing.T, args ...string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, lines: make(chan string, 100), done: make(chan int, 1)}
	go func() {
		code := run(args, inR, outW, &s.err)
		outW.Close()
		s.done <- code
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { inW.Close() })
	return s
}

// expect waits for a stdout line containing want and returns it.
func (s *session) expect(want string) string {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout closed waiting for %q; stderr:\n%s", want, s.err.String())
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			s.t.Fatalf("no line containing %q; stderr:\n%s", want, s.err.String())
		}
	}
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.in, line); err != nil {
		s.t.Fatal(err)
	}
}

// stop closes stdin (EOF ends the console) and returns the exit code.
func (s *session) stop() int {
	s.t.Helper()
	s.in.Close()
	for range s.lines {
	}
	select {
	case code := <-s.done:
		return code
	case <-time.After(10 * time.Second):
		s.t.Fatal("bot did not exit after stdin EOF")
		return -1
	}
}

func writeConfig(t *testing.T, dir, listen string) string {
	t.Helper()
	p := filepath.Join(dir, "archivebot.toml")
	text := fmt.Sprintf("[redis]\nlisten = %q\ndata_dir = %q\n[http]\nlisten = \"127.0.0.1:0\"\nstream_listen = \"127.0.0.1:0\"\n", listen, filepath.Join(dir, "data"))
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The walking skeleton end to end: console + embedded Redis, a job queued
// with the documented ident, visible to a Redis client while the bot runs,
// and still known after a restart.
func TestConsoleEmbeddedRestart(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "127.0.0.1:0")

	s := start(t, "-config", cfg)
	urlLine := s.expect("REDIS_URL=")
	s.send("!a http://example.com/")
	s.expect("Queued http://example.com/.")
	s.expect("Use !status 9tfs9o6557kgozy0wlqrzal3o for updates")

	// A pipeline (here: a plain Redis client) reaches the embedded server.
	opt, err := redis.ParseURL(urlLine[strings.Index(urlLine, "REDIS_URL=")+len("REDIS_URL="):])
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	q, err := c.LRange(context.Background(), "pending", 0, -1).Result()
	if err != nil || len(q) != 1 || q[0] != "9tfs9o6557kgozy0wlqrzal3o" {
		t.Fatalf("pending over TCP = %v, %v", q, err)
	}
	// Console jobs report back to the console (started_in "console").
	job, err := c.HGetAll(context.Background(), "9tfs9o6557kgozy0wlqrzal3o").Result()
	if err != nil || job["started_in"] != "console" || job["started_by"] == "" {
		t.Fatalf("job record %v, %v; want started_in console and a started_by", job, err)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, s.err.String())
	}

	s = start(t, "-config", cfg)
	s.send("!status 9tfs9o6557kgozy0wlqrzal3o")
	s.expect("Job 9tfs9o6557kgozy0wlqrzal3o <http://example.com/>.")
	s.send("!a http://example.com/")
	s.expect("already exists")
	if code := s.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// runRefused runs the node with args (and nothing on stdin) where it must
// not start, and returns what it wrote to stderr.
func runRefused(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, &errb); code == 0 {
		t.Fatal("started on a taken address")
	}
	return errb.String()
}

func TestListenAddressTaken(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	msg := runRefused(t, "-config", writeConfig(t, t.TempDir(), takenPort(t)))
	if !strings.Contains(msg, "already in use") || !strings.Contains(msg, "redis.url") || !strings.Contains(msg, "redis.listen") {
		t.Fatalf("message does not explain what to do:\n%s", msg)
	}
	// The hint for a run without a file is not given to one with a file.
	if strings.Contains(msg, "without a configuration file") {
		t.Fatalf("hint for a run without -config:\n%s", msg)
	}
}

// The whole node (console front end, external Redis) with
// notifier.finish_interval = "1h": only the push path (the pipeline's
// PUBLISH updates after mark-done) can deliver the finish report. The
// latency from mark-done to the printed line is logged, not asserted.
// The same node delivers the line an operator's `archivebot fail` queues.
func TestFinishReportWithinAnHourInterval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := writeTemp(t, "push.toml", fmt.Sprintf(`[redis]
url = %q
[notifier]
finish_interval = "1h"
pipeline_interval = "1h"
[http]
listen = ""
`, b.URL))
		t.Setenv("REDIS_URL", "")
		nodeMu.Lock()
		defer nodeMu.Unlock()
		stdinR, stdinW := io.Pipe()
		out, logs := newLineLog(), newLineLog()
		done := make(chan int, 1)
		go func() { done <- run([]string{"-config", cfg}, stdinR, out, logs) }()
		defer func() {
			stdinW.Close()
			if code := <-done; code != 0 {
				t.Errorf("node exit %d; log:\n%s", code, logs.tail(50))
			}
		}()
		// Wait until the node listens on `updates`.
		testproc.Eventually(t, "the node subscribes to updates", func() bool {
			n, err := b.Client.PubSubNumSub(ctx, "updates").Result()
			return err == nil && n["updates"] > 0
		})

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "pushpipe"})
		for i := range 3 {
			url := fmt.Sprintf("http://push%d.example.net/", i)
			id := queueJob(t, s, url, "alice", store.KeyPending)
			job, err := pipe.Take(ctx)
			if err != nil || job == nil {
				t.Fatalf("take: %v %v", job, err)
			}
			from := out.len()
			doneAt := time.Now()
			if err := job.Done(ctx); err != nil {
				t.Fatal(err)
			}
			out.waitFor(t, from, fmt.Sprintf("alice: Your job for %s has finished. (%s)", url, id))
			t.Logf("%s: finish report printed %v after mark-done", b.Name, time.Since(doneAt).Round(time.Millisecond))
		}

		id := queueJob(t, s, "http://opfail.example.net/", "bob", store.KeyPending)
		from := out.len()
		if code, _, errs := admin(t, b, "fail", id); code != 0 {
			t.Fatalf("fail: %s", errs)
		}
		line, _ := out.waitFor(t, from, "was failed by")
		if !strings.Contains(line, id) || !strings.Contains(line, "#archivebot") {
			t.Fatalf("notice line %q", line)
		}
	})
}

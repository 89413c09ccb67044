package main

// Whole-process test of "acknowledged means durable" with the embedded
// Redis: a job the console answered "Queued" for must be there after the
// process is killed with SIGKILL at any moment after that answer.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestE2EAcknowledgedJobsSurviveKill runs the node with the embedded Redis
// and the console (snapshots only every hour, so only the write-ahead log
// can save the jobs), queues a job with "!a URL" on stdin, waits for the
// "Queued" answer, kills the process with SIGKILL at a random moment 0 to
// 1500 ms after it, restarts it on the same data directory and checks over
// TCP that every job ever acknowledged is still there: its hash and its
// place in the pending queue. Each round also adds an ignore pattern to
// the job ("!ig", answered before the kill), which must be there too.
//
// E2E_DURABLE_ROUNDS sets the number of rounds (default 3).
func TestE2EAcknowledgedJobsSurviveKill(t *testing.T) {
	t.Parallel()
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("E2E_DURABLE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := nodeConfig{channels: []string{"#unused"}, dataDir: dataDir}.write(t)
	ctx := context.Background()

	var acked []string // idents answered "Queued", oldest first
	var delays []time.Duration
	for r := 0; r <= rounds; r++ {
		bot, stdin := startConsoleChild(t, cfg)
		line, _ := bot.log.waitFor(t, 0, "REDIS_URL=")
		opt, err := redis.ParseURL(strings.TrimSpace(line[strings.Index(line, "REDIS_URL=")+len("REDIS_URL="):]))
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(opt)
		pending, err := rdb.LRange(ctx, "pending", 0, -1).Result()
		if err != nil {
			t.Fatalf("round %d: LRANGE pending: %v", r, err)
		}
		lost := 0
		for i, id := range acked {
			n, err := rdb.Exists(ctx, id).Result()
			if err != nil {
				t.Fatalf("round %d: EXISTS %s: %v", r, id, err)
			}
			if n == 0 || !containsString(pending, id) {
				lost++
				t.Errorf("after kill %d: job %s (acknowledged in round %d, killed %s after the answer) is lost: hash exists=%d, in pending=%v",
					r, id, i, ms(delays[i]), n, containsString(pending, id))
			}
			if ok, err := rdb.SIsMember(ctx, id+"_ignores", ignorePattern(i)).Result(); err != nil || !ok {
				lost++
				t.Errorf("after kill %d: ignore pattern %s of job %s (acknowledged in round %d, killed %s after the answer) is lost (%v)",
					r, ignorePattern(i), id, i, ms(delays[i]), err)
			}
		}
		if lost > 0 {
			rdb.Close()
			t.Fatalf("%d of %d acknowledged jobs lost after kill %d", lost, len(acked), r)
		}
		if r == rounds {
			rdb.Close()
			if code, took := bot.term(); code != 0 {
				t.Errorf("exit code %d after SIGTERM (%s)", code, ms(took))
			}
			break
		}

		url, id := identOf(t, fmt.Sprintf("https://example.com/durable/%d", r))
		from := bot.log.len()
		if _, err := fmt.Fprintf(stdin, "!a %s\n", url); err != nil {
			t.Fatal(err)
		}
		bot.log.waitFor(t, from, "Queued "+url)
		from = bot.log.len()
		if _, err := fmt.Fprintf(stdin, "!ig %s %s\n", id, ignorePattern(r)); err != nil {
			t.Fatal(err)
		}
		bot.log.waitFor(t, from, "ignore pattern "+ignorePattern(r))
		acked = append(acked, id)
		// The kill comes at a random moment after the answer, to land
		// before, during or after the log is synced to disk.
		d := time.Duration(rand.IntN(1501)) * time.Millisecond
		delays = append(delays, d)
		time.Sleep(d)
		bot.kill()
		rdb.Close()
	}
	t.Logf("%d kills at random moments 0-1500 ms after the answers: all %d acknowledged jobs and ignore patterns survived", rounds, len(acked))
}

func ignorePattern(round int) string { return fmt.Sprintf("durable-%d", round) }

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startConsoleChild is startChild with the console on a pipe: it returns
// the process and its stdin.
func startConsoleChild(t testing.TB, cfg string) (*child, io.WriteCloser) {
	t.Helper()
	c := startChildWith(t, []string{"-config", cfg}, testproc.Options{Env: childEnv(), Stdin: true})
	return c, c.Stdin
}

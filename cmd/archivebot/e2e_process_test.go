package main

// Whole-process tests of the control node as a real process (this test
// binary re-executed with ARCHIVEBOT_E2E_CHILD=1, running run() exactly as
// main does): SIGKILL while finish notices are pending, SIGKILL after a
// job was acknowledged (with the embedded Redis: "acknowledged means
// durable"), and a clean shutdown on SIGTERM.

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

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestE2EFinishNoticesSurviveKill pushes finish notifications, as pipelines
// do, while the bot is running normally, while ngircd is down, while the
// bot is killed with ngircd down, and while the bot is killed (SIGKILL) in
// the middle of delivering them; ngircd and the bot are restarted each
// time. A watcher in the channel counts the lines per ident.
//
// Every notice must be delivered. Outside the kill-mid-delivery rounds
// every notice must be delivered exactly once. A kill between writing a
// line to the socket and acknowledging it in Redis cannot be told apart,
// after the restart, from a kill just before the write: the notice is
// delivered again (at least once). The rounds kill the bot the moment the
// watcher sees a line, to hit that window as often as it can be hit; the
// test allows at most one duplicate per kill and logs how many there were.
func TestE2EFinishNoticesSurviveKill(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#kill"
		// 20 lines/s, one at a time: a kill lands in the middle of a batch.
		cfg := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL, mps: 20, burst: 1}.write(t)

		var watchers []*irctest.User
		watch := func() *irctest.User {
			w := irctest.Dial(t, irc.Addr(), "watcher")
			w.Join(ch)
			watchers = append(watchers, w)
			return w
		}
		// count is how many finish lines for id the watchers saw.
		count := func(id string) int {
			n := 0
			for _, w := range watchers {
				n += countLines(botLines(w, ch), isFinishOf(id))
			}
			return n
		}
		push := func(tag string, n int) []string {
			ids := make([]string, n)
			for i := range ids {
				url, id := identOf(t, fmt.Sprintf("https://example.com/e2e/%s/%d", tag, i))
				pushNotice(t, rdb, notice("vera", ch, url))
				ids[i] = id
			}
			return ids
		}
		waitAll := func(w *irctest.User, ids []string) {
			t.Helper()
			preds := make([]func(ircmsg.Message) bool, len(ids))
			for i, id := range ids {
				preds[i] = fromBot(ch, isFinishOf(id))
			}
			expectEach(w, "finish lines", preds...)
		}
		// ircDown stops ngircd, waits for the bot to notice, pushes n
		// notices and waits until the bot has tried (and failed) to
		// deliver the first.
		ircDown := func(bot *child, tag string, n int) []string {
			t.Helper()
			// The lines seen so far are acknowledged once the server
			// answered the PING after them (bot/irc/confirm.go), a
			// moment after the watcher saw them: stopping ngircd in that
			// moment would leave one unconfirmed, sent again (at least
			// once), and this test counts the normal batches exactly.
			testproc.Eventually(t, "the lines seen so far acknowledged", func() bool {
				a, _ := rdb.LLen(ctx, keyNotices).Result()
				b, _ := rdb.LLen(ctx, keyProcessing).Result()
				return a+b == 0
			})
			from := bot.log.len()
			irc.Stop()
			bot.log.waitFor(t, from, "IRC connection lost, reconnecting")
			ids := push(tag, n)
			// One of these notices, not the last one delivered before
			// ngircd stopped (its acknowledgement may still be on its
			// way: a kill now would repeat it).
			testproc.Eventually(t, "a notice taken while IRC is down", func() bool {
				docs, _ := rdb.LRange(ctx, keyProcessing, 0, -1).Result()
				for _, d := range docs {
					if strings.Contains(d, "/e2e/"+tag+"/") {
						return true
					}
				}
				return false
			})
			return ids
		}
		// ircUp restarts ngircd and has a new watcher in the channel
		// before the bot is back (its reconnect backoff is at least 1 s).
		ircUp := func() *irctest.User {
			t.Helper()
			irc.Start()
			w := watch()
			if w.BotListed(botNick, ch) {
				t.Fatal("the bot rejoined before the watcher: lines may have gone unseen")
			}
			return w
		}
		var exact [][]string // notices that must arrive exactly once

		w := watch()
		bot := startChild(t, cfg)
		w.WaitBotIn(botNick, ch)
		t.Logf("bot process in the channel %s after it was started", ms(time.Since(bot.start)))

		// Normal operation.
		pushed := time.Now()
		ids := push("normal", 5)
		start := w.Pos()
		w.Expect("first line", fromBot(ch, isFinishOf(ids[0])))
		first := time.Since(pushed)
		w.SetPos(start)
		waitAll(w, ids)
		t.Logf("normal operation: first of 5 notices delivered %s after the push, all 5 after %s", ms(first), ms(time.Since(pushed)))
		exact = append(exact, ids)

		// (a) IRC down: the notices wait in Redis.
		ids = ircDown(bot, "ircdown", 5)
		restarted := time.Now()
		w = ircUp()
		w.WaitBotIn(botNick, ch)
		rejoined := time.Since(restarted)
		waitAll(w, ids)
		t.Logf("IRC down: bot back in the channel %s after ngircd restarted; 5 waiting notices delivered %s after", ms(rejoined), ms(time.Since(restarted)))
		exact = append(exact, ids)

		// (a+b) IRC down, and the bot killed while notices wait.
		ids = ircDown(bot, "ircdown-killed", 5)
		bot.kill()
		w = ircUp()
		bot = startChild(t, cfg)
		w.WaitBotIn(botNick, ch)
		waitAll(w, ids)
		bot.log.waitFor(t, 0, "delivering notices left from an earlier run")
		t.Logf("IRC down and bot killed: 5 notices delivered by the next process %s after it started", ms(time.Since(bot.start)))
		exact = append(exact, ids)

		// (b) Killed the moment the watcher sees the k-th line of a batch.
		// E2E_KILL_ROUNDS raises the number of rounds to measure how often
		// a kill duplicates a line.
		rounds, perRound := 6, 6
		if n, err := strconv.Atoi(os.Getenv("E2E_KILL_ROUNDS")); err == nil && n > 0 {
			rounds = n
		}
		var killed [][]string
		for r := 0; r < rounds; r++ {
			ids := push(fmt.Sprintf("killed%d", r), perRound)
			isRound := func(s string) bool {
				for _, id := range ids {
					if isFinishOf(id)(s) {
						return true
					}
				}
				return false
			}
			// Kill once the watcher has seen the (r%3+1)-th notice of the
			// batch; a line may carry several when the front end combines
			// a backlog.
			for seen := 0; seen <= r%3; {
				m := w.Expect("a line of the batch", fromBot(ch, isRound))
				for _, id := range ids {
					if isFinishOf(id)(m.Params[1]) {
						seen++
					}
				}
			}
			bot.kill()
			bot = startChild(t, cfg)
			testproc.Eventually(t, "every notice of the batch delivered", func() bool {
				for _, id := range ids {
					if count(id) == 0 {
						return false
					}
				}
				return true
			})
			killed = append(killed, ids)
		}

		// Barrier: a last notice is delivered after everything left in
		// the processing list.
		sentinel := "https://example.com/e2e/kill-sentinel"
		pushNotice(t, rdb, notice("vera", ch, sentinel))
		w.Expect("sentinel line", fromBot(ch, textIs(finishLine("vera", sentinel, false))))

		for _, ids := range exact {
			for _, id := range ids {
				if n := count(id); n != 1 {
					t.Errorf("notice %s delivered %d times, want exactly once", id, n)
				}
			}
		}
		dups := 0
		for r, ids := range killed {
			roundDups := 0
			var twice []string
			for _, id := range ids {
				n := count(id)
				if n == 0 {
					t.Errorf("round %d: notice %s lost", r, id)
				}
				if n > 1 {
					roundDups += n - 1
					twice = append(twice, id)
				}
			}
			// At most the line in flight is sent again; when notices backed
			// up it is a combined line carrying several of them.
			if roundDups > len(twice) || (len(twice) > 1 && !oneLineCarries(watchers, ch, twice)) {
				t.Errorf("round %d: %d duplicates (%v) after one kill, want at most those of the line in flight", r, roundDups, twice)
			}
			dups += roundDups
		}
		t.Logf("SIGKILL the moment a line is seen: %d kills, %d notices, %d delivered twice (line written, killed before the acknowledgement), none lost",
			rounds, rounds*perRound, dups)
		waitNoticesDrained(t, rdb)
		if code, took := bot.term(); code != 0 {
			t.Errorf("exit code %d after SIGTERM (%s)", code, ms(took))
		}
	})
}

// oneLineCarries reports whether some watcher saw one bot line reporting
// every one of ids.
func oneLineCarries(watchers []*irctest.User, ch string, ids []string) bool {
	for _, w := range watchers {
		for _, l := range botLines(w, ch) {
			all := true
			for _, id := range ids {
				all = all && isFinishOf(id)(l)
			}
			if all {
				return true
			}
		}
	}
	return false
}

// TestE2EShutdown: SIGTERM to the process with the embedded Redis: the
// channel sees the bot's QUIT, the process exits 0 within a few seconds,
// and the embedded Redis snapshot holds what was written before.
func TestE2EShutdown(t *testing.T) {
	t.Parallel()
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	const ch = "#term"
	op, voice, _ := rolesIn(t, irc, ch)
	dataDir := filepath.Join(t.TempDir(), "data")
	bot := startChild(t, nodeConfig{ircURL: irc.URL(), channels: []string{ch}, dataDir: dataDir}.write(t))
	line, _ := bot.log.waitFor(t, 0, "REDIS_URL=")
	op.WaitBotIn(botNick, ch)

	url, id := identOf(t, "https://example.com/e2e/shutdown")
	if r := ask(voice, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
		t.Fatalf("!a: %q", r)
	}
	opt, err := redis.ParseURL(strings.TrimSpace(line[strings.Index(line, "REDIS_URL=")+len("REDIS_URL="):]))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if q, err := rdb.LRange(context.Background(), "pending", 0, -1).Result(); err != nil || len(q) != 1 || q[0] != id {
		t.Fatalf("pending on the embedded Redis = %v, %v", q, err)
	}
	snapshot := filepath.Join(dataDir, "redis.json")
	if b, err := os.ReadFile(snapshot); err == nil && strings.Contains(string(b), id) {
		t.Fatal("the job is in the snapshot already; save_interval is 1h, so the shutdown save would go untested")
	}

	type seen struct {
		at  time.Time
		m   ircmsg.Message
		err error
	}
	quit := make(chan seen, 1)
	go func() {
		m, err := op.WaitWithin(irctest.WaitFor, "the bot's QUIT", func(m ircmsg.Message) bool {
			return m.Command == "QUIT" && m.Nick() == botNick
		})
		quit <- seen{time.Now(), m, err}
	}()
	sent := time.Now()
	code, took := bot.term()
	q := <-quit
	if q.err != nil {
		t.Fatal(q.err)
	}
	if len(q.m.Params) == 0 || !strings.Contains(q.m.Params[0], "ArchiveBot shutting down") {
		t.Errorf("QUIT %q", q.m.Params)
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	if took > 5*time.Second {
		t.Errorf("exit took %s after SIGTERM", ms(took))
	}
	t.Logf("SIGTERM: QUIT seen in the channel after %s, process exited with %d after %s", ms(q.at.Sub(sent)), code, ms(took))

	b, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatalf("no snapshot after shutdown: %v", err)
	}
	if !strings.Contains(string(b), id) || !strings.Contains(string(b), url) {
		t.Errorf("the snapshot (%d bytes) does not hold job %s", len(b), id)
	}
	if _, i, ok := bot.log.wait(0, 0, func(s string) bool { return strings.Contains(s, "embedded redis saved and stopped") }); !ok || i < 0 {
		t.Errorf("no log line about the final save; log:\n%s", bot.log.tail(20))
	}
}

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

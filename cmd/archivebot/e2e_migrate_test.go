package main

// The switch-over from a running upstream deployment (doc/migrating.md),
// end to end: the Redis as upstream's own bot and pipeline left it
// (testdata/migrate), its pipelines going on crawling, the node started
// on it as a real process in upstream's channel on a real ngircd, and
// killed once in the middle.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// fxPipeOne is the key of the fixture's running pipeline.
func fxPipeOne(t testing.TB, fx *redistest.Fixture) string {
	t.Helper()
	for _, k := range fx.Keys {
		if h := fx.Hash(k.Key); strings.HasPrefix(k.Key, "pipeline:") && h["nickname"] == "pipe-one" {
			return k.Key
		}
	}
	t.Fatal("no pipe-one in the fixture")
	return ""
}

// TestE2EMigrateSwitch: the node starts on upstream's Redis while
// upstream's pipelines crawl. The job that finished while no control node
// ran is reported; the jobs running under upstream's bot finish (one of
// them aborted, as an op asked upstream's bot) and are reported; the job
// its crashed pipeline left is failed and reported, and no job still
// heartbeating is; every queued job is taken and reported; the job
// upstream's bot already reported is not reported again. A SIGKILL of the
// node in the middle loses nothing: each report at least once, at most
// one repeat for the kill.
func TestE2EMigrateSwitch(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		fx := loadMigrateFixture(t, rdb)
		const ch = "#archivebot"
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		_, _, watcher := rolesIn(t, irc, ch)
		cfg := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t)

		// Upstream's pipelines go on: pipe-one with its two jobs, and
		// one for the --large queue.
		one := fxPipeOne(t, fx)
		o := fastRun(40, 50*time.Millisecond, 0)
		o.Resume = []string{fxRunning, fxAbort}
		pipeOne := runSim(t, rdb, pipelinesim.Config{ID: strings.TrimPrefix(one, "pipeline:"), Nickname: "pipe-one"}, o)
		large := runSim(t, rdb, pipelinesim.Config{Nickname: "pipe-large", Large: true}, fastRun(40, 50*time.Millisecond, 0))

		bot := startChild(t, cfg)
		watcher.WaitBotIn(botNick, ch)
		if got := ask(watcher, ch, "!status "+fxRunning); !strings.Contains(got, "https://example.com/running/") {
			t.Errorf("!status of a job running under upstream's bot: %q", got)
		}

		// The job that finished while no control node ran.
		gapURL := fx.Hash(fxGap)["url"]
		watcher.SetPos(0)
		watcher.Expect("the finish that waited", fromBot(ch, textIs(finishLine("vera", gapURL, false))))
		// Killed in the middle: what ends meanwhile waits for the next
		// process.
		bot.kill()
		bot = startChild(t, cfg)
		watcher.WaitBotIn(botNick, ch)

		ends := map[string]func(string) bool{
			fxGap:      isFinishOf(fxGap),
			fxRunning:  textIs(finishLine("vera", fx.Hash(fxRunning)["url"], false)),
			fxAbort:    textIs(finishLine("opal", fx.Hash(fxAbort)["url"], true)),
			fxDead:     textHas("Job "+fxDead+" <", "has had no heartbeat", "it has been marked as failed."),
			fxQueuedAO: isFinishOf(fxQueuedAO),
			fxNamed:    isFinishOf(fxNamed),
			fxLarge:    isFinishOf(fxLarge),
			fxPlain:    isFinishOf(fxPlain),
		}
		var preds []func(ircmsg.Message) bool
		for _, m := range ends {
			preds = append(preds, fromBot(ch, m))
		}
		watcher.SetPos(0)
		expectEach(watcher, "every job's end", preds...)

		// Nothing is left anywhere, and the counters add up: upstream's 2
		// completed, 5 more (running, and the four queued), 1 aborted, 1
		// failed.
		testproc.Eventually(t, "queues, working and notices empty", func() bool {
			n := 0
			for _, k := range []string{"pending", "pending-ao", "pending-large", "pending:one", "working",
				"finish_notifications", keyProcessing, store.KeyAdminNotices, store.KeyAdminNoticesProcessing} {
				l, _ := rdb.LLen(ctx, k).Result()
				n += int(l)
			}
			return n == 0
		})
		for k, want := range map[string]int{"jobs_completed": 7, "jobs_aborted": 1, "jobs_failed": 1} {
			if got, _ := rdb.Get(ctx, k).Int(); got != want {
				t.Errorf("%s = %d, want %d", k, got, want)
			}
		}
		// A reply is the barrier for lines still in flight.
		ask(watcher, ch, "!status")
		lines := botLines(watcher, ch)
		repeats := 0
		for id, m := range ends {
			switch n := countLines(lines, m); {
			case n == 0:
				t.Errorf("job %s: no end reported", id)
			case n > 1:
				repeats += n - 1
			}
		}
		if repeats > 1 {
			t.Errorf("%d reports repeated for one kill: %q", repeats, lines)
		}
		t.Logf("%d of %d reports repeated after the kill", repeats, len(ends))
		if n := countLines(lines, isFinishOf(fxBefore)); n != 0 {
			t.Errorf("the job upstream's bot reported before was reported again (%d)", n)
		}
		for _, id := range []string{fxRunning, fxAbort} {
			if n := countLines(lines, textHas(id, "no heartbeat")); n != 0 {
				t.Errorf("job %s, still heartbeating, was called dead", id)
			}
		}
		for _, id := range []string{fxRunning, fxAbort, fxDead} {
			if n := countLines(lines, startLineOf(id, "pipe-one")) + countLines(lines, startLineOf(id, "pipe-dead")); n != 0 {
				t.Errorf("job %s, running before the node first started, was announced as started", id)
			}
		}
		hist, _ := rdb.LRange(ctx, store.KeyHistory(fxRunning), 0, -1).Result()
		if h := strings.Join(hist, "\n"); !strings.Contains(h, `"event":"started"`) || !strings.Contains(h, `"event":"finished"`) {
			t.Errorf("history of %s: %s", fxRunning, h)
		}
		for _, s := range []*simRun{pipeOne, large} {
			if err := s.stop(t); err != nil {
				t.Errorf("pipeline %s: %v", s.p.Nickname(), err)
			}
			for _, e := range s.events.all() {
				if e.Kind == pipelinesim.EventError {
					t.Errorf("pipeline %s: %v", s.p.Nickname(), e)
				}
			}
		}
		if code, _ := bot.term(); code != 0 {
			t.Errorf("node exit %d", code)
		}
	})
}

package main

// Whole-process end-to-end tests: the real control node (run(), as main
// calls it, with a TOML configuration) on a real ngircd, with real IRC
// clients and simulated pipelines doing exactly what upstream pipelines do
// in Redis (pipelinesim). Each runs on miniredis and, when
// ARCHIVEBOT_TEST_REDIS is set, on a real redis-server.
//
// These nodes run in this process and are stopped with SIGTERM, so they
// run one at a time; the SIGKILL and SIGTERM tests of whole processes are
// in e2e_process_test.go.

import (
	"context"
	"fmt"
	"github.com/archiveteam/archivebot-go/internal/text"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestE2EJobLifecycle: a job queued with !a by a voiced user goes queued →
// taken → logging (with !status showing the analyzer's counts) → finished,
// and the channel gets exactly one finish line with the ident; an !ao job
// aborted while a pipeline runs it and a queued job aborted with !abort
// each get exactly one "was aborted" line.
func TestE2EJobLifecycle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#ab"
		_, cfg, op, voice, plain := channelWithRoles(t, b, ch)
		started := time.Now()
		startNode(t, cfg)
		op.WaitBotIn(botNick, ch)
		t.Logf("node up and in the channel after %s", ms(time.Since(started)))

		// Queued by the voiced user.
		url1, id1 := identOf(t, "https://Example.com/e2e/life")
		r := ask(voice, ch, "!a https://Example.com/e2e/life")
		if !strings.Contains(r, "Queued "+url1+".") || !strings.Contains(r, "!status "+id1) {
			t.Fatalf("!a: %q", r)
		}
		if r := ask(plain, ch, "!status "+id1); !strings.Contains(r, "In queue.") {
			t.Errorf("!status of a queued job: %q", r)
		}

		// Taken, step by step, so the counts are exact: a reporting
		// pipeline, heartbeats, eight log entries (one ignore entry, one
		// that is not JSON).
		sim := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "e2e-life"})
		if err := sim.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		job, err := sim.Take(ctx)
		if err != nil || job == nil || job.Ident != id1 || job.Queue != "pending" {
			t.Fatalf("Take = %+v, %v; want %s from pending", job, err, id1)
		}
		keep, stopKeep := context.WithCancel(ctx)
		kept := make(chan struct{})
		go func() { // report and heartbeat as a live pipeline does
			defer close(kept)
			report, beat := time.NewTicker(200*time.Millisecond), time.NewTicker(50*time.Millisecond)
			defer report.Stop()
			defer beat.Stop()
			for {
				select {
				case <-keep.Done():
					return
				case <-report.C:
					sim.Report(keep, "Running")
				case <-beat.C:
					job.Heartbeat(keep)
				}
			}
		}()
		for i, code := range []int{200, 200, 200, 301, 404, 500} {
			if _, err := job.LogDownload(ctx, url1+"page/"+strconv.Itoa(i), code); err != nil {
				t.Fatal(err)
			}
			if err := job.AddCounters(ctx, 1<<20, 1, 2); err != nil {
				t.Fatal(err)
			}
		}
		job.LogIgnore(ctx, url1+"wp-login.php", "/wp-login\\.php", "global")
		job.Log(ctx, "not json {")
		took := testproc.Eventually(t, "analyzer counts", func() bool {
			v, _ := rdb.HMGet(ctx, id1, "r2xx", "r3xx", "r4xx", "r5xx", "error_count", "last_analyzed_log_entry").Result()
			want := []string{"3", "1", "1", "1", "1", "8"}
			for i := range want {
				if s, _ := v[i].(string); s != want[i] {
					return false
				}
			}
			return true
		})
		t.Logf("analyzer counted 8 log entries within %s", ms(took))
		// The wording is the bot's; the numbers are the pipeline's
		// counters and the analyzer's counts.
		r = ask(plain, ch, "!status "+id1)
		if lr := strings.ToLower(r); !strings.Contains(lr, "in progress") || !strings.Contains(lr, "1 error") ||
			!strings.Contains(lr, "3 2xx, 1 3xx, 1 4xx, 1 5xx, 0 other") {
			t.Errorf("!status of a running job: %q; want it in progress with 1 error and 3 2xx, 1 3xx, 1 4xx, 1 5xx, 0 other", r)
		}
		if r := ask(plain, ch, "!whereis "+id1); !strings.Contains(r, `Job `+id1+` is on pipeline "e2e-life" (`+sim.Key()+`).`) {
			t.Errorf("!whereis: %q", r)
		}

		// Finished.
		done := time.Now()
		if err := job.Done(ctx); err != nil {
			t.Fatal(err)
		}
		op.Expect("finish line of "+id1, fromBot(ch, textIs(finishLine("vera", url1, false))))
		t.Logf("finish line in the channel %s after the pipeline marked the job done", ms(time.Since(done)))
		stopKeep()
		<-kept

		// An !ao job aborted while the pipeline (now running on its own)
		// crawls it.
		url2, id2 := identOf(t, "https://example.com/e2e/ao")
		if r := ask(plain, ch, "!ao "+url2); !strings.Contains(r, "for archival without recursion") {
			t.Fatalf("!ao: %q", r)
		}
		run := runSim(t, rdb, pipelinesim.Config{Nickname: "e2e-life"}, fastRun(100000, 20*time.Millisecond, 0))
		run.waitEvent(t, pipelinesim.EventTake, id2)
		run.waitLogs(t, id2, 3)
		if r := ask(voice, ch, "!abort "+id2); !strings.Contains(r, "Initiated abort for "+url2) {
			t.Errorf("!abort of a running job: %q", r)
		}
		run.waitEvent(t, pipelinesim.EventAbort, id2)
		aborted := run.waitEvent(t, pipelinesim.EventDone, id2)
		op.Expect("aborted line of "+id2, fromBot(ch, textIs(finishLine("paul", url2, true))))
		t.Logf("aborted line %s after the pipeline marked the job done", ms(time.Since(aborted)))
		if err := run.stop(t); err != nil {
			t.Errorf("pipeline run: %v", err)
		}

		// A queued job aborted with !abort: finished as aborted at once.
		url3, id3 := identOf(t, "https://example.com/e2e/queued")
		if r := ask(voice, ch, "!a "+url3); !strings.Contains(r, "Queued "+url3) {
			t.Fatalf("!a: %q", r)
		}
		start := time.Now()
		if r := ask(voice, ch, "!abort "+id3); !strings.Contains(r, "Job "+id3+" for "+url3+" was aborted before it started.") {
			t.Errorf("!abort of a queued job: %q", r)
		}
		op.Expect("aborted line of "+id3, fromBot(ch, textIs(finishLine("vera", url3, true))))
		t.Logf("queued job aborted: finish line %s after !abort", ms(time.Since(start)))

		// Barrier: a later notice is delivered after every earlier one
		// (and any duplicate of one) would have been.
		sentinel := "https://example.com/e2e/sentinel"
		pushNotice(t, rdb, notice("sentinel", ch, sentinel))
		op.Expect("sentinel line", fromBot(ch, textIs(finishLine("sentinel", sentinel, false))))

		lines := botLines(op, ch)
		for _, id := range []string{id1, id2, id3} {
			if n := countLines(lines, isFinishOf(id)); n != 1 {
				t.Errorf("%d finish lines for %s, want exactly 1:\n%s", n, id, strings.Join(lines, "\n"))
			}
		}
		// The sentinel's notice is acknowledged just after its line was
		// written: the lists drain right after the line is seen.
		for _, key := range []string{keyNotices, keyProcessing, keyWorking} {
			testproc.Eventually(t, key+" to be empty", func() bool {
				n, err := rdb.LLen(ctx, key).Result()
				return err == nil && n == 0
			})
		}
		if r := ask(plain, ch, "!status"); !strings.Contains(r, "1 completed, 2 aborted, 0 failed, 0 in progress, 0 pending, 0 pending-ao") {
			t.Errorf("!status: %q", r)
		}
	})
}

// TestE2EPipelineNotices: pipelines connecting, disconnecting (clean exit)
// and going silent (crash) are announced once each; a pipeline that was
// there when the node started is not announced as connected.
func TestE2EPipelineNotices(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rdb := b.Client
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#pipes"
		op := irctest.Dial(t, irc.Addr(), "opal")
		op.Join(ch)

		early := runSim(t, rdb, pipelinesim.Config{Nickname: "e2e-early"}, fastRun(0, 0, 0))
		<-early.firstReport
		startNode(t, nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t))
		op.WaitBotIn(botNick, ch)

		late := runSim(t, rdb, pipelinesim.Config{Nickname: "e2e-late"}, fastRun(0, 0, 0))
		reported := <-late.firstReport
		op.Expect("connected line", fromBot(ch, textIs(connectedLine(late.p, simVersion))))
		t.Logf("connected: announced %s after the first report", ms(time.Since(reported)))

		early.stop(t)
		exited := time.Now()
		op.Expect("disconnected line", fromBot(ch, textIs(disconnectedLine(early.p))))
		t.Logf("disconnected: announced %s after the clean exit", ms(time.Since(exited)))

		late.p.Crash()
		crashed := time.Now()
		if err := late.wait(t); err != pipelinesim.ErrCrashed {
			t.Errorf("crashed run returned %v", err)
		}
		op.Expect("silent line", fromBot(ch, func(s string) bool { return strings.HasPrefix(s, silentPrefix(late.p)) }))
		t.Logf("silent: announced %s after the crash (pipeline_silent_after 2s, ts in whole seconds)", ms(time.Since(crashed)))

		// Barrier: a third pipeline comes and goes, two comparisons later.
		third := runSim(t, rdb, pipelinesim.Config{Nickname: "e2e-third"}, fastRun(0, 0, 0))
		op.Expect("third connected", fromBot(ch, textIs(connectedLine(third.p, simVersion))))
		third.stop(t)
		op.Expect("third disconnected", fromBot(ch, textIs(disconnectedLine(third.p))))

		lines := botLines(op, ch)
		counts := func(p *pipelinesim.Pipeline) [3]int {
			return [3]int{
				countLines(lines, textIs(connectedLine(p, simVersion))),
				countLines(lines, textIs(disconnectedLine(p))),
				countLines(lines, func(s string) bool { return strings.HasPrefix(s, silentPrefix(p)) }),
			}
		}
		for _, c := range []struct {
			p    *pipelinesim.Pipeline
			want [3]int // connected, disconnected, silent
		}{
			{early.p, [3]int{0, 1, 0}},
			{late.p, [3]int{1, 0, 1}},
			{third.p, [3]int{1, 1, 0}},
		} {
			if got := counts(c.p); got != c.want {
				t.Errorf("pipeline %q: (connected, disconnected, silent) lines = %v, want %v", c.p.Nickname(), got, c.want)
			}
		}
		if n := len(lines); n != 5 {
			t.Errorf("%d bot lines, want 5:\n%s", n, strings.Join(lines, "\n"))
		}
	})
}

// TestE2EDeadJob: a pipeline crashes in the middle of a job. The death
// timer climbs; at the threshold the channel is told once, with ident and
// URL, that the job had no heartbeat and was failed (auto_fail); the job
// is out of working and counted as failed.
func TestE2EDeadJob(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#dead"
		op, voice, _ := nodeInChannel(t, b, ch)

		url, id := identOf(t, "https://example.com/e2e/dead")
		sim := runSim(t, rdb, pipelinesim.Config{Nickname: "e2e-crash"}, fastRun(100000, 20*time.Millisecond, 5))
		if r := ask(voice, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		sim.waitEvent(t, pipelinesim.EventTake, id)
		if err := sim.wait(t); err != pipelinesim.ErrCrashed {
			t.Fatalf("pipeline run: %v, want a crash", err)
		}
		crashed := time.Now()

		// The death timer climbs, one step per reaper cycle.
		var seen []int
		testproc.Eventually(t, "death timer to climb to the threshold", func() bool {
			v, err := rdb.HGet(ctx, id, "death_timer").Int()
			if err == nil && (len(seen) == 0 || v != seen[len(seen)-1]) {
				seen = append(seen, v)
			}
			return err == nil && v >= 10
		})
		for i := 1; i < len(seen); i++ {
			if seen[i] < seen[i-1] {
				t.Errorf("death timer went down: %v", seen)
			}
		}
		if len(seen) < 4 {
			t.Errorf("death timer seen at %v, want it climbing step by step", seen)
		}
		atCrash := op.Pos()
		m := op.Expect("no heartbeat line", fromBot(ch, textHas("has had no heartbeat", id, url)))
		t.Logf("death timer seen at %v; channel told %s after the crash: %q", seen, ms(time.Since(crashed)), m.Params[1])
		if !strings.HasPrefix(m.Params[1], "vera: ") || !strings.Contains(m.Params[1], "failed") || !strings.Contains(m.Params[1], `"e2e-crash"`) {
			t.Errorf("no heartbeat line %q: want it addressed to vera, naming the pipeline and saying the job failed", m.Params[1])
		}
		testproc.Eventually(t, "job out of working", func() bool {
			ids, _ := rdb.LRange(ctx, keyWorking, 0, -1).Result()
			return len(ids) == 0
		})
		f, _ := rdb.HMGet(ctx, id, "failed", "failed_reason").Result()
		if f[0] != "true" || f[1] != "no heartbeat for 1s" {
			t.Errorf("failed, failed_reason = %v", f)
		}
		if n, _ := rdb.Get(ctx, "jobs_failed").Result(); n != "1" {
			t.Errorf("jobs_failed = %q", n)
		}
		if ttl, _ := rdb.TTL(ctx, id).Result(); ttl <= 0 || ttl > 5*time.Second {
			t.Errorf("TTL of the failed job = %v, want 5 s", ttl)
		}
		if r := ask(op, ch, "!status "+id); !strings.Contains(r, "Failed: no heartbeat for 1s (reaped by the death timer") || !strings.Contains(r, ", at 20") {
			t.Errorf("!status of the failed job: %q", r)
		}

		// Barrier: the reaper runs on after the job was failed, and the
		// pipeline is announced as silent.
		reaperCycles(t, rdb, 5)
		op.SetPos(atCrash)
		op.Expect("silent line", fromBot(ch, func(s string) bool { return strings.HasPrefix(s, silentPrefix(sim.p)) }))
		lines := botLines(op, ch)
		if n := countLines(lines, textHas("has had no heartbeat")); n != 1 {
			t.Errorf("%d no heartbeat lines, want 1:\n%s", n, strings.Join(lines, "\n"))
		}
		if n := countLines(lines, isFinishOf(id)); n != 0 {
			t.Errorf("a failed job got a finish line:\n%s", strings.Join(lines, "\n"))
		}
	})
}

// TestE2EPlantedText: CR, LF and NUL planted in Redis — a pipeline's
// nickname, a job's note, a finish notification's url, started_by and
// started_in — cannot make the bot send an extra IRC line: a second
// client in the channel sees no smuggled line and nothing malformed.
func TestE2EPlantedText(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		const ch = "#planted"
		const smuggle = "\r\nPRIVMSG " + ch + " :x\x00"
		watcher, voice, plain := nodeInChannel(t, b, ch)

		evil := runSim(t, rdb, pipelinesim.Config{Nickname: "evil" + smuggle}, fastRun(100000, 50*time.Millisecond, 0))
		// The nickname reaches the channel cleaned (internal/text), then
		// quoted: CR and LF as spaces, NUL dropped.
		cleaned := fmt.Sprintf("Pipeline %q (%s, version %s) connected.", text.Clean(evil.p.Nickname(), text.Untrusted), evil.p.Key(), simVersion)
		watcher.Expect("connected line", fromBot(ch, textIs(cleaned)))

		url, id := identOf(t, "https://example.com/e2e/planted")
		if r := ask(voice, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		evil.waitEvent(t, pipelinesim.EventTake, id)
		// The start notice is addressed to vera too: have it out before
		// asking, or it is read as part of an answer.
		voice.Expect("start notice", fromBot(ch, textHas("Your job for "+url+" has started on evil")))
		if err := rdb.HSet(ctx, id, "note", "see"+smuggle+"end").Err(); err != nil {
			t.Fatal(err)
		}
		where := ask(voice, ch, "!whereis "+id)
		if !strings.Contains(where, "Job "+id+" is on pipeline \"evil") || !strings.Contains(where, "PRIVMSG "+ch+" :x") {
			t.Errorf("!whereis: %q", where)
		}
		status := ask(voice, ch, "!status "+id)
		if !strings.Contains(status, "Note: see") || !strings.Contains(status, "PRIVMSG "+ch+" :x") || !strings.HasSuffix(status, "end") {
			t.Errorf("!status: %q", status)
		}

		// The pipeline crashes: its nickname is in the death and silent
		// lines. The reaper (as upstream's) skips jobs that never sent a
		// heartbeat, so crash only after the first one.
		testproc.Eventually(t, "first heartbeat", func() bool {
			n, _ := rdb.HGet(ctx, id, "heartbeat").Int()
			return n > 0
		})
		evil.p.Crash()
		evil.wait(t)
		expectEach(watcher, "death and silent lines",
			fromBot(ch, textHas("has had no heartbeat", id)),
			fromBot(ch, func(s string) bool {
				return strings.HasPrefix(s, fmt.Sprintf("Pipeline %q (%s) has not reported for ", text.Clean(evil.p.Nickname(), text.Untrusted), evil.p.Key()))
			}))

		// Finish notifications with planted url, started_by, started_in.
		badURL := "https://example.com/e2e/planted-url" + smuggle
		pushNotice(t, rdb, notice("vera", ch, badURL))
		pushNotice(t, rdb, notice("tool"+smuggle, ch, "https://example.com/e2e/planted-nick"))
		pushNotice(t, rdb, notice("vera", ch+smuggle, "https://example.com/e2e/planted-channel"))
		sentinel := "https://example.com/e2e/planted-sentinel"
		pushNotice(t, rdb, notice("vera", ch, sentinel))
		m := watcher.Expect("planted url line", fromBot(ch, isFinishOf(ident.Of(badURL))))
		if !strings.HasPrefix(m.Params[1], "vera: Your job for https://example.com/e2e/planted-url") || !strings.Contains(m.Params[1], "PRIVMSG "+ch+" :x") {
			t.Errorf("planted url line: %q", m.Params[1])
		}
		m = watcher.Expect("planted nick line", fromBot(ch, isFinishOf(ident.Of("https://example.com/e2e/planted-nick"))))
		if !strings.HasPrefix(m.Params[1], "tool") || !strings.Contains(m.Params[1], ": Your job for https://example.com/e2e/planted-nick has finished.") {
			t.Errorf("planted nick line: %q", m.Params[1])
		}
		watcher.Expect("sentinel line", fromBot(ch, textIs(finishLine("vera", sentinel, false))))
		// no planted notice stuck
		waitNoticesDrained(t, rdb)
		// (paul: lines for vera would count as answers to vera.)
		if r := ask(plain, ch, "!status"); !strings.HasPrefix(r, "Job status:") {
			t.Errorf("the bot no longer answers: %q", r)
		}

		// What the other client saw: every line from the bot well formed,
		// in the channel or to a user, and no smuggled "x" from anyone.
		checkNoSmuggledLines(t, watcher, ch, "opal", "vera", "paul")
	})
}

// checkNoSmuggledLines checks everything u received: no line failed to
// parse or carried a NUL, nobody said "x", and the bot sent only its JOIN
// and PRIVMSGs to the channel or a user, each addressed or a report.
func checkNoSmuggledLines(t *testing.T, u *irctest.User, channel string, users ...string) {
	t.Helper()
	if bad := u.Unparsed(); len(bad) > 0 {
		t.Errorf("%s received unparsable lines: %q", u.Nick, bad)
	}
	for _, raw := range u.RawLines(0) {
		if strings.ContainsAny(raw, "\x00\r") {
			t.Errorf("%s received a line with NUL or CR: %q", u.Nick, raw)
		}
	}
	lines := 0
	for _, m := range u.Messages(0) {
		if m.Command == "PRIVMSG" && len(m.Params) == 2 && (m.Params[1] == "x" || strings.HasPrefix(m.Params[1], "x")) {
			t.Errorf("smuggled line: %s %q", m.Command, m.Params)
		}
		if !strings.HasPrefix(m.Nick(), botNick) {
			continue
		}
		switch {
		case m.Command == "JOIN":
		case m.Command != "PRIVMSG" || len(m.Params) != 2:
			t.Errorf("the bot sent %s %q", m.Command, m.Params)
		case !strings.EqualFold(m.Params[0], channel) && !isOneOf(m.Params[0], users):
			t.Errorf("the bot sent a line to %q: %q", m.Params[0], m.Params[1])
		default:
			lines++
			line := m.Params[1]
			if strings.HasPrefix(line, "[for ") {
				// A report meant for another channel: "[for #chan] vera: …".
				if _, rest, ok := strings.Cut(line, "] "); ok {
					line = rest
				}
			}
			if !strings.HasPrefix(line, "Pipeline \"") && !strings.HasPrefix(line, "tool") && !hasAddressee(line, users) {
				t.Errorf("unexpected line from the bot: %q", m.Params[1])
			}
		}
	}
	t.Logf("%d lines from the bot, all well formed", lines)
}

func isOneOf(s string, set []string) bool {
	for _, v := range set {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

func hasAddressee(line string, users []string) bool {
	for _, u := range users {
		if strings.HasPrefix(line, u+": ") {
			return true
		}
	}
	return false
}

// TestE2EForeignChannel: a finish notice a pipeline
// wrote with started_in "#victim" is reported in our channel, saying it
// was meant for #victim, and acknowledged; the bot never joins #victim,
// so #victim's operator cannot run !a or !fail through it.
func TestE2EForeignChannel(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.Client
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#ours"
		mallory := irctest.Dial(t, irc.Addr(), "mallory")
		mallory.Join("#victim") // first in: op there
		op, voice, _ := rolesIn(t, irc, ch)
		startNode(t, nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t))
		op.WaitBotIn(botNick, ch)

		url, id := identOf(t, "https://example.com/e2e/victim")
		if r := ask(voice, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		pushNotice(t, rdb, notice("mallory", "#victim", "https://example.com/e2e/planted"))
		_, planted := identOf(t, "https://example.com/e2e/planted")
		want := fmt.Sprintf("[for #victim] mallory: Your job for https://example.com/e2e/planted has finished. (%s)", planted)
		op.Expect("the report in "+ch, fromBot(ch, textIs(want)))
		waitNoticesDrained(t, rdb)

		// #victim's op tries the bot from there, then asks privately: the
		// bot runs one user's commands in order.
		mallory.Say("#victim", "!a https://example.com/e2e/evil")
		mallory.Say("#victim", "!fail "+id)
		if r := mallory.Ask(botNick, "", "!status"); len(r) != 1 || !strings.HasPrefix(r[0], "Job status:") {
			t.Errorf("private answers: %q", r)
		}
		if got := rdb.LRange(ctx, "pending", 0, -1).Val(); len(got) != 1 || got[0] != id {
			t.Errorf("pending = %v, want only vera's job %s", got, id)
		}
		if rdb.Exists(ctx, id).Val() != 1 {
			t.Error("vera's job was failed from #victim")
		}
		for _, m := range mallory.Messages(0) {
			if strings.HasPrefix(m.Nick(), botNick) && (m.Command == "JOIN" || (m.Command == "PRIVMSG" && len(m.Params) > 0 && m.Params[0] == "#victim")) {
				t.Errorf("the bot in #victim: %s %q", m.Command, m.Params)
			}
		}
		mallory.Send("NAMES #victim")
		names := mallory.Expect("NAMES #victim", func(m ircmsg.Message) bool { return m.Command == "353" })
		if strings.Contains(names.Params[len(names.Params)-1], botNick) {
			t.Errorf("the bot is in #victim: %q", names.Params)
		}
	})
}

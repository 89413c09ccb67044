package irc

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/news"
	mserver "github.com/archiveteam/archivebot-go/third_party/miniredis/server"
	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/ident"
)

// TestFlood: five users fire ten commands each at once. Every reply
// arrives (answers that back up combined), in order per user, no faster
// than the configured rate, and
// ngircd with its default flood control neither pauses nor drops the bot.
// FLOOD_RATE and FLOOD_BURST override the bot's rate to probe the server:
// ngircd 26 kept up with 6 lines/s of ~70 bytes and paused the bot down
// to about 3.5 lines/s when it sent 10/s.
func TestFlood(t *testing.T) {
	t.Parallel()
	rateCfg, burst := 4.0, 3
	if v, err := strconv.ParseFloat(os.Getenv("FLOOD_RATE"), 64); err == nil {
		rateCfg = v
	}
	if v, err := strconv.Atoi(os.Getenv("FLOOD_BURST")); err == nil {
		burst = v
	}
	const users, perUser = 5, 10
	n, h, joined := botAmong(t, irctest.NgircdOptions{Penalties: true}, "#flood", func(cfg *config.IRC) {
		cfg.MessagesPerSecond, cfg.Burst = rateCfg, burst
		cfg.CommandsPerMinute = 20 // the default: not what this test is about
	}, "watcher")
	watcher := joined[0]
	h.waitState(true)

	us := crowd(t, n, "#flood", "flooder%d", users)
	watcher.Mark()
	start := time.Now()
	for i, u := range us {
		var b strings.Builder
		for k := 0; k < perUser; k++ {
			fmt.Fprintf(&b, "PRIVMSG #flood :!status f%dn%d\r\n", i, k)
		}
		u.SendRaw(b.String()) // all ten in one write
	}

	// The watcher sees every reply, alone or combined with others of the
	// same user; check order per user and timing.
	next := make([]int, users)
	var times []time.Time
	token := regexp.MustCompile(`f(\d+)n(\d+)`)
	for got := 0; got < users*perUser; {
		m := watcher.ExpectWithin(60*time.Second, fmt.Sprintf("reply %d of %d", got+1, users*perUser), func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#flood")
		})
		times = append(times, time.Now())
		text := m.Params[1]
		var ui int
		if _, err := fmt.Sscanf(text, "flooder%d: ", &ui); err != nil || ui < 0 || ui >= users || !strings.Contains(text, "I don't know anything about") {
			t.Fatalf("unexpected line %q", text)
		}
		for _, tok := range token.FindAllStringSubmatch(text, -1) {
			u, _ := strconv.Atoi(tok[1])
			k, _ := strconv.Atoi(tok[2])
			if u != ui {
				t.Errorf("flooder%d's line answers flooder%d: %q", ui, u, text)
			}
			if k != next[ui] {
				t.Errorf("flooder%d: reply for command %d, want %d (out of order): %q", ui, k, next[ui], text)
			}
			next[ui] = k + 1
			got++
		}
	}
	total := time.Since(start)
	spread := times[len(times)-1].Sub(times[0])
	observed := float64(len(times)-1) / spread.Seconds()
	// After the burst, lines are spaced 1/rate apart.
	minSpread := time.Duration(float64(len(times)-burst) / rateCfg * float64(time.Second))
	t.Logf("flood: %d reply lines to %d users in %v (first to last %v): %.2f lines/s, configured %.2f/s burst %d",
		len(times), users, total.Round(time.Millisecond), spread.Round(time.Millisecond), observed, rateCfg, burst)
	if spread < minSpread*9/10 {
		t.Errorf("replies came faster than the configured rate: %v for %d lines, want ≥ %v", spread, len(times), minSpread)
	}
	if spread > minSpread*3/2+2*time.Second {
		t.Errorf("replies came much slower than the configured rate (throttled by the server?): %v, want about %v", spread, minSpread)
	}
	select {
	case up := <-h.events:
		t.Errorf("bot connection changed during the flood (connected=%v)", up)
	default:
	}
	if !h.client.Connected() {
		t.Error("bot was disconnected")
	}
	watcher.Say("#flood", "!status")
	if r := watcher.Reply("ArchiveBot", "#flood"); !strings.HasPrefix(r, "Job status:") {
		t.Errorf("after the flood: %q", r)
	}
	if log := n.LogText(); strings.Contains(log, "Excess") || strings.Contains(log, "buffer") || strings.Contains(log, "too long") {
		t.Errorf("ngircd complained about the bot:\n%s", log)
	}
}

// TestCommandsRunOnArrival: 30 users send 20
// commands each at once. Every command is applied and answered, and all of
// them are applied while the reply backlog is still being sent (before,
// Redis ran only about 13 commands ahead of the replies). It logs when the
// last reply came and when the last Redis change happened.
// ARCHIVEBOT_FLOOD_RATE sets messages_per_second (1 is the default).
func TestCommandsRunOnArrival(t *testing.T) {
	t.Parallel()
	users, perUser := 30, 20
	rateCfg, burst := 20.0, 5
	if v, err := strconv.ParseFloat(os.Getenv("ARCHIVEBOT_FLOOD_RATE"), 64); err == nil {
		rateCfg, burst = v, 3
	}
	n, h, joined := botAmong(t, irctest.NgircdOptions{}, "#flood", func(cfg *config.IRC) {
		cfg.MessagesPerSecond, cfg.Burst, cfg.CommandsPerMinute = rateCfg, burst, 20
	}, "watcher")
	watcher := joined[0]

	// Record when Redis runs each command's script, and how many lines the
	// bot had written by then.
	var mu sync.Mutex
	var writes []time.Time
	var sentAtLast int64
	h.mini.Server().SetPreHook(func(_ *mserver.Peer, cmd string, _ ...string) bool {
		if c := strings.ToUpper(cmd); c == "EVALSHA" || c == "EVAL" {
			mu.Lock()
			writes = append(writes, time.Now())
			sentAtLast = h.client.out.sent.Load()
			mu.Unlock()
		}
		return false
	})

	us := crowd(t, n, "#flood", "user%02d", users)
	watcher.Mark()
	start := time.Now()
	for i, u := range us {
		var b strings.Builder
		for k := range perUser {
			fmt.Fprintf(&b, "PRIVMSG #flood :!ao https://example.com/u%02d/n%02d\r\n", i, k)
		}
		u.SendRaw(b.String())
	}
	// Every command is answered: a user's answers, put back together
	// (long combined answers are split over lines, maybe inside a URL),
	// name each of their URLs.
	var last time.Time
	texts := make([]strings.Builder, users)
	answered := make([][]bool, users)
	for i := range answered {
		answered[i] = make([]bool, perUser)
	}
	for missing := users * perUser; missing > 0; {
		m := watcher.ExpectWithin(10*time.Minute, fmt.Sprintf("answers (%d missing)", missing), func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#flood")
		})
		var i int
		if _, err := fmt.Sscanf(m.Params[1], "user%02d: ", &i); err != nil || i < 0 || i >= users {
			t.Fatalf("unexpected line %q", m.Params[1])
		}
		texts[i].WriteString(strings.TrimPrefix(m.Params[1], fmt.Sprintf("user%02d: ", i)))
		for k := range perUser {
			if !answered[i][k] && strings.Contains(texts[i].String(), fmt.Sprintf("https://example.com/u%02d/n%02d ", i, k)) {
				answered[i][k] = true
				missing--
			}
		}
	}
	last = time.Now()
	lines := len(botLinesTo(watcher, 0, "#flood"))
	if got := h.rdb.LLen(context.Background(), "pending-ao").Val(); got != int64(users*perUser) {
		t.Errorf("%d jobs queued, want %d", got, users*perUser)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) == 0 {
		t.Fatal("no Redis script ran")
	}
	t.Logf("%d users × %d commands at %.0f lines/s: last reply after %v in %d lines; Redis changes from %v to %v after the first command (%d scripts); the bot had written %d lines when the last ran",
		users, perUser, rateCfg, last.Sub(start).Round(time.Millisecond), lines,
		writes[0].Sub(start).Round(time.Millisecond), writes[len(writes)-1].Sub(start).Round(time.Millisecond), len(writes), sentAtLast)
	if sentAtLast > int64(users*perUser/4) {
		t.Errorf("the last command ran after %d lines were written: commands waited for replies", sentAtLast)
	}
	if lines >= users*perUser {
		t.Errorf("%d lines for %d commands: replies were not combined", lines, users*perUser)
	}
}

// TestFinishNoticesCombined: finish notices
// that back up in a channel are combined per nick into lines within the
// IRC limit; every notice is reported and acknowledged. The reports are
// handed to the client as the finish notifier hands them (the notifier's
// own drain is tested in package coordinator and end to end in
// cmd/archivebot). ARCHIVEBOT_FLOOD_NOTICES
// sets the count (10,000 for the measurement in doc/benchmarks.md).
func TestFinishNoticesCombined(t *testing.T) {
	t.Parallel()
	count := 1000
	if v, err := strconv.Atoi(os.Getenv("ARCHIVEBOT_FLOOD_NOTICES")); err == nil && v > 0 {
		count = v
	}
	// A rate the notifier outpaces however loaded the machine is, so the
	// channel backs up (at the tests' usual 200 lines/s it may not, and
	// nothing needs combining).
	n, h, joined := botAmong(t, irctest.NgircdOptions{}, "#test", func(cfg *config.IRC) {
		cfg.MessagesPerSecond, cfg.Burst = 40, 5
	}, "watcher")
	watcher := joined[0]
	h.waitState(true)
	ctx := context.Background()
	ids := make([]string, count)
	reports := make([]news.FinishReport, count)
	for i := range count {
		url := fmt.Sprintf("https://example.com/site%05d/", i)
		ids[i] = ident.Of(url)
		channel := "#test"
		if i%10 == 9 {
			channel = "#elsewhere"
		}
		how := "has finished"
		if i%7 == 0 {
			how = "was aborted"
		}
		nick := fmt.Sprintf("nick%d", i%5)
		reports[i] = news.FinishReport{Channel: channel, Nick: nick, URL: url, Ident: ids[i], Aborted: i%7 == 0,
			Line: fmt.Sprintf("%s: Your job for %s %s. (%s)", nick, url, how, ids[i])}
	}
	// The reports go in as the finish notifier hands them over (package
	// coordinator, deliver.go): a batch at a time, all of a batch queued at
	// once, the next batch once every report of this one is done.
	watcher.Mark()
	start := time.Now()
	for b := 0; b < count; b += config.DefaultFinishBatch {
		batch := reports[b:min(b+config.DefaultFinishBatch, count)]
		errs := make(chan error, len(batch))
		for _, r := range batch {
			h.client.AnnounceFinish(ctx, r, func(err error) { errs <- err })
		}
		for range batch {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	took := time.Since(start)
	// Everything acknowledged was written; wait for the last lines to
	// arrive at the watcher: every ident shows up.
	for _, id := range ids {
		watcher.SetPos(0)
		watcher.Expect("report of "+id, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.Contains(m.Params[1], id)
		})
	}
	raw := watcher.RawLines(0)
	lines := 0
	for _, l := range raw {
		if strings.Contains(l, " PRIVMSG #test :") && strings.HasPrefix(l, ":ArchiveBot!") {
			lines++
			if len(l)+2 > 512 {
				t.Errorf("line of %d bytes: %q", len(l)+2, l)
			}
		}
	}
	t.Logf("%d finish notices: %d channel lines in %v", count, lines, took.Round(time.Millisecond))
	if lines > count/3 {
		t.Errorf("%d lines for %d notices: not combined", lines, count)
	}
	if strings.Contains(n.LogText(), "too long") || !h.client.Connected() {
		t.Error("the server refused a line")
	}
}

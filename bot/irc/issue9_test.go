package irc

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mserver "github.com/alicebob/miniredis/v2/server"
	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
)

// Tests for issue 9, findings 1, 2 and 6 ("nothing silently dropped, no
// channel but ours, commands that take effect when they arrive").

// botLinesTo lists the text of every PRIVMSG the bot sent to target that
// u saw, from scan position from.
func botLinesTo(u *irctest.User, from int, target string) []string {
	var out []string
	for _, m := range u.Messages(from) {
		if irctest.IsFrom(m, "ArchiveBot", target) {
			out = append(out, m.Params[1])
		}
	}
	return out
}

func botJoined(u *irctest.User, channel string) bool {
	for _, m := range u.Messages(0) {
		if m.Command == "JOIN" && strings.EqualFold(m.Nick(), "ArchiveBot") && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel) {
			return true
		}
	}
	return false
}

// TestIssue9ForeignChannel (finding 1): a report for a channel that is not
// configured goes to the report channel saying where it was meant to go;
// the bot never joins that channel, so its operators cannot command the
// bot from there.
func TestIssue9ForeignChannel(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	mallory := irctest.Dial(t, n.Addr(), "mallory")
	mallory.Join("#victim") // first in: op there
	watcher := irctest.Dial(t, n.Addr(), "watcher")
	watcher.Join("#test")
	h := startBot(t, testIRCConfig(n.URL(), "#test"), nil)
	watcher.WaitBotIn("ArchiveBot", "#test")
	ctx := context.Background()
	h.rdb.HSet(ctx, "plantedjob", map[string]any{"url": "https://example.com/planted", "started_by": "x", "started_in": "#test"})
	h.rdb.LPush(ctx, "pending", "plantedjob")

	line := "mallory: Your job for https://example.com/x has finished. (abc)"
	if err := h.client.Announce(ctx, "#victim", line); err != nil {
		t.Fatalf("Announce for #victim: %v", err)
	}
	m := watcher.Expect("the report in #test", func(m ircmsg.Message) bool { return irctest.IsFrom(m, "ArchiveBot", "#test") })
	if want := "[for #victim] " + line; m.Params[1] != want {
		t.Errorf("report channel line %q, want %q", m.Params[1], want)
	}

	// #victim's op tries to command the bot from there.
	mallory.Say("#victim", "!a https://example.com/evil")
	mallory.Say("#victim", "!fail plantedjob")
	// A private command after them: the bot runs one user's commands in
	// order, so once it is answered the channel ones would have run.
	if r := mallory.Ask("ArchiveBot", "", "!status"); len(r) != 1 || !strings.HasPrefix(r[0], "Job status:") {
		t.Errorf("private answers: %q", r)
	}
	if got := h.rdb.LRange(ctx, "pending", 0, -1).Val(); strings.Join(got, ",") != "plantedjob" {
		t.Errorf("pending = %v: a command from #victim was obeyed", got)
	}
	if got := h.rdb.HGet(ctx, "plantedjob", "url").Val(); got == "" {
		t.Error("plantedjob was failed from #victim")
	}
	if botJoined(mallory, "#victim") {
		t.Error("the bot joined #victim")
	}
	for _, l := range botLinesTo(mallory, 0, "#victim") {
		t.Errorf("the bot posted in #victim: %q", l)
	}
	// Nor will it on a reconnect: only configured channels are wanted.
	h.client.mu.Lock()
	wanted := len(h.client.wanted)
	h.client.mu.Unlock()
	if wanted != 1 {
		t.Errorf("%d channels to rejoin after reconnects, want only #test", wanted)
	}
}

// TestIssue9ForcedJoinAndCaseMapping (finding 1): a channel the server
// puts the bot in is left, and commands from it are ignored; a configured
// channel is recognised under the server's CASEMAPPING.
func TestIssue9ForcedJoinAndCaseMapping(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#ops[1]"), nil)
	p := s.accept()
	p.Expect("NICK", cmdIs("NICK", "ArchiveBot"))
	p.Send(":fake 001 ArchiveBot :Welcome")
	p.Line(":fake 005 ArchiveBot CASEMAPPING=rfc1459 CHANTYPES=# :are supported")
	p.Send(":fake 376 ArchiveBot :End of MOTD")
	h.waitState(true)
	p.Expect("JOIN", cmdIs("JOIN", "#ops[1]"))
	p.Send(":ArchiveBot!u@h JOIN #OPS{1}")
	p.Send(":fake 353 ArchiveBot = #OPS{1} :@op ArchiveBot")
	p.Send(":fake 366 ArchiveBot #OPS{1} :End of /NAMES list.")
	// Forced into #victim, with its op.
	p.Send(":ArchiveBot!u@h JOIN #victim")
	p.Send(":fake 353 ArchiveBot = #victim :@mallory ArchiveBot")
	p.Send(":fake 366 ArchiveBot #victim :End of /NAMES list.")
	p.Expect("PART #victim", cmdIs("PART", "#victim"))
	p.Send(":mallory!u@h PRIVMSG #victim :!a https://example.com/evil")
	p.Send(":op!u@h PRIVMSG #ops{1} :!a https://example.com/good")
	m := p.Expect("an answer", cmdIs("PRIVMSG"))
	if m.Params[0] != "#ops{1}" || !strings.HasPrefix(m.Params[1], "op: Queued https://example.com/good") {
		t.Errorf("answer %q", m.Params)
	}
	if got := h.rdb.LLen(context.Background(), "pending").Val(); got != 1 {
		t.Errorf("%d jobs pending, want 1 (only op's)", got)
	}
}

// TestIssue9ThrottleAnswersEveryCommand (finding 2): at the default
// throttle and outbox rate, a voiced user's !a and 40 !ig sent at once are
// all applied and all answered.
func TestIssue9ThrottleAnswersEveryCommand(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	op := irctest.Dial(t, n.Addr(), "opal")
	op.Join("#test")
	vera := irctest.Dial(t, n.Addr(), "vera")
	vera.Join("#test")
	op.Send("MODE #test +v vera")
	vera.Expect("+v", isMode("#test", "+v", "vera"))
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.MessagesPerSecond, cfg.Burst, cfg.CommandsPerMinute = 1, 3, 20 // the defaults
	h := startBot(t, cfg, nil)
	vera.WaitBotIn("ArchiveBot", "#test")
	vera.Mark()

	_, id, err := ident.FromURL("https://example.com/cleanup")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("PRIVMSG #test :!a https://example.com/cleanup\r\n")
	const patterns = 40
	for i := range patterns {
		fmt.Fprintf(&b, "PRIVMSG #test :!ig %s p%03dz\r\n", id, i)
	}
	vera.SendRaw(b.String())

	// Every pattern is answered, in some line addressed to vera.
	for i := range patterns {
		p := fmt.Sprintf("p%03dz", i)
		vera.SetPos(0)
		vera.ExpectWithin(90*time.Second, "answer for "+p, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.HasPrefix(m.Params[1], "vera: ") && strings.Contains(m.Params[1], p)
		})
	}
	applied := 0
	for i := range patterns {
		if h.rdb.SIsMember(context.Background(), store.KeyIgnores(id), fmt.Sprintf("p%03dz", i)).Val() {
			applied++
		}
	}
	if applied != patterns {
		t.Errorf("%d patterns applied, want %d", applied, patterns)
	}
	lines := botLinesTo(vera, 0, "#test")
	for _, l := range lines {
		if strings.Contains(l, "slow down") {
			t.Errorf("a voiced user was throttled: %q", l)
		}
	}
	t.Logf("!a + %d !ig: %d lines in the channel:\n%s", patterns, len(lines), strings.Join(lines, "\n"))
}

// TestIssue9ThrottleRefusalsSaid (finding 2): a user without a rank over
// the limit is refused, and every refusal is said; nothing promises an
// answer that does not come.
func TestIssue9ThrottleRefusalsSaid(t *testing.T) {
	t.Parallel()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	first := irctest.Dial(t, n.Addr(), "first")
	first.Join("#test") // takes the op
	spam := irctest.Dial(t, n.Addr(), "spammer")
	spam.Join("#test")
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.CommandsPerMinute = 3
	startBot(t, cfg, nil)
	spam.WaitBotIn("ArchiveBot", "#test")
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, "PRIVMSG #test :!status spam%d\r\n", i)
	}
	spam.SendRaw(b.String())
	for i := range 8 {
		w := fmt.Sprintf("spam%d", i)
		spam.SetPos(0)
		m := spam.Expect("answer about "+w, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.Contains(m.Params[1], w)
		})
		for _, part := range strings.Split(m.Params[1], " | ") {
			if strings.Contains(part, w) && (i >= 3) != strings.Contains(part, "not run") {
				t.Errorf("command %d: %q, want a refusal naming it only beyond the limit", i, part)
			}
		}
	}
	for _, l := range botLinesTo(spam, 0, "#test") {
		if strings.Contains(l, "answer again") {
			t.Errorf("a promise: %q", l)
		}
	}
}

// TestIssue9CommandsRunOnArrival (finding 6): 30 users send 20 commands
// each at once. Every command is applied and answered, and all of them
// are applied while the reply backlog is still being sent (before, Redis
// ran only about 13 commands ahead of the replies). It logs when the last
// reply came and when the last Redis change happened.
// ISSUE9_RATE sets messages_per_second (1 is the default).
func TestIssue9CommandsRunOnArrival(t *testing.T) {
	t.Parallel()
	users, perUser := 30, 20
	rateCfg, burst := 20.0, 5
	if v, err := strconv.ParseFloat(os.Getenv("ISSUE9_RATE"), 64); err == nil {
		rateCfg, burst = v, 3
	}
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	watcher := irctest.Dial(t, n.Addr(), "watcher")
	watcher.Join("#flood")
	cfg := testIRCConfig(n.URL(), "#flood")
	cfg.MessagesPerSecond, cfg.Burst, cfg.CommandsPerMinute = rateCfg, burst, 20
	h := startBot(t, cfg, nil)
	watcher.WaitBotIn("ArchiveBot", "#flood")

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

	us := make([]*irctest.User, users)
	for i := range us {
		us[i] = irctest.Connect(t, n.Addr(), fmt.Sprintf("user%02d", i))
	}
	for _, u := range us {
		u.Registered()
		u.Join("#flood")
	}
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

// TestIssue9FinishNoticesCombined (finding 6): finish notices that back up
// in a channel are combined per nick into lines within the IRC limit;
// every notice is reported and acknowledged. ISSUE9_NOTICES sets the count
// (10,000 for the measurement in the README).
func TestIssue9FinishNoticesCombined(t *testing.T) {
	t.Parallel()
	count := 1000
	if v, err := strconv.Atoi(os.Getenv("ISSUE9_NOTICES")); err == nil && v > 0 {
		count = v
	}
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	watcher := irctest.Dial(t, n.Addr(), "watcher")
	watcher.Join("#test")
	// A rate the notifier outpaces however loaded the machine is, so the
	// channel backs up (at the tests' usual 200 lines/s it may not, and
	// nothing needs combining).
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.MessagesPerSecond, cfg.Burst = 40, 5
	h := startBot(t, cfg, nil)
	watcher.WaitBotIn("ArchiveBot", "#test")
	h.waitState(true)
	ctx := context.Background()
	ids := make([]string, count)
	for i := range count {
		url := fmt.Sprintf("https://example.com/site%05d/", i)
		ids[i] = ident.Of(url)
		channel := "#test"
		if i%10 == 9 {
			channel = "#elsewhere"
		}
		doc := fmt.Sprintf(`{"aborted":%v,"started_by":"nick%d","started_in":%q,"url":%q}`, i%7 == 0, i%5, channel, url)
		h.rdb.RPush(ctx, store.KeyFinishNotifications, doc)
	}
	f := coordinator.NewFinishNotifier(store.NewStore(h.rdb), h.client, coordinator.FinishConfig{}, testLogger(t))
	watcher.Mark()
	start := time.Now()
	for h.rdb.LLen(ctx, store.KeyFinishNotifications).Val()+h.rdb.LLen(ctx, store.KeyFinishProcessing).Val() > 0 {
		if err := f.RunOnce(ctx); err != nil {
			t.Fatal(err)
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

package irc

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
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
	n := irctest.StartNgircd(t, irctest.NgircdOptions{Penalties: true})
	cfg := testIRCConfig(n.URL(), "#flood")
	cfg.MessagesPerSecond, cfg.Burst = rateCfg, burst
	cfg.CommandsPerMinute = 20 // the default: not what this test is about
	watcher := irctest.Dial(t, n.Addr(), "watcher")
	watcher.Join("#flood")
	h := startBot(t, cfg, nil)
	watcher.WaitBotIn("ArchiveBot", "#flood")
	h.waitState(true)

	us := make([]*irctest.User, users)
	for i := range us {
		us[i] = irctest.Connect(t, n.Addr(), fmt.Sprintf("flooder%d", i))
	}
	for _, u := range us {
		u.Registered()
		u.Send("JOIN #flood")
	}
	for _, u := range us {
		u.Expect("end of NAMES", func(m ircmsg.Message) bool { return m.Command == "366" })
	}
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

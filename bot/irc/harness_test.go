package irc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/store"
)

// The real ngircd and the scripted IRC users come from package irctest;
// this file adds the bot under test, with its timers shortened.

// waitFor bounds every wait in these tests; each step normally takes
// milliseconds.
const waitFor = irctest.WaitFor

// ---------------------------------------------------------------------
// The bot under test.

type harness struct {
	t      testing.TB
	client *Client
	bot    *bot.Bot
	mini   *miniredis.Miniredis
	rdb    *redis.Client
	ctx    context.Context // the client's, cancelled by stop
	cancel context.CancelFunc
	done   chan error
	events chan bool // connection state changes
}

func testIRCConfig(server string, channels ...string) config.IRC {
	report := ""
	if len(channels) > 0 {
		report, _, _ = strings.Cut(channels[0], " ")
	}
	return config.IRC{
		ReportChannel:     report,
		Server:            server,
		Nick:              "ArchiveBot",
		Channels:          channels,
		MessagesPerSecond: 200,
		Burst:             50,
		CommandsPerMinute: 1000,
	}
}

// fast shortens the client's timers for tests.
func fast(c *Client) {
	c.backoffMin = 20 * time.Millisecond
	c.backoffMax = 500 * time.Millisecond
	c.reclaimEvery = 200 * time.Millisecond
	c.rejoinEvery = 300 * time.Millisecond
	c.kickRejoinDelay = 20 * time.Millisecond
	c.drainTimeout = 2 * time.Second
	c.quitTimeout = 2 * time.Second
	c.timeout = 5 * time.Second
	c.keepAlive = 30 * time.Second
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newTestBot(t testing.TB) (*bot.Bot, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	b := bot.New(store.New(rdb), bot.Options{Logger: testLogger(t)})
	return b, m, rdb
}

func startBot(t testing.TB, cfg config.IRC, tune func(*Client)) *harness {
	t.Helper()
	b, m, rdb := newTestBot(t)
	c := New(cfg, b, testLogger(t))
	fast(c)
	if tune != nil {
		tune(c)
	}
	return runHarness(t, c, b, m, rdb)
}

// runHarness runs c, the client of bot b on miniredis m (rdb), until t
// ends (or h.stop), with its connection state changes in h.events and
// h.ctx the context it runs in.
func runHarness(t testing.TB, c *Client, b *bot.Bot, m *miniredis.Miniredis, rdb *redis.Client) *harness {
	h := &harness{t: t, client: c, bot: b, mini: m, rdb: rdb, done: make(chan error, 1), events: make(chan bool, 100)}
	c.stateHook = func(up bool) {
		select {
		case h.events <- up:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx, h.cancel = ctx, cancel
	go func() { h.done <- c.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// botAmong starts a real ngircd with opts, then botAmongOn.
func botAmong(t *testing.T, opts irctest.NgircdOptions, channel string, tune func(*config.IRC), nicks ...string) (*irctest.Ngircd, *harness, []*irctest.User) {
	t.Helper()
	n := irctest.StartNgircd(t, opts)
	h, users := botAmongOn(t, n, channel, tune, nicks...)
	return n, h, users
}

// botAmongOn connects a user for each nick to n (all at once) and joins
// them to channel in turn (the first in is its op), then starts the bot in
// channel on testIRCConfig, changed by tune unless nil, and waits until
// the last user sees the bot there.
func botAmongOn(t *testing.T, n irctest.Server, channel string, tune func(*config.IRC), nicks ...string) (*harness, []*irctest.User) {
	t.Helper()
	users := irctest.DialAll(t, n.Addr(), nicks...)
	for _, u := range users {
		u.Join(channel)
	}
	cfg := testIRCConfig(n.URL(), channel)
	if tune != nil {
		tune(&cfg)
	}
	h := startBot(t, cfg, nil)
	users[len(users)-1].WaitBotIn("ArchiveBot", channel)
	return h, users
}

// crowd connects count users to n, named by nameFormat and their index,
// and joins them all to channel: a crowd to fire commands at the bot.
func crowd(t *testing.T, n irctest.Server, channel, nameFormat string, count int) []*irctest.User {
	t.Helper()
	us := make([]*irctest.User, count)
	for i := range us {
		us[i] = irctest.Connect(t, n.Addr(), fmt.Sprintf(nameFormat, i))
	}
	for _, u := range us {
		u.Registered()
		u.Send("JOIN %s", channel)
	}
	for _, u := range us {
		u.Expect("end of NAMES for "+channel, func(m ircmsg.Message) bool {
			return m.Command == "366" && len(m.Params) > 1 && strings.EqualFold(m.Params[1], channel)
		})
	}
	return us
}

// stop ends Run and checks it returns nil promptly.
func (h *harness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run returned %v", err)
		}
	case <-time.After(irctest.WaitFor):
		h.t.Errorf("Run did not return after its context ended")
	}
}

// waitConnected waits for the next connection state change to up.
func (h *harness) waitState(up bool) {
	h.t.Helper()
	timer := time.NewTimer(irctest.WaitFor)
	defer timer.Stop()
	for {
		select {
		case s := <-h.events:
			if s == up {
				return
			}
		case <-timer.C:
			h.t.Fatalf("bot did not become connected=%v", up)
		}
	}
}

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

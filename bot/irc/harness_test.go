package irc

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/store"
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
	b := bot.New(store.NewStore(rdb), bot.Options{Logger: testLogger(t)})
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
	h := &harness{t: t, client: c, bot: b, mini: m, rdb: rdb, done: make(chan error, 1), events: make(chan bool, 100)}
	c.stateHook = func(up bool) {
		select {
		case h.events <- up:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- c.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
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

package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// A node whose clock keeps it from leading (ha.max_clock_skew) does not
// say it has IRC, though it is connected: a leader that lost IRC would
// otherwise hand the lease over to it, the node would not take it, and
// the leader, without IRC while another node "has" it, would not
// campaign either: no leader at all, every service stopped, until the
// leader's IRC came back.
func TestIRCReadyNotWhileTheClockKeepsFromLeading(t *testing.T) {
	b := redistest.Mini(t)
	b.Mini.SetTime(time.Now().Add(time.Hour)) // Redis's TIME an hour off
	st := store.New(b.Client)
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	lease := coordinator.NewLease(st, "skewed", 2*time.Second, logger)
	lease.MaxClockSkew = time.Second
	leaseDone := make(chan struct{})
	go func() {
		defer close(leaseDone)
		lease.Run(ctx, func(ctx context.Context) { t.Error("a node with a skewed clock led") })
	}()
	testproc.Eventually(t, "the lease to find the clock off", func() bool { return lease.ClockProblem() != "" })

	c := botirc.New(config.IRC{Server: irc.URL(), Nick: "ArchiveBot", Channels: []string{"#clk"}},
		bot.New(st, bot.Options{Logger: logger}), logger)
	ircDone := make(chan struct{})
	go func() { defer close(ircDone); c.Run(ctx) }()
	if !c.WaitConnected(ctx) {
		t.Fatal("never connected")
	}
	// It said so before its clock was found off.
	if err := st.SetIRCReady(ctx, "skewed", true, time.Minute); err != nil {
		t.Fatal(err)
	}
	repDone := make(chan struct{})
	go func() {
		defer close(repDone)
		reportIRCReady(ctx, st, c, "skewed", 2*time.Second, logger, func() bool { return lease.ClockProblem() == "" })
	}()
	testproc.Eventually(t, "the node to withdraw its IRC readiness", func() bool {
		ready, err := st.IRCReadyNodes(ctx, "other")
		return err == nil && len(ready) == 0
	})
	cancel()
	<-repDone
	<-ircDone
	<-leaseDone
}

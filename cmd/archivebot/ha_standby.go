package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	botirc "github.com/archiveteam/archivebot-go/bot/irc"
	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator"
	irun "github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/web"
)

// leadHot is serveHA's campaign with ha.irc_standby (doc/reliability.md,
// A hot standby on IRC): one IRC client for the node's whole life,
// silent while it does not lead; each term starts the services, tells the
// client it leads (it runs the commands held meanwhile) and, while IRC is
// down longer than ha.irc_handover_after and another node has IRC, hands
// the lease over. It returns the first fatal error.
func leadHot(ctx context.Context, cancel context.CancelFunc, cfg *config.Config, logger *slog.Logger, st *store.Store,
	lease *coordinator.Lease, b *bot.Bot, fe *haFrontEnd, hub *web.Hub, papi *pipelineapi.Server, signIn *webSignIn) error {
	node := cfg.HA.NodeID
	c := botirc.New(cfg.IRC, b, logger.With("service", "irc", "node", node))
	c.Gate = lease.Valid
	nick := cfg.IRC.StandbyNick
	if nick == "" {
		nick = standbyNick(cfg.IRC.Nick, node)
	}
	c.Standby = &botirc.Standby{Nick: nick, Window: cfg.HA.IRCReplayWindow.Duration, Ledger: st}
	c.OnPresenceEnd(signIn.presenceEnded)
	fe.set(c)
	defer fe.set(nil)

	var mu sync.Mutex
	var fatal error
	fail := func(err error) {
		mu.Lock()
		if fatal == nil {
			fatal = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	irun.Go(&wg, logger, "irc", func() {
		if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			fail(err)
		}
	})
	ttl := cfg.HA.LeaseTTL.Duration
	irun.Go(&wg, logger, "irc readiness", func() {
		reportIRCReady(ctx, st, c, node, ttl, logger, func() bool { return lease.ClockProblem() == "" })
	})
	othersReady := func(ctx context.Context) []string {
		rctx, rcancel := context.WithTimeout(ctx, ttl/10+time.Second)
		defer rcancel()
		others, err := st.IRCReadyNodes(rctx, node)
		if err != nil {
			return nil
		}
		return others
	}
	// A node without IRC does not take the lease from one that has it.
	lease.MayLead = func() bool { return c.Connected() || len(othersReady(ctx)) == 0 }

	lease.Run(ctx, func(leadCtx context.Context) {
		c.Lead(leadCtx)
		services, err := startServices(leadCtx, cfg, st, c, hub, papi, logger)
		if err != nil {
			fail(err)
			return
		}
		handOver(leadCtx, c, cfg.HA.IRCHandoverAfter.Duration, othersReady, logger)
		c.Follow()
		services.Stop()
	})
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return fatal
}

// standbyNick derives a hot standby's nick (irc.standby_nick left out)
// from the main nick and the node id: NICK-sbXYZ, XYZ from the node id's
// hash, so that two standbys do not collide.
func standbyNick(nick, node string) string {
	h := fnv.New32a()
	h.Write([]byte(node))
	return fmt.Sprintf("%s-sb%03x", nick, h.Sum32()&0xfff)
}

// handOver returns when leadCtx ends, or when the client has been
// disconnected for after while another node reports IRC: the caller then
// ends the term and the lease is released for that node (Lease.Run
// releases it when lead returns). Without a ready node the leader keeps
// the lease and reconnecting. Checked every quarter of after (at most
// every second), so the lease moves within after plus that, plus the
// standby's poll (a tenth of ha.lease_ttl).
func handOver(leadCtx context.Context, c *botirc.Client, after time.Duration, othersReady func(context.Context) []string, log *slog.Logger) {
	every := min(max(after/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var downSince time.Time
	for {
		select {
		case <-leadCtx.Done():
			return
		case <-t.C:
		}
		if c.Connected() {
			downSince = time.Time{}
			continue
		}
		if downSince.IsZero() {
			downSince = time.Now()
		}
		if time.Since(downSince) < after {
			continue
		}
		if others := othersReady(leadCtx); len(others) > 0 {
			log.Warn("no IRC connection for ha.irc_handover_after while another node has one: handing the leader lease over",
				"down_for", time.Since(downSince).Round(time.Millisecond), "ready", others)
			return
		}
	}
}

// reportIRCReady says in Redis, every third of the lease's lifetime,
// whether this node's IRC connection is registered and the node may lead
// (mayLead: its clock does not keep it from leading; a leader that lost
// IRC hands the lease only to a node that says so, so one that would not
// take it must not), and withdraws it at once when it drops and at
// shutdown.
func reportIRCReady(ctx context.Context, st *store.Store, c *botirc.Client, node string, ttl time.Duration, log *slog.Logger, mayLead func() bool) {
	say := func(up bool) {
		wctx, wcancel := context.WithTimeout(context.Background(), ttl/3)
		defer wcancel()
		if err := st.SetIRCReady(wctx, node, up, ttl); err != nil && ctx.Err() == nil {
			log.Warn("cannot report IRC readiness", "err", err)
		}
	}
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		up := c.Connected()
		say(up && mayLead())
		wait := t.C
		var change <-chan struct{}
		if !up {
			// Report at once when the connection comes up.
			wctx, wcancel := context.WithCancel(ctx)
			ch := make(chan struct{})
			go func() { c.WaitConnected(wctx); close(ch) }()
			change = ch
			select {
			case <-ctx.Done():
				wcancel()
				say(false)
				return
			case <-wait:
			case <-change:
			}
			wcancel()
			continue
		}
		select {
		case <-ctx.Done():
			say(false)
			return
		case <-wait:
		}
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// feedNetworks lists the configured networks of the feed with their
// budgets, in the order the node posts on them.
func feedNetworks(c *config.Config) []feedNetView {
	tw := c.Tweeter
	var out []feedNetView
	if tw.ConsumerKey != "" {
		out = append(out, feedNetView{Network: tweeter.NetX, Budget: tw.Budget, Window: tw.BudgetWindow.Duration.String()})
	}
	if tw.Mastodon.On() {
		out = append(out, feedNetView{Network: tweeter.NetMastodon, Budget: tw.Mastodon.Budget, Window: tw.Mastodon.BudgetWindow.Duration.String()})
	}
	if tw.Bluesky.On() {
		out = append(out, feedNetView{Network: tweeter.NetBluesky, Budget: tw.Bluesky.Budget, Window: tw.Bluesky.BudgetWindow.Duration.String()})
	}
	if len(out) == 0 {
		// The dry run keeps X's budget (tweeter.budget), as the node does.
		out = append(out, feedNetView{Network: tweeter.NetDryRun, Budget: tw.Budget, Window: tw.BudgetWindow.Duration.String()})
	}
	return out
}

type feedNetView struct {
	Network string `json:"network"`
	Budget  int    `json:"budget"`
	Window  string `json:"budget_window"`
	Pending int64  `json:"pending"`
	State   any    `json:"state"`
}

// runFeed is `archivebot feed`: each configured network's state in Redis.
func runFeed(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runNoArgs("feed", args, stdout, stderr, func(ctx context.Context, a *adminCmd) int {
		nets := feedNetworks(a.cfg)
		tw := a.table()
		if !a.json {
			fmt.Fprintln(tw, "NETWORK\tPENDING\tIN FLIGHT\tBUDGET USED\tDIGESTS\tGAVE UP\tSUMMARY\tLAST GIVE-UP")
		}
		for i, n := range nets {
			window := time.Hour
			if d, err := time.ParseDuration(n.Window); err == nil && d > 0 {
				window = d
			}
			st, err := a.store.FeedStatus(ctx, n.Network, window)
			if err != nil {
				return a.refusal("", err)
			}
			nets[i].Pending = max(0, st.Queued-st.Handled)
			nets[i].State = st
			if a.json {
				continue
			}
			budget := "none"
			if n.Budget > 0 {
				budget = fmt.Sprintf("%d/%d per %s", st.Used, n.Budget, n.Window)
			}
			last := ""
			if st.LastGaveUp != nil {
				last = st.LastGaveUp.Reason
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\n", n.Network, nets[i].Pending, st.InFlight, budget, st.Digests, st.GaveUp, st.SummaryDay, last)
		}
		if a.json {
			return a.writeJSON(nets)
		}
		tw.Flush()
		return 0
	})
}

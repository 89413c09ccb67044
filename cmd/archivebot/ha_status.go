package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// leaderView is `archivebot status -json`.
type leaderView struct {
	// Leader is false when no node holds the lease (a standby takes it
	// within a tenth of its lease time). A single node (SingleNode,
	// without ha.enabled) leads alone: true, as /metrics says.
	Leader     bool    `json:"leader"`
	Node       string  `json:"node,omitempty"`
	Token      int64   `json:"token,omitempty"`
	HeldFor    float64 `json:"held_for_seconds,omitempty"`
	ExpiresIn  float64 `json:"expires_in_seconds,omitempty"`
	SingleNode bool    `json:"single_node,omitempty"`
}

// runStatus is `archivebot status`: who holds the leader lease
// (archivebot:leader), since when, and when it expires. Exit status 3
// when no node leads.
func runStatus(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return runNoArgs("status", args, stdout, stderr, func(ctx context.Context, a *adminCmd) int {
		if !a.cfg.HA.Enabled {
			// Without ha.enabled the node leads alone and takes no lease.
			v := leaderView{Leader: true, SingleNode: true}
			if a.json {
				return a.writeJSON(v)
			}
			fmt.Fprintln(stdout, "single node (ha.enabled is off): it leads alone, no leader lease")
			return 0
		}
		h, ok, err := a.store.Leader(ctx)
		if err != nil {
			a.failf("%v", err)
			return 1
		}
		v := leaderView{Leader: ok}
		if ok {
			v.Node, v.Token = h.Node, h.Token
			v.HeldFor = time.Since(h.Acquired).Round(time.Millisecond).Seconds()
			v.ExpiresIn = h.TTL.Round(time.Millisecond).Seconds()
		}
		if a.json {
			if code := a.writeJSON(v); code != 0 || ok {
				return code
			}
			return 3
		}
		if !ok {
			fmt.Fprintln(stdout, "leader: none (no node holds archivebot:leader; a standby takes it within a tenth of its lease time)")
			return 3
		}
		fmt.Fprintf(stdout, "leader: %s (fencing token %d), lease held for %s, expires in %s unless renewed\n",
			h.Node, h.Token, time.Since(h.Acquired).Round(time.Millisecond), h.TTL.Round(time.Millisecond))
		return 0
	})
}

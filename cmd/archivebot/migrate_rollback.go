package main

// The clean-ups of going back to upstream's bot (doc/migrating.md,
// Rolling back), as commands of the node rather than redis-cli loops:
// they read the same configuration (redis.url, sentinels, a password
// that redis-cli would warn about on every call), run on every Redis the
// node runs on (6.0.6: no LMOVE), refuse while a node still runs, and
// say what they did.
//
//   archivebot migrate return-notices     finish notices a stopped node
//                                         had taken, back where upstream's
//                                         bot pops them (one script)
//   archivebot migrate delete-node-keys   every archivebot:… key; lists
//                                         them without -yes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// runningNode reports whether a node of this project runs on the Redis
// (a connection named as its are, or the leader lease held), and why.
// When Redis refuses CLIENT LIST (an ACL, or a server without it) only
// the lease is checked, and the command says so on standard error.
func runningNode(ctx context.Context, a *adminCmd) (bool, string, error) {
	clients, err := a.store.Clients(ctx)
	if errors.Is(err, store.ErrClientsRefused) {
		fmt.Fprintf(a.stderr, "archivebot %s: warning: CLIENT LIST was refused (%v): only the leader lease shows whether a node still runs; make sure it is stopped\n", a.name, err)
	} else if err != nil {
		return false, "", err
	}
	leader := ""
	if h, ok, err := a.store.Leader(ctx); err != nil {
		return false, "", err
	} else if ok {
		leader = orDash(h.Node, "?")
	}
	runs, why := nodeRunning(&store.Survey{Clients: clients, Leader: leader})
	return runs, why, nil
}

// returnNotices is `archivebot migrate return-notices`.
func returnNotices(ctx context.Context, a *adminCmd) int {
	runs, why, err := runningNode(ctx, a)
	if err != nil {
		return a.refusal("", err)
	}
	if runs {
		a.failf("a node of this project still runs on this Redis (%s): the notices it took are its to say; stop it first (SIGTERM), then run this again; nothing was moved", why)
		return 1
	}
	n, err := a.store.ReturnFinishNotices(ctx)
	if err != nil {
		return a.refusal("", err)
	}
	if a.json {
		return a.writeJSON(struct {
			Moved int `json:"moved"`
		}{n})
	}
	if n == 0 {
		fmt.Fprintf(a.stdout, "No finish notice to move back: %s is empty.\n", store.KeyFinishProcessing)
		return 0
	}
	fmt.Fprintf(a.stdout, "Moved %d finish notices from %s back to the head of %s, oldest first: upstream's bot says them when it runs.\n",
		n, store.KeyFinishProcessing, store.KeyFinishNotifications)
	return 0
}

// deleteNodeKeys is `archivebot migrate delete-node-keys [-yes]`.
func deleteNodeKeys(ctx context.Context, a *adminCmd, yes bool) int {
	// What would be lost (paused jobs, notices taken) or still in use (a
	// running node, jobs on the pipeline API) is what the rollback check
	// blocks on: refused while any of it is there.
	sv, err := a.store.Survey(ctx, nil)
	if err != nil {
		return a.refusal("", err)
	}
	if sv.ClientsError != "" {
		fmt.Fprintf(a.stderr, "archivebot %s: warning: CLIENT LIST was refused (%s): only the leader lease shows whether a node still runs; make sure it is stopped\n", a.name, sv.ClientsError)
	}
	if r := judge(sv, a.cfg, true, time.Now()); r.Blocked {
		var what []string
		for _, b := range r.Blocks {
			what = append(what, b.What+" ("+b.Do+")")
		}
		a.failf("going back is not ready, and deleting would lose what waits there: %s; %s lists it; nothing was deleted", strings.Join(what, "; "), typed(a.cfg, "migrate check -rollback"))
		return 1
	}
	kinds, err := a.store.NodeKeys(ctx)
	if err != nil {
		return a.refusal("", err)
	}
	total := 0
	var list []string
	for k, n := range kinds {
		total += n
		list = append(list, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(list)
	if !yes {
		if a.json {
			return a.writeJSON(struct {
				Keys    map[string]int `json:"keys"`
				Deleted int            `json:"deleted"`
			}{kinds, 0})
		}
		if total == 0 {
			fmt.Fprintln(a.stdout, "No key of the node (archivebot:…) is on this Redis: nothing to delete.")
			return 0
		}
		fmt.Fprintf(a.stdout, "%d keys of the node (archivebot:…) are on this Redis: %s.\n", total, strings.Join(list, ", "))
		fmt.Fprintln(a.stdout, "Nothing was deleted. Run again with -yes to delete them: the job histories, failure records and start baseline go with them (a later switch starts from nothing).")
		return 0
	}
	n, err := a.store.DeleteNodeKeys(ctx)
	if err != nil {
		a.failf("%v; %d keys of the node were deleted before it; run it again to go on", err, n)
		return 1
	}
	if a.json {
		return a.writeJSON(struct {
			Keys    map[string]int `json:"keys"`
			Deleted int            `json:"deleted"`
		}{kinds, n})
	}
	fmt.Fprintf(a.stdout, "Deleted %d keys of the node (archivebot:…); no other key was touched.\n", n)
	return 0
}

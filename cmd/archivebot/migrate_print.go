package main

// The text form of `archivebot migrate check`.

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func printMigrate(w io.Writer, r *migrateReport) {
	f := r.Found
	red := r.Redis
	where := "Redis"
	if red.Version != "" {
		where = fmt.Sprintf("Redis %s (%s, %s)", red.Version, orDash(red.Mode, "?"), orDash(red.Role, "?"))
	}
	total := 0
	for _, n := range f.Keys {
		total += n
	}
	fmt.Fprintf(w, "%s: %d keys read in %s; nothing was written.\n\nFound\n", where, total, r.ReadIn)
	fmt.Fprintf(w, "  jobs: %d queued, %d running, %d finished, %d aborted, %d failed; %d ghost records\n",
		f.Jobs["queued"], f.Jobs["running"], f.Jobs["finished"], f.Jobs["aborted"], f.Jobs["failed"], f.Ghosts)
	var qs []string
	for _, q := range f.Queues {
		qs = append(qs, fmt.Sprintf("%s %d", tc(q.Name), q.Length))
	}
	fmt.Fprintf(w, "  queues: %s; working %d\n", orDash(strings.Join(qs, ", "), "none"), f.Working)
	fmt.Fprintf(w, "  counters: jobs_completed %s, jobs_aborted %s, jobs_failed %s\n",
		orDash(tc(f.Counters["jobs_completed"]), "-"), orDash(tc(f.Counters["jobs_aborted"]), "-"), orDash(tc(f.Counters["jobs_failed"]), "-"))
	fmt.Fprintf(w, "  finish notices waiting: %d; tweets: %d queued, %d done; running jobs without one: %d\n", f.Notices, f.Tweets["tweets:queue"], f.Tweets["tweets:done"], f.FeedNew)
	var kinds []string
	for k, n := range f.Keys {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "  keys by kind: %s\n", strings.Join(kinds, ", "))
	clients := "clients: CLIENT LIST refused"
	if f.Clients != nil {
		clients = fmt.Sprintf("clients: %d of upstream's or others, %d of a node of this project (named archivebot), %d of this check and other archivebot commands (archivebot-cli)",
			*f.Clients-f.NodeClients-f.OwnClients, f.NodeClients, f.OwnClients)
	}
	fmt.Fprintf(w, "  subscribers: updates %d, archivebot:pipeline_updates %d\n  %s\n",
		f.Subscribers["updates"], f.Subscribers["archivebot:pipeline_updates"], clients)
	if len(f.Pipelines) == 0 {
		fmt.Fprintln(w, "  pipelines: none")
	} else {
		fmt.Fprintln(w, "  pipelines:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, p := range f.Pipelines {
			last := "-"
			if p.Reported != nil {
				last = time.Duration(*p.Reported*float64(time.Second)).Round(time.Second).String() + " ago"
			}
			nick := tc(p.Nickname)
			if p.APIKey != "" {
				nick += " (API key " + tc(p.APIKey) + ")"
			}
			fmt.Fprintf(tw, "    %s\t%s\tversion %s\treported %s\t%s\tjobs: %s\n", orDash(nick, "?"), tc(p.Key),
				orDash(tc(p.Version), "?"), last, p.State, orDash(strings.Join(p.Jobs, " "), "none"))
		}
		tw.Flush()
	}
	section := func(title, none string, list []finding) {
		fmt.Fprintf(w, "\n%s\n", title)
		if len(list) == 0 {
			fmt.Fprintf(w, "  %s\n", none)
			return
		}
		for _, x := range list {
			fmt.Fprintf(w, "  - %s\n", tc(x.What))
			for _, k := range x.Keys {
				fmt.Fprintf(w, "      %s\n", tc(k))
			}
			if x.More > 0 {
				fmt.Fprintf(w, "      … and %d more (-json lists the first 10 too)\n", x.More)
			}
			if x.Do != "" {
				fmt.Fprintf(w, "    → %s\n", tc(x.Do))
			}
		}
	}
	if r.Direction == "rollback" {
		section("Blocks going back to upstream's bot", "nothing", r.Blocks)
		section("Notes", "none", r.Notes)
		if r.Blocked {
			fmt.Fprintf(w, "\n%d things block going back (exit status %d): doc/migrating.md, Rolling back.\n", len(r.Blocks), exitBlocked)
		} else {
			fmt.Fprintln(w, "\nNothing blocks going back: doc/migrating.md, Rolling back.")
		}
		return
	}
	section("Blocks the switch", "nothing", r.Blocks)
	section("The node will refuse or change at start", "nothing", r.Changes)
	section("Notes", "none", r.Notes)
	if r.Blocked {
		fmt.Fprintf(w, "\n%d things block the switch (exit status %d): fix them and run the check again.\n", len(r.Blocks), exitBlocked)
	} else {
		fmt.Fprintln(w, "\nNothing blocks the switch: doc/migrating.md, Start the node.")
	}
}

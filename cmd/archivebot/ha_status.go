package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/archiveteam/archivebot-go/config"
)

// runStatus is `archivebot status -config FILE`: who holds the leader
// lease (archivebot:leader), since when, and when it expires.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("archivebot status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (TOML) naming the shared Redis (redis.url or redis.sentinels)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot status: %v\n", err)
		return 1
	}
	store, closeFn, ok, err := dialStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot status: %v\n", err)
		return 1
	}
	if !ok {
		fmt.Fprintln(stdout, "embedded Redis: a single node, no leader lease")
		return 0
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, ok, err := store.Leader(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "archivebot status: %v\n", err)
		return 1
	}
	if !ok {
		fmt.Fprintln(stdout, "leader: none (no node holds archivebot:leader; a standby takes it within a tenth of its lease time)")
		return 3
	}
	fmt.Fprintf(stdout, "leader: %s (fencing token %d), lease held for %s, expires in %s unless renewed\n",
		h.Node, h.Token, time.Since(h.Acquired).Round(time.Millisecond), h.TTL.Round(time.Millisecond))
	return 0
}

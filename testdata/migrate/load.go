//go:build ignore

// Load writes a fixture (default upstream.redis.jsonl, beside this file)
// into the Redis database at REDIS_URL, which it empties first (FLUSHDB),
// with its times moved to now: a scratch copy of the upstream deployment
// to try `archivebot migrate check` and a switch on (doc/migrating.md).
//
//	REDIS_URL=redis://127.0.0.1:6390/0 go run testdata/migrate/load.go [FIXTURE]
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

func main() {
	path := "testdata/migrate/upstream.redis.jsonl"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "load: REDIS_URL:", err)
		os.Exit(2)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	fx, err := redistest.ReadFixture(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	by, err := fx.Load(ctx, c, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	fmt.Printf("loaded %d keys from %s into %s, times moved by %v\n", len(fx.Keys), path, os.Getenv("REDIS_URL"), by.Round(1e9))
}

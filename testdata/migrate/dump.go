//go:build ignore

// Dump writes the Redis database at REDIS_URL as a fixture
// (internal/redistest, Fixtures) on standard output, after a comment line
// for each argument. produce.sh runs it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

func main() {
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dump: REDIS_URL:", err)
		os.Exit(2)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := redistest.WriteFixture(context.Background(), c, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dump:", err)
		os.Exit(1)
	}
}

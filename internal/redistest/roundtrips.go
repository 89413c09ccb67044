package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips counts the round trips a client makes to Redis: one per
// command sent alone, one per pipeline (or MULTI/EXEC) however many
// commands it holds. Benchmarks report it per operation.
type RoundTrips struct{ n atomic.Int64 }

// CountRoundTrips installs a counting hook on c.
func CountRoundTrips(c *redis.Client) *RoundTrips {
	rt := &RoundTrips{}
	c.AddHook(rt)
	return rt
}

// Load returns the count so far.
func (rt *RoundTrips) Load() int64 { return rt.n.Load() }

// DialHook implements redis.Hook.
func (rt *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (rt *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		rt.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (rt *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rt.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*RoundTrips)(nil)

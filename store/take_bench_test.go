package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// BenchmarkTake measures one take's latency (p50, p99) with 10,000 queued
// jobs of 200 users, 50 keys with 20 avoid rules each and a per-user
// running limit, against the take before the take rule (a plain
// RPOPLPUSH script, testdata/legacy_take.lua). Each taken job goes back
// to the tail afterwards, outside the timing, so every take sees the same
// queue. Numbers: doc/benchmarks.md.
func BenchmarkTake(b *testing.B) {
	legacySrc, err := os.ReadFile("testdata/legacy_take.lua")
	if err != nil {
		b.Fatal(err)
	}
	legacy := fenced(string(legacySrc))
	for _, be := range redistest.All(b) {
		ctx := context.Background()
		s := New(be.Client)
		seedTakeBench(b, ctx, s, be.Client)
		s.SetTakeRules(TakeRules{PerUserRunning: 3})
		for _, mode := range []string{"legacy", "rule"} {
			b.Run(be.Name+"/"+mode, func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				for i := 0; b.Loop(); i++ {
					name := fmt.Sprintf("key-%02d", i%50)
					start := time.Now()
					var ident string
					if mode == "legacy" {
						res, err := legacy.Run(ctx, be.Client, []string{KeyWorking, KeyPipelineKeyJobs(name), KeyPipelineKeys, KeyPending},
							"1.0", APIPipelineKey(name), name, "ed25519:"+name, ChannelUpdates).Slice()
						if err != nil || len(res) < 2 {
							b.Fatalf("legacy take: %v %v", res, err)
						}
						ident, _ = res[1].(string)
					} else {
						// Each take with its own take_id, as the client
						// sends them (the script remembers each).
						j, err := s.APITakeID(ctx, name, "ed25519:"+name, fmt.Sprintf("bench-take-%08d", i), []string{KeyPending})
						if err != nil || j == nil {
							b.Fatalf("take: %v %v", j, err)
						}
						ident = j.Ident
					}
					lat = append(lat, time.Since(start))
					b.StopTimer()
					// Back to the tail; the take's working entry goes, the
					// 50 "running" jobs of the seed stay.
					be.Client.LRem(ctx, KeyWorking, 1, ident)
					be.Client.HDel(ctx, ident, "started_at", "pipeline_id")
					be.Client.SRem(ctx, KeyPipelineKeyJobs(name), ident)
					be.Client.LPush(ctx, KeyPending, ident)
					b.StartTimer()
				}
				slices.Sort(lat)
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				}
			})
		}
	}
}

func seedTakeBench(b *testing.B, ctx context.Context, s *Store, rdb redis.UniversalClient) {
	b.Helper()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range 50 {
			name := fmt.Sprintf("key-%02d", k)
			p.HSet(ctx, KeyPipelineKeys, name, "ed25519:"+name)
			for r := range 20 {
				p.SAdd(ctx, KeyPipelineKeyAvoid(name), fmt.Sprintf("avoided-%d-%d.example.com", k, r))
			}
		}
		// 10,000 queued jobs of 200 users; the head's users have jobs
		// running, so the limit skips some.
		for i := range 10000 {
			id := "bench" + strconv.Itoa(i)
			user := fmt.Sprintf("user%03d", i%200)
			p.HSet(ctx, id, "url", fmt.Sprintf("http://site%d.host%d.example.org/", i, i%500), "started_by", user)
			p.HSet(ctx, KeyOrigin(id), "queue", KeyPending, "nick", user, "op", "0")
			p.LPush(ctx, KeyPending, id)
		}
		// 50 jobs running: users 0..16 have 3 each (at the limit).
		for i := range 50 {
			id := "running" + strconv.Itoa(i)
			user := fmt.Sprintf("user%03d", i%17)
			p.HSet(ctx, id, "url", "http://running.example.net/", "started_by", user, "started_at", "1")
			p.HSet(ctx, KeyOrigin(id), "nick", user)
			p.LPush(ctx, KeyWorking, id)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

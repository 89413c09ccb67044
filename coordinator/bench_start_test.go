package coordinator

// Cost of the start scan (one round trip whatever the size of `working`)
// and of the history append in the settings script:
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:16406/0 \
//	  go test -run='^$' -bench='ScanStarts|ChangeSettings' ./coordinator/

import (
	"context"
	"fmt"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

func eachBench(b *testing.B, fn func(b *testing.B, be *redistest.Backend)) {
	b.Run("miniredis", func(b *testing.B) { fn(b, redistest.Mini(b)) })
	if be := redistest.RealRedis(b); be != nil {
		b.Run("redis", func(b *testing.B) { fn(b, be) })
	}
}

// BenchmarkScanStarts: one steady-state scan (every job already seen) of
// `working` holding n jobs.
func BenchmarkScanStarts(b *testing.B) {
	for _, n := range []int{100, 1000} {
		eachBench(b, func(b *testing.B, be *redistest.Backend) {
			b.Run(fmt.Sprint(n), func(b *testing.B) {
				ctx := context.Background()
				be.Client.FlushDB(ctx)
				s := store.NewStore(be.Client)
				for i := 0; i < n; i++ {
					id := fmt.Sprintf("job%06d", i)
					be.Client.HSet(ctx, id, "url", "http://x/"+id, "pipeline_id", "pipeline:1", "started_at", "1")
					be.Client.RPush(ctx, store.KeyWorking, id)
				}
				if sc, err := s.ScanStarts(ctx, false); err != nil || sc.Started != int64(n) {
					b.Fatalf("first scan: %d %v", sc.Started, err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.ScanStarts(ctx, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkChangeSettings: one settings change, history entry included.
func BenchmarkChangeSettings(b *testing.B) {
	eachBench(b, func(b *testing.B, be *redistest.Backend) {
		ctx := context.Background()
		be.Client.FlushDB(ctx)
		s := store.NewStore(be.Client)
		be.Client.HSet(ctx, "benchjob", "url", "http://x/", "settings_age", "4")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.ChangeSettings(ctx, "benchjob", store.Change{Bump: 1, By: "bench", Set: map[string]string{"concurrency": "3"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/redis/go-redis/v9"
)

// BenchmarkStatus measures what !status (Summary) and !pending (Queues)
// cost in a big keyspace: 300,000 unrelated keys and 5 named queues.
//
//	ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:16379/0 \
//	  go test -run='^$' -bench=Status -benchtime=20x ./coordinator/
func BenchmarkStatus(b *testing.B) {
	const keys = 300_000
	for _, be := range benchBackends(b) {
		ctx := context.Background()
		be.Client.FlushDB(ctx)
		for lo := 0; lo < keys; lo += 1000 {
			_, err := be.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
				kv := make([]any, 0, 2000)
				for i := lo; i < min(keys, lo+1000); i++ {
					kv = append(kv, fmt.Sprintf("otherkey%07d", i), "x")
				}
				p.MSet(ctx, kv...)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		seed := store.NewStore(be.Client)
		for i := range 5 {
			id := fmt.Sprintf("benchqueued%d", i)
			if err := seed.Register(ctx, store.NewJob{Ident: id, URL: "http://" + id + ".example/", FetchDepth: "inf",
				Queue: store.KeyPendingNamed(fmt.Sprintf("pipe%d", i))}); err != nil {
				b.Fatal(err)
			}
		}
		c, n := countingClient(b, be)
		s := store.NewStore(c)
		for _, op := range []struct {
			name string
			fn   func() error
		}{
			{"summary", func() error { _, err := s.Summary(ctx); return err }},
			{"queues", func() error { _, err := s.Queues(ctx, 10); return err }},
		} {
			b.Run(fmt.Sprintf("%s/keys=%d/%s", be.Name, keys, op.name), func(b *testing.B) {
				if err := op.fn(); err != nil { // warm: a first read may rebuild an index
					b.Fatal(err)
				}
				n.Store(0)
				start := time.Now()
				for b.Loop() {
					if err := op.fn(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N)/1000, "ms/op")
			})
		}
	}
}

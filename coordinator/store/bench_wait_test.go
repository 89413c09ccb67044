package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// BenchmarkRegisterWait measures what WAIT 1 (redis.wait_replicas = 1)
// adds to a command's write: Register through the Sentinel client on a
// master with two replicas on loopback, without and with WAIT.
//
//	go test ./coordinator -run '^$' -bench RegisterWait -benchtime 2000x
func BenchmarkRegisterWait(b *testing.B) {
	cl := redistest.StartCluster(b)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: cl.SentinelAddrs()})
	defer rdb.Close()
	for _, wait := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("wait_replicas=%d", wait), func(b *testing.B) {
			s := store.NewStore(rdb)
			s.WaitReplicas, s.WaitTimeout = wait, time.Second
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("benchwait%d-%d", wait, i)
				j := newJob(id)
				if err := s.Register(store.WithCommand(ctx, id, time.Minute), j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

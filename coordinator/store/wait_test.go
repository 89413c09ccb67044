package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// Issue 14: with redis.wait_replicas set, a command's write that no
// replica confirmed is not acknowledged: its outcome is unknown (the bot
// says so and follows up), and a resend under the same command id finds
// the record and waits again, changing nothing. (Neither backend here has
// a replica; the Sentinel process test covers the replicated case.)
func TestWaitReplicasNotConfirmed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := store.WithCommand(context.Background(), "w1", time.Minute)
		s := store.NewStore(b.Client)
		s.WaitReplicas, s.WaitTimeout = 1, 10*time.Millisecond
		for i := 0; i < 2; i++ {
			err := s.Register(ctx, newJob("waitjob"))
			if !store.IsOutcomeUnknown(err) || !errors.Is(err, store.ErrNotReplicated) {
				t.Fatalf("send %d: err = %v; want outcome unknown, not replicated", i+1, err)
			}
		}
		if n := b.Client.LLen(context.Background(), store.KeyPending).Val(); n != 1 {
			t.Fatalf("pending has %d entries; want the job once", n)
		}
		s.WaitReplicas = 0
		if err := s.Register(ctx, newJob("waitjob")); err != nil {
			t.Fatalf("resend without WAIT: %v; want the recorded success", err)
		}
	})
}

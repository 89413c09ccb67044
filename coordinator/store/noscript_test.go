package store

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

// TestPipelinedScriptsAfterScriptFlush: the reads and marks that send a
// pipeline of EVALSHAs load their script and run again when Redis answers
// NOSCRIPT (a restarted Redis, SCRIPT FLUSH), rather than failing.
func TestPipelinedScriptsAfterScriptFlush(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := NewStore(b.Client)
		b.Client.HSet(ctx, "nsjob", "url", "http://example.com/")
		b.Client.RPush(ctx, KeyWorking, "nsjob")
		b.Client.ZAdd(ctx, KeyLog("nsjob"), redis.Z{Score: 1, Member: `{"type":"download","url":"http://example.com/1"}`})

		b.Client.ScriptFlush(ctx)
		logs, err := s.RecentLogs(ctx, 10)
		if err != nil || len(logs) != 1 || len(logs[0].Entries) != 1 {
			t.Fatalf("RecentLogs after SCRIPT FLUSH: %+v, %v", logs, err)
		}
		b.Client.ScriptFlush(ctx)
		out, _, err := s.ReadUnbroadcastMany(ctx, []string{"nsjob"}, 10)
		if err != nil || len(out) != 1 || len(out[0].Entries) != 1 {
			t.Fatalf("ReadUnbroadcastMany after SCRIPT FLUSH: %+v, %v", out, err)
		}
		b.Client.ScriptFlush(ctx)
		moved, err := s.MarkBroadcastMany(ctx, []BroadcastMark{{Ident: "nsjob", From: "", To: 1, Now: 1}})
		if err != nil || len(moved) != 1 || !moved[0] {
			t.Fatalf("MarkBroadcastMany after SCRIPT FLUSH: %v, %v", moved, err)
		}
	})
}

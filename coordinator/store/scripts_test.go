package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// TestAnalyzeCommitCAS: a batch read before another analyzer moved the
// bookmark is not committed, so it cannot be counted twice.
func TestAnalyzeCommitCAS(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		for i := 1; i <= 10; i++ {
			b.Client.ZAdd(ctx, KeyLog("casjob"), redis.Z{Score: float64(i), Member: fmt.Sprintf(`{"type":"download","url":"http://example.com/%d","response_code":200,"ts":1}`, i)})
		}
		b.Client.HSet(ctx, "casjob", "last_analyzed_log_entry", "4", "r2xx", "4")
		before := b.Dump(t)
		keys := []string{"casjob", "casjob_log"}
		for _, stale := range []string{"", "3", "4.0"} {
			res, err := analyzeCommitScript.Run(ctx, b.Client, keys, stale, "10", 0, 6, 0, 0, 0, 0, 0, 1000, "0", 0).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int64{0, 0, 0, 0}, res); diff != "" {
				t.Errorf("commit from bookmark %q (-want +got):\n%s", stale, diff)
			}
		}
		if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
			t.Errorf("stale commits changed Redis (-before +after):\n%s", diff)
		}
		res, err := analyzeCommitScript.Run(ctx, b.Client, keys, "4", "10", 0, 6, 0, 0, 0, 0, 0, 1000, "0").Int64Slice()
		if err != nil || res[0] != 1 {
			t.Fatalf("commit from the current bookmark: %v %v", res, err)
		}
		got, _ := b.Client.HMGet(ctx, "casjob", "last_analyzed_log_entry", "r2xx", "r1xx").Result()
		if diff := cmp.Diff([]any{"10", "10", "0"}, got); diff != "" {
			t.Errorf("after the commit (-want +got):\n%s", diff)
		}
	})
}

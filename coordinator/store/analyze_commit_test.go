package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

func dump(t *testing.T, b *redistest.Backend) map[string]redistest.Entry {
	t.Helper()
	d, err := redistest.Dump(context.Background(), b.Client)
	if err != nil {
		t.Fatal(err)
	}
	return d
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
		before := dump(t, b)
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
		if diff := cmp.Diff(before, dump(t, b)); diff != "" {
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

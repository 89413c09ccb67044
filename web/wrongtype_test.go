package web

import (
	"context"
	"net/http"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// TestWrongTypedSharedKeys: a shared key that
// another program wrote with another type (a string or a hash where a
// list, set or sorted set belongs; a hash where a counter belongs) reads
// as empty: every endpoint still answers 200, /metrics still says
// archivebot_redis_up 1, and the skip is counted by key.
func TestWrongTypedSharedKeys(t *testing.T) {
	ctx := context.Background()
	for _, key := range []string{store.KeyPipelines, store.KeyWorking, store.KeyPending, store.KeyQueues,
		store.KeyTweetsDone, store.KeyFinishedIndex, store.KeyJobsCompleted} {
		for _, kind := range []string{"string", "hash"} {
			if key == store.KeyJobsCompleted && kind == "string" {
				continue // a string is its type
			}
			t.Run(key+"/"+kind, func(t *testing.T) {
				b := redistest.Mini(t)
				f := newFixture(t, b)
				h := f.srv.Handler()
				before := value(scrape(t, h), "archivebot_wrong_type_keys_skipped_total", "key", key)
				b.Client.Del(ctx, key)
				if kind == "string" {
					b.Client.Set(ctx, key, "junk", 0)
				} else {
					b.Client.HSet(ctx, key, "junk", "x")
				}
				for _, p := range []string{"/status", "/pending", "/pipelines", "/logs/recent", "/finished", "/feed",
					"/jobs", "/jobs/" + f.run1, "/readyz"} {
					if r := get(t, h, p, ""); r.StatusCode != http.StatusOK {
						t.Errorf("%s: %d %.200s", p, r.StatusCode, body(t, r))
					}
				}
				fams := scrape(t, h)
				if v := value(fams, "archivebot_redis_up"); v != 1 {
					t.Errorf("archivebot_redis_up %v with Redis up", v)
				}
				if v := value(fams, "archivebot_wrong_type_keys_skipped_total", "key", key); v <= max(before, 0) {
					t.Errorf("skips of %s not counted: %v (before %v)", key, v, before)
				}
				// The rest still reads: the queue that is not the bad key.
				var st map[string]any
				decode(t, get(t, h, "/status", ""), &st)
				if key != store.KeyPending && key != store.KeyQueues && st["pending-ao"] != float64(1) {
					t.Errorf("/status: %v", st)
				}
			})
		}
	}
}

package tweeter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// A string key listed in `working` must not make every sweep fail: it is
// skipped, logged once, and the other jobs are still tweeted.
func TestBadKey_StringJobInWorking(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		r := newRig(t, b, tweeter.Config{})
		r.job(t, "jobrun", "url", "https://run.example/", "started_at", "1")
		r.c.Set(ctx, "strjob", "x", 0)
		r.c.LPush(ctx, store.KeyWorking, "strjob", "jobrun")
		for i := 0; i < 3; i++ {
			if err := r.tw.Sweep(ctx); err != nil {
				t.Errorf("sweep %d: %v", i+1, err)
			}
		}
		if diff := cmp.Diff([]string{"Archiving https://run.example/"}, r.members(t, store.KeyTweetsQueue)); diff != "" {
			t.Errorf("tweets:queue (-want +got):\n%s", diff)
		}
		n := 0
		for _, l := range strings.Split(r.log.String(), "\n") {
			if strings.Contains(l, "strjob") && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("strjob logged %d times, want once", n)
		}
	})
}

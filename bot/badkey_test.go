package bot

import (
	"context"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

// A key that is not a job record (a queue, a counter, some other program's
// key) is "not a job", never "something went wrong", and is left as it is.
func TestBadKey_StatusAbortNotAJob(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		be.Client.LPush(ctx, "pending", "somejob")
		be.Client.Set(ctx, "jobs", "x", 0)
		b := newTestBot(t, be)
		for _, text := range []string{"!status pending", "!abort pending", "!status jobs", "!abort jobs", "!ig jobs foo", "!fail pending"} {
			got := say(b, RankOp, "#archivebot", text)
			if len(got) != 1 || !strings.Contains(got[0], "not a job") {
				t.Errorf("%q: replies %q, want one saying it is not a job", text, got)
			}
		}
		if n, _ := be.Client.LLen(ctx, "pending").Result(); n != 1 {
			t.Errorf("pending holds %d entries, want 1", n)
		}
		if v, _ := be.Client.Get(ctx, "jobs").Result(); v != "x" {
			t.Errorf("jobs = %q, want x", v)
		}
	})
}

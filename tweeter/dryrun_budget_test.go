package tweeter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// The dry run (no network configured) honours tweeter.budget, so an
// operator can preview the digests it makes (before: it ignored the
// budget and logged every text on its own).
func TestDryRunHonoursBudget(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		clock := newClock(time.Unix(1_700_000_000, 0))
		r := newRig(t, b, tweeter.Config{XBudget: 3, XWindow: time.Hour, Now: clock.Now})
		r.storeNow = clock.Now
		if !r.tw.DryRun() {
			t.Fatal("not a dry run")
		}
		if st := r.tw.Status(); len(st) != 1 || st[0].Budget != 3 {
			t.Fatalf("status %+v, want the dry run with a budget of 3", st)
		}
		r.queueURL(t, "https://a.example/", "https://b.example/", "https://c.example/", "https://d.example/")
		if out := r.runOnce(t); out != tweeter.Posted {
			t.Fatalf("first run: %v", out)
		}
		if !strings.Contains(r.log.String(), "4 more sites queued for archiving: ") {
			t.Fatalf("the dry run did not log a digest of the 4 texts that outrun its budget of 3:\n%s", r.log.String())
		}
	})
}

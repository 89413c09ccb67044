package bot

import (
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

// The replies a newcomer tripped over (issue "first hour"): each fails on
// the code before the fix.

// One history entry is "the last step", not "the last 1 steps".
func TestHistoryOneStep(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		say(b, RankOp, "#a", "!a http://example.com/")
		got := say(b, RankNone, "#a", "!history "+refIdent)
		if len(got) < 1 || !strings.Contains(got[0], "the last step (") || strings.Contains(got[0], "1 steps") {
			t.Fatalf("!history with one entry: %q", got)
		}
	})
}

// Right after !fail (while the job record still exists) !status says who
// failed the job and when, as it does once only the failure record is left.
func TestStatusRightAfterFail(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		say(b, RankOp, "#a", "!a http://example.com/ --explain=why")
		say(b, RankOp, "#a", "!fail "+refIdent)
		for _, arg := range []string{refIdent, "http://example.com/"} {
			got := say(b, RankNone, "#a", "!status "+arg)
			if len(got) != 1 || !strings.Contains(got[0], "failed by carol") || !strings.Contains(got[0], ", at 20") ||
				!strings.Contains(got[0], "Note: why") {
				t.Fatalf("!status %s right after !fail: %q", arg, got)
			}
		}
	})
}

// --large with --pipeline is refused, and the reply says the job was not
// queued.
func TestLargeWithPipelineSaysNotQueued(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		got := say(b, RankOp, "#a", "!a http://example.com/ --large --pipeline=x")
		if len(got) != 1 || !strings.Contains(got[0], "not queued") {
			t.Fatalf("reply %q does not say whether the job was queued", got)
		}
		if n := keyCount(t, be); n != 0 {
			t.Fatalf("wrote %d keys", n)
		}
	})
}

// An invalid pattern's error quotes what the user typed, not the pattern
// rewritten for regexp2.
func TestInvalidPatternQuotesUsersPattern(t *testing.T) {
	const p = `(?P<n>a)(?P=n)[z-a]`
	err := ValidatePattern(p)
	if err == nil {
		t.Fatal("accepted")
	}
	if !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), `\k<n>`) {
		t.Fatalf("error %q does not quote %q", err, p)
	}
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		say(b, RankOp, "#a", "!a http://example.com/")
		got := say(b, RankOp, "#a", "!ig "+refIdent+" "+p)
		if len(got) != 1 || strings.Contains(got[0], `\k<n>`) || strings.Count(got[0], p) != 2 {
			t.Fatalf("reply %q", got)
		}
	})
}

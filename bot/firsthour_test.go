package bot

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
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

// Every accepted command that changes state writes one INFO line
// msg=command with who, where, the command, the ident and the outcome;
// refused and read-only commands write none, and a URL's password does not
// reach the log.
func TestAuditLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		var buf bytes.Buffer
		b := New(store.NewStore(be.Client), Options{Catalog: referenceCatalog(t),
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		say(b, RankOp, "#a", "!a http://example.com/")
		say(b, RankVoice, "#a", "!fail "+refIdent)  // refused: rank
		say(b, RankOp, "", "!abort "+refIdent)      // refused: private
		say(b, RankOp, "#a", "!status "+refIdent)   // reads only
		say(b, RankOp, "#a", "!d "+refIdent+" 1")   // usage
		say(b, RankOp, "#a", "!ig "+refIdent+" ^x") // accepted
		say(b, RankOp, "#a", "!a http://bob:hunter2@example.org/")
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			if m["msg"] == "command" {
				lines = append(lines, m)
			}
		}
		if len(lines) != 3 {
			t.Fatalf("%d audit lines, want 3:\n%s", len(lines), buf.String())
		}
		want := []map[string]string{
			{"nick": "carol", "where": "#a", "command": "!archive", "ident": refIdent, "outcome": "ok"},
			{"nick": "carol", "where": "#a", "command": "!ignore", "ident": refIdent, "outcome": "ok"},
			{"nick": "carol", "where": "#a", "command": "!archive", "outcome": "ok"},
		}
		for i, w := range want {
			if lines[i]["level"] != "INFO" {
				t.Errorf("line %d level %v", i, lines[i]["level"])
			}
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("line %d: %s = %v, want %q", i, k, lines[i][k], v)
				}
			}
			if r, _ := lines[i]["reply"].(string); r == "" {
				t.Errorf("line %d has no reply", i)
			}
		}
		if lines[2]["ident"] == "" {
			t.Error("!a line has no ident")
		}
		if strings.Contains(buf.String(), "hunter2") {
			t.Errorf("password logged:\n%s", buf.String())
		}
	})
}

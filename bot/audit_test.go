package bot

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAuditLineOfRefusals: a state-changing command
// that passes the rank check but that its handler refuses (nothing
// changed) logs its audit line with the refusal's outcome, never
// outcome=ok; a malformed argument the handler finds is "usage".
func TestAuditLineOfRefusals(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		var buf bytes.Buffer
		b := New(store.New(be.Client), Options{Catalog: referenceCatalog(t),
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		say(b, RankOp, "#a", "!a http://example.com/") // accepted
		cases := []struct{ text, outcome string }{
			{"!a http://example.com/", "refused"},                         // already exists
			{"!a http:///nohost", "refused"},                              // no host
			{"!a http://example.org/ --youtube-dl", "refused"},            // refused option
			{"!ig " + refIdent + " (", "refused"},                         // invalid pattern
			{"!d " + refIdent + " 5 1", "refused"},                        // min > max
			{"!d " + refIdent + " x y", "usage"},                          // not numbers
			{"!abort zzzzzzzzzzzzzzzzzzzzzzzzz", "refused"},               // unknown job
			{"!a http://example.net/ --user-agent-alias=nope", "refused"}, // unknown alias
		}
		for _, c := range cases {
			say(b, RankOp, "#a", c.text)
		}
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
		if len(lines) != 1+len(cases) {
			t.Fatalf("%d audit lines, want %d:\n%s", len(lines), 1+len(cases), buf.String())
		}
		if lines[0]["outcome"] != "ok" {
			t.Errorf("accepted !a: outcome %v", lines[0]["outcome"])
		}
		for i, c := range cases {
			if got := lines[i+1]["outcome"]; got != c.outcome {
				t.Errorf("%s: outcome %v, want %s (reply %v)", c.text, got, c.outcome, lines[i+1]["reply"])
			}
		}
	})
}

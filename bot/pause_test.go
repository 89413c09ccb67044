package bot

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// !pause and !resume: op only, unknown queue names refused with nothing
// changed, a paused queue gives a direct-Redis pipeline nothing, the
// pause is shown by !status and !pending, and !resume hands the jobs out
// in their order.
func TestPauseResumeCommands(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		say(b, RankOp, "#a", "!a http://second.example.com/")
		before := be.Dump(t)
		for text, want := range map[string]string{
			"!pause pendng deploy": `"pendng" is not a queue`,
			"!pause pending:":      `"pending:" is not a queue`,
			"!resume nothing":      `"nothing" is not a queue`,
			"!resume pending":      "queue pending is not paused",
		} {
			got := strings.Join(say(b, RankOp, "#a", text), "\n")
			if !strings.Contains(got, want) {
				t.Errorf("%s: %q, want %q", text, got, want)
			}
		}
		if got := strings.Join(say(b, RankVoice, "#a", "!pause"), "\n"); strings.Contains(got, "Paused") {
			t.Errorf("a voiced user paused: %q", got)
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Fatalf("refused pauses changed Redis")
		}
		got := strings.Join(sayAs(b, "JAA", "jaa", RankOp, "#a", "!pause pending deploy in progress"), "\n")
		if !strings.Contains(got, "Paused queue pending") {
			t.Fatalf("!pause: %q", got)
		}
		got = strings.Join(say(b, RankOp, "#a", "!pause pending"), "\n")
		if !strings.Contains(got, "Queue pending is paused by JAA since") || !strings.Contains(got, "(deploy in progress)") {
			t.Errorf("second !pause: %q", got)
		}
		direct := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "direct"})
		if j, err := direct.Take(ctx); err != nil || j != nil {
			t.Fatalf("a direct-Redis pipeline took %v (%v) from a paused queue", j, err)
		}
		got = strings.Join(say(b, RankOp, "#a", "!status"), "\n")
		if !strings.Contains(got, "2 pending") || !strings.Contains(got, "Queue pending is paused by JAA") {
			t.Errorf("!status while paused: %q", got)
		}
		rec := &recorder{nick: "carol"}
		b.Handle(ctx, Request{Nick: "carol", Channel: "#a", Rank: RankOp, Text: "!pending"}, rec)
		if all := strings.Join(rec.replies, "\n"); !strings.Contains(all, "Queue pending is paused by JAA") || !strings.Contains(all, "pending (2, paused):") {
			t.Errorf("!pending while paused: %q", all)
		}
		got = strings.Join(say(b, RankOp, "#a", "!resume pending"), "\n")
		if !strings.Contains(got, "Resumed queue pending") {
			t.Fatalf("!resume: %q", got)
		}
		j, err := direct.Take(ctx)
		if err != nil || j == nil || j.Ident != refIdent {
			t.Fatalf("after !resume a direct take got %v %v, want the first job queued", j, err)
		}
		if n := be.Client.Exists(ctx, store.KeyPausedQueue(store.KeyPending)).Val(); n != 0 {
			t.Errorf("the list aside is still there after !resume")
		}
	})
}

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

// !status IDENT of a queued job says where it stands and each thing that
// holds it: a pause, the per-user running limit, every pipeline avoiding
// its site, and pipelines that take straight from Redis.
func TestStatusSaysWhyAJobWaits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		b := newTestBot(t, be)
		st := store.New(be.Client)
		b.store.(*store.Store).SetTakeRules(store.TakeRules{PerUserRunning: 1})
		sayAs(b, "erin", "erin", RankVoice, "#a", "!a http://one.example.com/")
		sayAs(b, "erin", "erin", RankVoice, "#a", "!a https://shop.squarespace.com/")
		first, second := urlIdent(t, "http://one.example.com/"), urlIdent(t, "https://shop.squarespace.com/")
		for _, k := range []string{"pipe-a", "pipe-b"} {
			if err := st.AddPipelineKey(ctx, k, "ed25519:"+k); err != nil {
				t.Fatal(err)
			}
			if err := st.APIReport(ctx, k, map[string]string{"api_key": k, "nickname": k, "id": store.APIPipelineKey(k)}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetPipelineKeyAvoid(ctx, k, []string{"squarespace.com"}); err != nil {
				t.Fatal(err)
			}
		}
		got := strings.Join(say(b, RankVoice, "#a", "!status "+second), "\n")
		if !strings.Contains(got, "In queue pending, 2nd.") || !strings.Contains(got, "Waiting: every pipeline avoids squarespace.com (pipe-a, pipe-b).") {
			t.Errorf("!status of an avoided job: %q", got)
		}
		if j, err := st.APITake(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending}); err != nil || j == nil || j.Ident != first {
			t.Fatalf("take: %v %v", j, err)
		}
		sayAs(b, "erin", "erin", RankVoice, "#a", "!a http://three.example.com/")
		third := urlIdent(t, "http://three.example.com/")
		got = strings.Join(say(b, RankVoice, "#a", "!status "+third), "\n")
		if !strings.Contains(got, "In queue pending, 2nd. Waiting: erin has 1 job running (limit 1).") {
			t.Errorf("!status of a job held by the limit: %q", got)
		}
		sayAs(b, "JAA", "jaa", RankOp, "#a", "!pause pending deploy")
		got = strings.Join(say(b, RankVoice, "#a", "!status "+third), "\n")
		if !strings.Contains(got, "Queue pending is paused by JAA since") || !strings.Contains(got, "(deploy).") {
			t.Errorf("!status of a job in a paused queue: %q", got)
		}
		direct := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "old-pipe"})
		if err := direct.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		got = strings.Join(say(b, RankVoice, "#a", "!status "+third), "\n")
		if !strings.Contains(got, "1 pipeline takes directly from Redis: limits not enforced for it.") {
			t.Errorf("!status with a direct-Redis pipeline: %q", got)
		}
		got = strings.Join(say(b, RankVoice, "#a", "!status"), "\n")
		if !strings.Contains(got, "1 pipeline takes directly from Redis") {
			t.Errorf("!status summary with a direct-Redis pipeline: %q", got)
		}
	})
}

package bot

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// rerouteRig: refIdent (http://example.com/) taken by API key pipe-a,
// key pipe-b registered, a second job queued behind.
func rerouteRig(t *testing.T, be *redistest.Backend, b *Bot) (st *store.Store, queued string) {
	t.Helper()
	ctx := context.Background()
	st = store.New(be.Client)
	for _, k := range []string{"pipe-a", "pipe-b"} {
		if err := st.AddPipelineKey(ctx, k, "ed25519:"+k); err != nil {
			t.Fatal(err)
		}
	}
	if j, err := st.APITake(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending}); err != nil || j == nil || j.Ident != refIdent {
		t.Fatalf("take: %v %v", j, err)
	}
	say(b, RankOp, "#a", "!a http://queued.example.org/")
	return st, urlIdent(t, "http://queued.example.org/")
}

// TestRerouteBadInput: every malformed or refused !reroute answers with
// the reason and changes nothing in Redis.
func TestRerouteBadInput(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		_, queued := rerouteRig(t, be, b)
		id := refIdent
		before := be.Dump(t)
		cases := []struct {
			rank       Rank
			text, want string
		}{
			{RankVoice, "!reroute " + id, "only channel operators may"},
			{RankOp, "!reroute", "Usage: !reroute IDENT"},
			{RankOp, "!reroute NOT-AN-IDENT", "Usage: !reroute"},
			{RankOp, "!reroute " + id + " --avoid", "Usage: !reroute"},
			{RankOp, "!reroute " + id + " pipe-b", "Usage: !reroute"},
			{RankOp, "!reroute " + id + " --avoid pipe-b extra", "Usage: !reroute"},
			{RankOp, "!reroute " + id + " --avoid=", "must be a pipeline key name"},
			{RankOp, "!reroute " + id + " --avoid pipe*b", "must be a pipeline key name"},
			{RankOp, "!reroute " + id + " --avoid " + strings.Repeat("p", 200), "must be a pipeline key name"},
			{RankOp, "!reroute nosuchjob", "don't know anything about nosuchjob"},
			{RankOp, "!reroute " + id + " --avoid nokey", "no pipeline key called nokey"},
			{RankOp, "!reroute " + queued, "still queued: no pipeline holds it"},
		}
		for _, c := range cases {
			got := say(b, c.rank, "#a", c.text)
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
				t.Errorf("%q: replies %q, want one containing %q", c.text, got, c.want)
			}
			if diff := cmp.Diff(before, be.Dump(t)); diff != "" {
				t.Fatalf("%q changed Redis:\n%s", c.text, diff)
			}
		}
		// Finished and aborting jobs are refused too.
		say(b, RankOp, "#a", "!abort "+id)
		if got := say(b, RankOp, "#a", "!reroute "+id); len(got) != 1 || !strings.Contains(got[0], "being aborted") {
			t.Errorf("aborting job: %q", got)
		}
		say(b, RankOp, "#a", "!abort "+queued)
		if got := say(b, RankOp, "#a", "!reroute "+queued+" --avoid pipe-a"); len(got) != 1 || !strings.Contains(got[0], "already finished") {
			t.Errorf("finished job: %q", got)
		}
	})
}

// TestReroute: the running job goes back to the front of pending, its
// pipeline avoids example.com, and the reply says so; --avoid names
// another key for a queued job. The reply is the channel's line: no admin
// notice is queued (`archivebot reroute` queues one; here it would be said
// twice).
func TestReroute(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		st, queued := rerouteRig(t, be, b)
		got := say(b, RankOp, "#a", "!reroute "+refIdent)
		want := "carol: Job " + refIdent + " rerouted: aborted on pipe-a, queued again at the front of pending; pipe-a now avoids example.com."
		if len(got) != 1 || got[0] != want {
			t.Fatalf("replies %q, want %q", got, want)
		}
		if q, _ := be.Client.LRange(ctx, store.KeyPending, 0, -1).Result(); !cmp.Equal(q, []string{queued, refIdent}) {
			t.Errorf("pending %q, want %s at the head", q, refIdent)
		}
		if r, _ := st.PipelineKeyRules(ctx, "pipe-a"); !cmp.Equal(r.Avoid, []string{"example.com"}) {
			t.Errorf("pipe-a avoids %q", r.Avoid)
		}
		got = say(b, RankOp, "#a", "!reroute "+queued+" --avoid=pipe-b")
		want = "carol: Job " + queued + " rerouted: moved to the front of pending; pipe-b now avoids example.org."
		if len(got) != 1 || got[0] != want {
			t.Fatalf("replies %q, want %q", got, want)
		}
		if n, _ := be.Client.LLen(ctx, store.KeyAdminNotices).Result(); n != 0 {
			t.Errorf("!reroute queued %d admin notices; its reply is the channel's line", n)
		}
		if h := say(b, RankNone, "#a", "!history "+refIdent); !strings.Contains(strings.Join(h, "\n"), "rerouted") {
			t.Errorf("!history does not show the reroute: %q", h)
		}
	})
}

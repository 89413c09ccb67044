package bot

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// Settings changes on a running job reach a pipeline the way upstream's
// does it: it hears the new age on archivebot:job:IDENT, re-reads the
// settings, and on abort_requested aborts and marks the job done.
func TestRunningJobSeesChangesAndAbort(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		p := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "sim"})
		j, err := p.Take(ctx)
		if err != nil || j == nil {
			t.Fatalf("take: %v %v", j, err)
		}
		sub := be.Client.Subscribe(ctx, store.ChannelJob(refIdent))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		nextAge := func() int64 {
			t.Helper()
			select {
			case m := <-sub.Channel():
				n, err := strconv.ParseInt(m.Payload, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			case <-time.After(5 * time.Second):
				t.Fatal("no settings age published")
				return 0
			}
		}

		say(b, RankVoice, "#a", "!d "+refIdent+" 500 750")
		if ended, err := j.SettingsChanged(ctx, nextAge()); ended || err != nil {
			t.Fatalf("delay change ended the job: %v", err)
		}
		if s, _ := j.Settings(ctx); s.DelayMin != "500" || s.DelayMax != "750" || s.Age != 5 {
			t.Fatalf("pipeline read %+v", s)
		}
		say(b, RankVoice, "#a", `!ig `+refIdent+` ^https?://[^/]+/(?!keep)`)
		nextAge()
		if s, _ := j.Settings(ctx); !strings.Contains(strings.Join(s.IgnorePatterns, " "), "(?!keep)") {
			t.Fatalf("pipeline did not see the pattern: %v", s.IgnorePatterns)
		}
		say(b, RankVoice, "#a", "!yahoo "+refIdent)
		if age := nextAge(); age != 9 {
			t.Fatalf("yahoo published age %d, want 9 (+3)", age)
		}

		if got := say(b, RankVoice, "#a", "!abort "+refIdent); !strings.Contains(got[0], "Initiated abort") {
			t.Fatalf("abort: %q", got)
		}
		ended, err := j.SettingsChanged(ctx, nextAge())
		if err != nil || !ended {
			t.Fatalf("pipeline did not end the aborted job: %v", err)
		}
		m, _ := be.Client.HGetAll(ctx, refIdent).Result()
		if m["aborted"] != "true" || m["finished_at"] == "" {
			t.Fatalf("record after abort: %v", m)
		}
		if got := say(b, RankNone, "#a", "!status "+refIdent); !strings.Contains(got[0], "Aborted.") {
			t.Fatalf("status: %q", got)
		}
	})
}

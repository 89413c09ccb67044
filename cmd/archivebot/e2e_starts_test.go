package main

// Start notices over the real IRC server with the control node as a real
// process: exactly one line per job that wants one, none twice, none for
// jobs that opted out, and a notice the node had taken but not yet
// announced survives a SIGKILL.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// startLineOf matches the start line of job id on the pipeline nick.
func startLineOf(id, pipeline string) func(string) bool {
	return func(s string) bool {
		return strings.Contains(s, "has started on "+pipeline+". ("+id+")")
	}
}

func isStartLine(s string) bool { return strings.Contains(s, "has started on ") }

func TestE2EStartNotices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		rdb := b.Client
		const ch = "#starts"
		irc, cfg, _, voice, plain := channelWithRoles(t, b, ch)
		bot := startChild(t, cfg)
		plain.WaitBotIn(botNick, ch)

		// Five jobs that want a notice (four !a by default, one !ao that
		// asks), one !a that opts out, one !ao that does not ask.
		type job struct {
			text, id, notify string
		}
		var jobs []job
		for i := 0; i < 4; i++ {
			url, id := identOf(t, fmt.Sprintf("https://example.com/start/%d", i))
			jobs = append(jobs, job{"!a " + url, id, "1"})
		}
		url, id := identOf(t, "https://example.com/start/ao-asks")
		jobs = append(jobs, job{"!ao " + url + " --notify-start", id, "1"})
		url, optOut := identOf(t, "https://example.com/start/opt-out")
		jobs = append(jobs, job{"!a " + url + " --no-notify-start", optOut, "0"})
		url, ao := identOf(t, "https://example.com/start/ao")
		jobs = append(jobs, job{"!ao " + url, ao, "0"})
		for _, j := range jobs {
			if got := ask(voice, ch, j.text); !strings.Contains(got, "Queued") {
				t.Fatalf("%s: %q", j.text, got)
			}
			if n, _ := rdb.HGet(ctx, store.KeyOrigin(j.id), "notify_start").Result(); n != j.notify {
				t.Errorf("%s: notify_start %q, want %q", j.text, n, j.notify)
			}
		}

		p := pipelinesim.New(rdb, pipelinesim.Config{Nickname: "startpipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		for range jobs {
			if j, err := p.Take(ctx); err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
		}
		var preds []func(ircmsg.Message) bool
		for _, j := range jobs[:5] {
			preds = append(preds, fromBot(ch, startLineOf(j.id, "startpipe")))
		}
		expectEach(plain, "start lines", preds...)
		// Every start was observed, nothing is left to deliver; a reply to
		// a later command is the barrier for lines still in flight.
		testproc.Eventually(t, "all seven starts observed", func() bool {
			n, _ := rdb.SCard(ctx, store.KeyStarted).Result()
			return n == 7
		})
		if n, _ := rdb.LLen(ctx, store.KeyStartNotifications).Result(); n != 0 {
			t.Errorf("%d start notices still queued", n)
		}
		got := ask(plain, ch, "!history "+optOut)
		if !strings.Contains(got, "queued by vera") || !strings.Contains(got, "started by "+p.Key()+` (pipeline "startpipe")`) {
			t.Errorf("!history of the opted-out job: %q", got)
		}
		lines := botLines(plain, ch)
		if n := countLines(lines, isStartLine); n != 5 {
			t.Errorf("%d start lines, want 5: %q", n, lines)
		}
		for _, j := range jobs[:5] {
			if n := countLines(lines, startLineOf(j.id, "startpipe")); n != 1 {
				t.Errorf("job %s announced %d times", j.id, n)
			}
		}

		// Killed between take and announce: with IRC down, the node
		// observes the start and queues its notice, then dies; the next
		// process announces it. A job taken while no node runs is
		// announced too.
		// Every start line seen is acknowledged (a moment after it is
		// seen: bot/irc/confirm.go) before ngircd stops.
		testproc.Eventually(t, "the start lines seen acknowledged", func() bool {
			q, _ := rdb.LLen(ctx, store.KeyStartNotifications).Result()
			pr, _ := rdb.LLen(ctx, store.KeyStartProcessing).Result()
			return q+pr == 0
		})
		from := bot.log.len()
		irc.Stop()
		bot.log.waitFor(t, from, "IRC connection lost, reconnecting")
		register := func(raw string) string {
			url, id := identOf(t, raw)
			err := st.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", Slug: "s",
				StartedBy: "vera", StartedIn: ch, Queue: store.KeyPending, NotifyStart: true})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		killedID := register("https://example.com/start/killed")
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(t, "the start observed and its notice queued, not announced", func() bool {
			seen, _ := rdb.SIsMember(ctx, store.KeyStarted, killedID).Result()
			q, _ := rdb.LLen(ctx, store.KeyStartNotifications).Result()
			pr, _ := rdb.LLen(ctx, store.KeyStartProcessing).Result()
			return seen && q+pr == 1
		})
		bot.kill()
		whileDead := register("https://example.com/start/while-dead")
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		irc.Start()
		w := irctest.Dial(t, irc.Addr(), "watcher")
		w.Join(ch)
		bot = startChild(t, cfg)
		w.WaitBotIn(botNick, ch)
		expectEach(w, "start lines after the kill",
			fromBot(ch, startLineOf(killedID, "startpipe")), fromBot(ch, startLineOf(whileDead, "startpipe")))
		if got := ask(w, ch, "!status"); !strings.Contains(got, "Job status") {
			t.Errorf("!status: %q", got)
		}
		lines = botLines(w, ch)
		for _, id := range []string{killedID, whileDead} {
			if n := countLines(lines, startLineOf(id, "startpipe")); n != 1 {
				t.Errorf("job %s announced %d times after the restart", id, n)
			}
		}
		if n := countLines(lines, isStartLine); n != 2 {
			t.Errorf("%d start lines after the restart, want 2: %q", n, lines)
		}
	})
}

package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// lostReplies is a node's IRC side that stopped right after the command
// ran (frozen past its lease, killed): no reply reaches the channel.
type lostReplies struct{ n int }

func (r *lostReplies) Reply(string)   { r.n++ }
func (r *lostReplies) Private(string) { r.n++ }

// chanLines records the lines a node's services say, by channel.
type chanLines struct {
	mu    sync.Mutex
	lines []svcChanLine
	got   chan struct{}
}

type svcChanLine struct{ channel, text string }

func (a *chanLines) Announce(_ context.Context, channel, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, svcChanLine{channel, text})
	select {
	case a.got <- struct{}{}:
	default:
	}
	return nil
}

func (a *chanLines) Channels() []string { return []string{"#archivebot", "#other"} }

func (a *chanLines) all() []svcChanLine {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]svcChanLine{}, a.lines...)
}

// Found by a long soak: user9's !fail of a queued job was written to
// Redis, then the leader froze before its reply, the only report of the
// fail, reached the channel; the next leader never told the channel. The
// fail's line is queued with the fail, so the next node's admin notifier
// says it in the job's channel.
func TestFailReportSurvivesTheNodeDyingBeforeItsReply(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.New(b.Client)
		const id, url = "failrep1", "http://failrep.example.com/"
		if err := s.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", Slug: "failrep.example.com-inf",
			StartedBy: "user9", StartedIn: "#archivebot", DelayMin: 250, DelayMax: 375, Concurrency: 3,
			Queue: store.KeyPending}); err != nil {
			t.Fatal(err)
		}

		// The old node runs !fail (from another channel) and dies before
		// replying.
		old := bot.New(s, bot.Options{})
		out := &lostReplies{}
		old.Handle(ctx, bot.Request{Nick: "oper", Channel: "#other", Rank: bot.RankOp, Text: "!fail " + id}, out)
		if out.n == 0 {
			t.Fatal("!fail did not answer at all")
		}
		if j, err := s.GetJob(ctx, id); err != nil || j == nil || !j.Failed {
			t.Fatalf("the job is not failed: %+v, %v", j, err)
		}

		// The next node's services, started from what Redis holds.
		ann := &chanLines{got: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(t.Output(), nil))
		svc := coordinator.NewServices(s, ann, coordinator.ServicesConfig{
			Reaper:    coordinator.ReaperConfig{Interval: time.Hour},
			Finish:    coordinator.FinishConfig{Interval: time.Hour},
			Start:     coordinator.StartConfig{Interval: time.Hour},
			Pipelines: coordinator.PipelineNotifierConfig{Interval: time.Hour, SilentAfter: time.Hour},
			Analyzer:  coordinator.AnalyzerConfig{SweepInterval: time.Hour},
		}, log)
		svc.Start(ctx)
		defer svc.Stop()
		want := "user9: Job " + id + " for " + url + " failed: removed from its queue"
		deadline := time.After(testproc.WaitFor)
		for {
			for _, l := range ann.all() {
				if strings.HasPrefix(l.text, want) {
					if l.channel != "#archivebot" {
						t.Fatalf("the fail was reported in %q, not the job's channel: %q", l.channel, l.text)
					}
					return
				}
			}
			select {
			case <-ann.got:
			case <-deadline:
				t.Fatalf("no line reported the fail within %v; the next node said %q", testproc.WaitFor, ann.all())
			}
		}
	})
}

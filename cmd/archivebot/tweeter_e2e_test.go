package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// tweetSignalHandler passes records on and reports those whose message contains
// match.
type tweetSignalHandler struct {
	slog.Handler
	match string
	ch    chan<- slog.Record
}

func (h tweetSignalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.ch <- r
	}
	return h.Handler.Handle(ctx, r)
}

func (h tweetSignalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return tweetSignalHandler{h.Handler.WithAttrs(as), h.match, h.ch}
}

func (h tweetSignalHandler) WithGroup(name string) slog.Handler {
	return tweetSignalHandler{h.Handler.WithGroup(name), h.match, h.ch}
}

// TestTweeterEndToEnd (the tweeter's end-to-end test, here because it
// wires the tweeter to the services' updates listener as serve does): in
// dry run, with the updates listener and a simulated
// pipeline: a job the pipeline starts ends up as exactly one "Archiving
// URL" in tweets:done; a job aborted before it started produces none.
func TestTweeterEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, jobs *store.Store, ctx context.Context) {
		logs := &testproc.Buffer{}
		base := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log:\n%s", logs)
			}
		})
		posts := make(chan slog.Record, 10)
		logger := slog.New(tweetSignalHandler{base.Handler(), "would post", posts})
		tw, err := tweeter.New(jobs, tweeter.Config{Logger: logger, Interval: 10 * time.Millisecond, Delay: -1, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !tw.DryRun() {
			t.Fatal("not a dry run")
		}

		// The wiring cmd/archivebot does.
		updates := coordinator.NewUpdates(store.New(b.Client), logger)
		updates.OnUpdate(tw.JobUpdated)
		updates.OnSubscribe(tw.SweepSoon)
		subscribed := make(chan struct{}, 1)
		updates.OnSubscribe(func(context.Context) {
			select {
			case subscribed <- struct{}{}:
			default:
			}
		})
		uctx, stopUpdates := context.WithCancel(ctx)
		listening := make(chan struct{})
		go func() {
			defer close(listening)
			updates.Run(uctx)
		}()
		t.Cleanup(func() { stopUpdates(); <-listening })
		tw.Start(ctx)
		t.Cleanup(tw.Stop)
		select {
		case <-subscribed:
		case <-time.After(10 * time.Second):
			t.Fatal("updates listener did not subscribe")
		}

		// Idents of this backend's own, since pub/sub ignores the database.
		register := func(raw string) (url, id string) {
			t.Helper()
			url, id, err := ident.FromURL(raw)
			if err != nil {
				t.Fatal(err)
			}
			err = jobs.Register(ctx, store.NewJob{
				Ident: id, URL: url, FetchDepth: "inf", Slug: "e2e-inf", StartedBy: "alice", StartedIn: "#test",
				DelayMin: 250, DelayMax: 375, Concurrency: 3, SettingsAge: 1, Queue: store.KeyPending,
			})
			if err != nil {
				t.Fatal(err)
			}
			return url, id
		}
		abortedURL, abortedID := register("https://tweeter-e2e-aborted-" + b.Name + ".example/")
		startedURL, startedID := register("https://tweeter-e2e-started-" + b.Name + ".example/")

		// Aborted while queued: finished at once, updates published.
		if res, _, err := jobs.Abort(ctx, abortedID); err != nil || res != store.AbortedQueued {
			t.Fatalf("Abort = %v, %v; want the queued job aborted", res, err)
		}

		pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "tweeter-e2e"})
		if err := pipe.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		job, err := pipe.Take(ctx)
		if err != nil || job == nil || job.Ident != startedID {
			t.Fatalf("Take = %+v, %v; want job %s", job, err, startedID)
		}
		if next, err := pipe.Take(ctx); next != nil || err != nil {
			t.Fatalf("second Take = %+v, %v; want nothing (the other job was aborted)", next, err)
		}
		for range 20 {
			if _, err := job.LogDownload(ctx, startedURL+"page", 200); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case r := <-posts:
			if got, want := recordText(r), "Archiving "+startedURL; got != want {
				t.Errorf("posted %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("nothing posted within 10s")
		}
		if err := job.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if err := pipe.Exit(ctx); err != nil {
			t.Fatal(err)
		}

		// The updates listener delivers in order and the tweeter checks in
		// order: the aborted job's update was handled before the post.
		tw.Stop()
		type tweetState struct{ Queued, Done, Failed []string }
		st := tweetState{
			Queued: membersOf(t, b, store.KeyTweetsQueue),
			Done:   membersOf(t, b, store.KeyTweetsDone),
			Failed: membersOf(t, b, store.KeyTweetsFailed),
		}
		want := tweetState{Done: []string{"Archiving " + startedURL}}
		if diff := cmp.Diff(want, st, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("redis (-want +got):\n%s", diff)
		}
		select {
		case r := <-posts:
			t.Errorf("posted again: %v", r)
		default:
		}
		if strings.Contains(logs.String(), "Archiving "+abortedURL) {
			t.Errorf("the aborted job was queued or posted")
		}
	})
}

// recordText is the "text" attribute of a log record.
func recordText(r slog.Record) string {
	var text string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "text" {
			text = a.Value.String()
		}
		return true
	})
	return text
}

func membersOf(t *testing.T, b *redistest.Backend, key string) []string {
	t.Helper()
	m, err := b.Client.ZRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

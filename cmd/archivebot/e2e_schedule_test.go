package main

// The take rule's explanations over the real IRC server, with the control
// node as a real process: !status IDENT of a queued job says what holds it
// (doc/pipeline-api.md, The take rule; doc/protocol.md, Paused queues).

import (
	"context"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

func TestE2EStatusSaysWhyAJobWaits(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const ch = "#waits"
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		cfg := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL,
			extra: "\n[jobs]\nper_user_running_limit = 1\n"}.write(t)
		op, _, plain := rolesIn(t, irc, ch)
		startChild(t, cfg)
		plain.WaitBotIn(botNick, ch)

		st := store.New(b.Client)
		st.SetTakeRules(store.TakeRules{PerUserRunning: 1})
		for _, k := range []string{"pipe-a", "pipe-b"} {
			if err := st.AddPipelineKey(ctx, k, "ed25519:"+k); err != nil {
				t.Fatal(err)
			}
			if err := st.APIReport(ctx, k, map[string]string{"id": store.APIPipelineKey(k), "nickname": k, "api_key": k}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetPipelineKeyAvoid(ctx, k, []string{"squarespace.com"}); err != nil {
				t.Fatal(err)
			}
		}
		one, idOne := identOf(t, "https://one.example.com/")
		sq, idSq := identOf(t, "https://shop.squarespace.com/")
		three, idThree := identOf(t, "https://three.example.com/")
		for _, u := range []string{one, sq} {
			if got := ask(op, ch, "!a "+u); !strings.Contains(got, "Queued") {
				t.Fatalf("!a %s: %q", u, got)
			}
		}
		if got := ask(plain, ch, "!status "+idSq); !strings.Contains(got, "In queue pending, 2nd.") ||
			!strings.Contains(got, "Waiting: every pipeline avoids squarespace.com (pipe-a, pipe-b).") {
			t.Errorf("!status of an avoided job: %q", got)
		}
		if j, err := st.APITake(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending}); err != nil || j == nil || j.Ident != idOne {
			t.Fatalf("take: %v %v", j, err)
		}
		if got := ask(op, ch, "!a "+three); !strings.Contains(got, "Queued") {
			t.Fatalf("!a %s: %q", three, got)
		}
		if got := ask(plain, ch, "!status "+idThree); !strings.Contains(got, "In queue pending, 2nd. Waiting: opal has 1 job running (limit 1).") {
			t.Errorf("!status of a job held by the per-user limit: %q", got)
		}
		if got := ask(op, ch, "!pause pending deploy"); !strings.Contains(got, "Paused queue pending") {
			t.Fatalf("!pause: %q", got)
		}
		if got := ask(plain, ch, "!status "+idThree); !strings.Contains(got, "Queue pending is paused by opal since") || !strings.Contains(got, "(deploy).") {
			t.Errorf("!status of a job in a paused queue: %q", got)
		}
		direct := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "old-pipe"})
		if err := direct.Report(ctx, "Running"); err != nil {
			t.Fatal(err)
		}
		if got := ask(plain, ch, "!status"); !strings.Contains(got, "Queue pending is paused by opal") ||
			!strings.Contains(got, "1 pipeline takes directly from Redis: limits not enforced for it.") {
			t.Errorf("!status: %q", got)
		}
		if got := ask(plain, ch, "!resume pending"); !strings.Contains(got, "only channel operators may") {
			t.Errorf("!resume by a plain user: %q", got)
		}
		if got := ask(op, ch, "!resume pending"); !strings.Contains(got, "Resumed queue pending") {
			t.Errorf("!resume: %q", got)
		}
	})
}

// TestE2ERerouteFromIRC: an op's !reroute through a real IRC server takes
// a job away from the API key running it and queues it at the front, the
// key avoiding the site; a plain user is refused and nothing changes.
func TestE2ERerouteFromIRC(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const ch = "#reroute"
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		cfg := nodeConfig{ircURL: irc.URL(), channels: []string{ch}, redisURL: b.URL}.write(t)
		op, _, plain := rolesIn(t, irc, ch)
		startChild(t, cfg)
		plain.WaitBotIn(botNick, ch)

		st := store.New(b.Client)
		if err := st.AddPipelineKey(ctx, "pipe-a", "ed25519:pipe-a"); err != nil {
			t.Fatal(err)
		}
		one, idOne := identOf(t, "https://www.one.example.com/")
		two, idTwo := identOf(t, "https://two.example.org/")
		for _, u := range []string{one, two} {
			if got := ask(op, ch, "!a "+u); !strings.Contains(got, "Queued") {
				t.Fatalf("!a %s: %q", u, got)
			}
		}
		if j, err := st.APITake(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending}); err != nil || j == nil || j.Ident != idOne {
			t.Fatalf("take: %v %v", j, err)
		}
		if got := ask(plain, ch, "!reroute "+idOne); !strings.Contains(got, "only channel operators may") {
			t.Errorf("!reroute by a plain user: %q", got)
		}
		if got := ask(op, ch, "!reroute "+idOne+" --avoid no-such-key"); !strings.Contains(got, "no pipeline key called no-such-key") {
			t.Errorf("!reroute --avoid unknown: %q", got)
		}
		want := "Job " + idOne + " rerouted: aborted on pipe-a, queued again at the front of pending; pipe-a now avoids example.com."
		if got := ask(op, ch, "!reroute "+idOne); !strings.Contains(got, want) {
			t.Fatalf("!reroute: %q, want %q", got, want)
		}
		if q := b.Client.LRange(ctx, store.KeyPending, 0, -1).Val(); len(q) != 2 || q[0] != idTwo || q[1] != idOne {
			t.Errorf("pending %q, want %s at the head", q, idOne)
		}
		if got := ask(plain, ch, "!status "+idOne); !strings.Contains(got, "In queue") {
			t.Errorf("!status after the reroute: %q", got)
		}
	})
}

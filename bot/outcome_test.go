package bot

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// chanReplier hands every reply to a channel, so a test can wait for
// replies that come after Handle has returned.
type chanReplier struct {
	nick  string
	lines chan string
}

func (r *chanReplier) Reply(text string)   { r.lines <- r.nick + ": " + text }
func (r *chanReplier) Private(text string) { r.lines <- "[privmsg " + r.nick + "] " + text }

// waitReply returns the next reply, failing the test after a generous
// bound (the bound only catches a hang; nothing is timed).
func waitReply(t *testing.T, lines chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		t.Logf("reply: %s", l)
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("no reply")
		return ""
	}
}

// With redis-server stopped (SIGSTOP), a write whose
// reply does not come is not "backend unavailable … try again": its outcome
// is unknown, the bot says so, and once Redis answers it says what finally
// happened — exactly once, without applying the command twice.
func TestOutcomeUnknownSIGSTOP(t *testing.T) {
	proc := redistest.StartServer(t)
	addr := proc.Addr()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	b := newOutcomeBot(t, rdb)
	ctx := context.Background()
	out := &chanReplier{nick: "carol", lines: make(chan string, 100)}
	handle := func(text string) {
		b.Handle(ctx, Request{Nick: "carol", Channel: "#a", Rank: RankOp, Text: text}, out)
	}
	handle("!a http://example.com/")
	if got := waitReply(t, out.lines); !strings.Contains(got, "Queued http://example.com/") {
		t.Fatalf("first !a: %q", got)
	}
	waitReply(t, out.lines) // "Use !status …"

	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	handle("!a http://example.org/")
	got := waitReply(t, out.lines)
	if strings.Contains(got, "unavailable") || !strings.Contains(got, "don't know yet") || !strings.Contains(got, "http://example.org/") {
		t.Fatalf("!a with Redis stopped: %q, want an unknown outcome, not a failure", got)
	}
	handle("!ig " + refIdent + " stopped-pattern")
	got = waitReply(t, out.lines)
	if strings.Contains(got, "unavailable") || !strings.Contains(got, "don't know yet") {
		t.Fatalf("!ig with Redis stopped: %q, want an unknown outcome, not a failure", got)
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var queued, added bool
	for !queued || !added {
		got := waitReply(t, out.lines)
		switch {
		case strings.Contains(got, "Queued http://example.org/"):
			queued = true
		case strings.Contains(got, "Added ignore pattern stopped-pattern to job "+refIdent):
			added = true
		case strings.Contains(got, "Use !status"):
		default:
			t.Fatalf("unexpected follow-up %q", got)
		}
	}
	// Applied exactly once: one queue entry, one settings change.
	check := redis.NewClient(&redis.Options{Addr: addr})
	defer check.Close()
	pending, _ := check.LRange(ctx, store.KeyPending, 0, -1).Result()
	if len(pending) != 2 {
		t.Fatalf("pending = %v, want the two jobs once each", pending)
	}
	if age, _ := check.HGet(ctx, refIdent, "settings_age").Result(); age != "5" {
		t.Fatalf("settings_age = %s, want 5 (one !ig applied once)", age)
	}
	if ok, _ := check.SIsMember(ctx, refIdent+"_ignores", "stopped-pattern").Result(); !ok {
		t.Fatal("pattern not in the ignore set")
	}
	// A retry of the !a now says it exists: the first one did happen.
	handle("!a http://example.org/")
	for {
		got := waitReply(t, out.lines)
		if strings.Contains(got, "already exists") {
			break
		}
		if !strings.Contains(got, "Use !status") {
			t.Fatalf("retried !a: %q", got)
		}
	}
}

func newOutcomeBot(t *testing.T, rdb *redis.Client) *Bot {
	t.Helper()
	b := New(store.New(rdb), Options{Catalog: referenceCatalog(t), OutcomePoll: 20 * time.Millisecond})
	t.Cleanup(b.Close)
	return b
}

// silentClient is a client of a redistest.Silent server that gives up
// reading a reply after 50ms.
func silentClient(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Silent(t), ReadTimeout: 50 * time.Millisecond, Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// When Redis never answers, the bot says after OutcomeWait that it still
// does not know, and claims neither success nor failure.
func TestOutcomeStillUnknown(t *testing.T) {
	rdb := silentClient(t)
	b := New(store.New(rdb), Options{Catalog: referenceCatalog(t), OutcomePoll: 10 * time.Millisecond, OutcomeWait: 200 * time.Millisecond})
	t.Cleanup(b.Close)
	out := &chanReplier{nick: "carol", lines: make(chan string, 10)}
	b.Handle(context.Background(), Request{Nick: "carol", Channel: "#a", Rank: RankOp, Text: "!a http://example.org/"}, out)
	first := waitReply(t, out.lines)
	if !strings.Contains(first, "don't know yet whether the job for http://example.org/ was queued") {
		t.Fatalf("first reply %q", first)
	}
	last := waitReply(t, out.lines)
	if !strings.Contains(last, "still don't know whether the job for http://example.org/ was queued") {
		t.Fatalf("after the wait: %q", last)
	}
	select {
	case l := <-out.lines:
		t.Fatalf("extra reply %q", l)
	default:
	}
}

// Close stops a follow-up that is still waiting, without a reply.
func TestOutcomeFollowUpStopsOnClose(t *testing.T) {
	rdb := silentClient(t)
	b := New(store.New(rdb), Options{Catalog: referenceCatalog(t), OutcomeWait: time.Hour})
	out := &chanReplier{nick: "carol", lines: make(chan string, 10)}
	b.Handle(context.Background(), Request{Nick: "carol", Channel: "#a", Rank: RankOp, Text: "!ig " + refIdent + " x"}, out)
	if got := waitReply(t, out.lines); !strings.Contains(got, "don't know yet whether your !ig "+refIdent+" x took effect") {
		t.Fatalf("reply %q", got)
	}
	b.Close() // returns once the follow-up has stopped
}

package pipelinesim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// A simulator with nothing to take says so, once per wait (not once per
// look at the queues), and how a job gets queued: after the README's
// tour its job is done, and the simulator started for the API
// walk-through sat silent.
func TestRunSaysWhenWaiting(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		var out testproc.Buffer
		done := make(chan error, 1)
		go func() {
			done <- Run(context.Background(), Options{RedisURL: b.URL, Nickname: "idler", RunOptions: RunOptions{
				MaxJobs: 2, Entries: 1, EntryInterval: time.Millisecond, PollInterval: time.Millisecond,
				ReportInterval: time.Millisecond, HeartbeatInterval: time.Millisecond}}, &out)
		}()
		const waiting = "waiting: no job is queued; this pipeline takes the next one (!a URL in the node's console or channel queues one)"
		count := func() int { return strings.Count(out.String(), waiting) }
		testproc.EventuallyWithin(t, 30*time.Second, "the first waiting line", func() bool { return count() == 1 })
		queue(t, b.Client, "idlejob1", "pending")
		testproc.EventuallyWithin(t, 30*time.Second, "job 1 done", func() bool { return strings.Contains(out.String(), "done idlejob1") })
		testproc.EventuallyWithin(t, 30*time.Second, "the second waiting line", func() bool { return count() == 2 })
		queue(t, b.Client, "idlejob2", "pending")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Many looks at the empty queues (every millisecond), two waits.
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var kinds []string
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			kinds = append(kinds, strings.TrimSuffix(f[1], ":"))
		}
		if got := strings.Join(kinds, " "); got != "waiting take done waiting take done exit" {
			t.Errorf("steps %q, want one waiting line before each take:\n%s", got, out.String())
		}
	})
}

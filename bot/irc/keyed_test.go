package irc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// TestKeyedQueue: per-key order, batches as take says, a panicking batch
// costs only itself, stop drops and refuses, wait sees every worker end.
func TestKeyedQueue(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	var names []string
	release, blocked := make(chan struct{}), make(chan struct{})
	q := newKeyedQueue(testLogger(t), "test", func(key, name string, batch []string) {
		if batch[0] == "block" {
			close(blocked)
			<-release
			return
		}
		if batch[0] == "boom" {
			panic("batch bug")
		}
		mu.Lock()
		defer mu.Unlock()
		got[key] = append(got[key], strings.Join(batch, "+"))
		names = append(names, name)
	})
	// Take everything once three or more wait, else one.
	q.take = func(waiting []string) int {
		if len(waiting) >= 3 {
			return len(waiting)
		}
		return 1
	}
	q.maxQueue = 10
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(q.push("a", "Alice", "block"))
	<-blocked
	for i := range 4 {
		must(q.push("a", "alice", fmt.Sprint("a", i)))
	}
	must(q.push("b", "Bob", "boom"))
	must(q.push("b", "Bob", "b0"))
	// "a" is blocked; "b" goes on past its panic.
	testproc.Eventually(t, "b's batch after its panicking one", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(got["b"], []string{"b0"})
	})
	if len(got["a"]) != 0 {
		t.Fatalf("a ran while its first batch blocked: %v", got["a"])
	}
	for i := 4; i < 10; i++ {
		must(q.push("a", "alice", fmt.Sprint("a", i)))
	}
	if err := q.push("a", "alice", "a10"); err != errQueueFull {
		t.Fatalf("push past maxQueue: %v, want errQueueFull", err)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if !q.wait(ctx) {
		t.Fatal("wait: workers still running")
	}
	want := []string{"a0+a1+a2+a3+a4+a5+a6+a7+a8+a9"}
	if !slices.Equal(got["a"], want) {
		t.Errorf("a's batches %q, want %q", got["a"], want)
	}
	if !slices.Equal(names, []string{"Bob", "Alice"}) {
		t.Errorf("names %q: want the name of the push that started each worker", names)
	}
	// Batches of one while few wait.
	must(q.push("c", "c", "c0"))
	must(q.push("c", "c", "c1"))
	if !q.wait(ctx) {
		t.Fatal("wait")
	}
	if g := got["c"]; !slices.Equal(g, []string{"c0", "c1"}) {
		t.Errorf("c's batches %q", g)
	}
	// stop drops what waits and refuses more.
	block, started := make(chan struct{}), make(chan struct{})
	q2 := newKeyedQueue(testLogger(t), "test", func(_, _ string, batch []int) {
		close(started)
		<-block
	})
	for i := range 5 {
		must(q2.push("k", "k", i))
	}
	<-started
	if n := q2.stop(); n != 4 {
		t.Errorf("stop dropped %d, want the 4 not started", n)
	}
	if err := q2.push("k", "k", 9); err != errStopped {
		t.Errorf("push after stop: %v, want errStopped", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if q2.wait(short) {
		t.Error("wait returned while a batch still runs")
	}
	close(block)
	if !q2.wait(ctx) {
		t.Error("wait after the batch ended")
	}
}

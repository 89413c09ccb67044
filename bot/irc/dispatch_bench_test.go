package irc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
)

// BenchmarkDispatcher: jobs submitted over 32 users' queues and run on 8
// slots, the command path's per-key worker queue (keyed.go).
func BenchmarkDispatcher(b *testing.B) {
	d := newDispatcher(8, 1<<30, slog.New(slog.NewTextHandler(io.Discard, nil)))
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprint("user", i)
	}
	var wg sync.WaitGroup
	wg.Add(b.N)
	b.ResetTimer()
	for i := range b.N {
		if err := d.submit(keys[i%len(keys)], wg.Done); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	d.stop()
	d.wait(context.Background())
}

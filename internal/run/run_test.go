package run

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestGuardLogsPanic(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	Guard(log, "boom", func() { panic("oops") })
	if out := buf.String(); !strings.Contains(out, "in=boom") || !strings.Contains(out, "oops") || !strings.Contains(out, "stack=") {
		t.Errorf("log %q", out)
	}
}

// Every runs at once when asked, on every trigger, survives a panic, and
// returns when the context ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	trigger := make(chan struct{})
	calls := make(chan int, 10)
	n := 0
	var wg sync.WaitGroup
	Go(&wg, slog.New(slog.DiscardHandler), "test", func() {
		Every(ctx, slog.New(slog.DiscardHandler), "test", Schedule{Now: true, Trigger: trigger}, func(context.Context) {
			n++
			calls <- n
			if n == 2 {
				panic("second call")
			}
		})
	})
	if got := <-calls; got != 1 {
		t.Fatalf("first call %d", got)
	}
	trigger <- struct{}{}
	<-calls
	trigger <- struct{}{}
	if got := <-calls; got != 3 {
		t.Fatalf("third call %d", got)
	}
	cancel()
	wg.Wait()
}

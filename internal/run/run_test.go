package run

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
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

// Reconnect runs the session again after each failure, waiting from Min,
// doubling up to Max, back to Min after a session that was established,
// and returns when the context ends.
func TestReconnect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ups := []bool{false, false, false, true, false}
	n := 0
	Reconnect(ctx, log, "test subscription", retry.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}, func(context.Context) (bool, error) {
		if n == len(ups) {
			cancel()
			return false, context.Canceled
		}
		n++
		return ups[n-1], errors.New("lost")
	})
	var waits []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.Contains(l, `msg="test subscription lost, reconnecting"`) || !strings.Contains(l, "err=lost") {
			t.Fatalf("log line %q", l)
		}
		waits = append(waits, l[strings.Index(l, " in=")+4:])
	}
	if want := []string{"1ms", "2ms", "2ms", "1ms", "2ms"}; strings.Join(waits, " ") != strings.Join(want, " ") {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

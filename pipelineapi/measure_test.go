package pipelineapi

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestMeasureLatency measures, against a real redis-server, the take
// latency (a queued job; and a job queued while a long poll waits) and the
// control-message latency (a settings change until the pipeline's stream
// delivers it). It asserts nothing about time: it logs the numbers the
// README reports. Run it with
//
//	ARCHIVEBOT_PIPELINEAPI_MEASURE=1 ARCHIVEBOT_TEST_REDIS=redis://127.0.0.1:PORT/0 \
//	  go test ./pipelineapi/ -run TestMeasureLatency -v
func TestMeasureLatency(t *testing.T) {
	if os.Getenv("ARCHIVEBOT_PIPELINEAPI_MEASURE") == "" {
		t.Skip("ARCHIVEBOT_PIPELINEAPI_MEASURE not set")
	}
	b := redistest.RealRedis(t)
	if b == nil {
		t.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	h := newHarness(t, b, Options{Rate: 100000, LogRate: 1e6, KeyRefresh: DefaultKeyRefresh, FlushInterval: DefaultFlushInterval})
	ctx := context.Background()
	const pipelines, jobsEach = 10, 20
	clients := make([]*client.Client, pipelines)
	for i := range clients {
		clients[i] = h.addKey(fmt.Sprintf("pipe%02d", i))
	}
	for i := range pipelines * jobsEach {
		h.queue(fmt.Sprintf("job%04d", i), store.KeyPending)
	}
	// Take of a queued job: the whole signed round trip.
	var takes []time.Duration
	held := map[*client.Client][]string{}
	for i := range pipelines * jobsEach {
		c := clients[i%pipelines]
		start := time.Now()
		j, err := c.Take(ctx, wire.TakeRequest{})
		takes = append(takes, time.Since(start))
		if err != nil || j == nil {
			t.Fatalf("take %d: %v %v", i, j, err)
		}
		held[c] = append(held[c], j.Ident)
	}
	// Long poll: a job queued while the take waits.
	var polls []time.Duration
	for i := range 20 {
		done := make(chan time.Duration)
		queued := make(chan time.Time, 1)
		go func() {
			j, err := clients[0].Take(ctx, wire.TakeRequest{WaitMS: 10000})
			at := time.Now()
			if err != nil || j == nil {
				t.Errorf("long poll: %v %v", j, err)
			}
			done <- at.Sub(<-queued)
		}()
		time.Sleep(time.Duration(50+i*17%200) * time.Millisecond)
		h.queue(fmt.Sprintf("late%02d", i), store.KeyPending)
		queued <- time.Now()
		polls = append(polls, <-done)
	}
	// Control messages: every pipeline's stream open, settings changed
	// one job at a time.
	var mu sync.Mutex
	got := map[string]chan int64{}
	for c, ids := range held {
		for _, id := range ids {
			got[id] = make(chan int64, 64)
		}
		go c.Control(ctx, func(ev client.Event) error {
			if s, err := ev.Settings(); err == nil && ev.Name == wire.EventSettings {
				mu.Lock()
				ch := got[s.Ident]
				mu.Unlock()
				if ch != nil { // the long polls' jobs are not followed
					ch <- s.Age
				}
			}
			return nil
		})
	}
	time.Sleep(time.Second) // the opening settings events
	for _, ch := range got {
		for len(ch) > 0 {
			<-ch
		}
	}
	var controls []time.Duration
	for i := range 100 {
		id := fmt.Sprintf("job%04d", i*(pipelines*jobsEach)/100)
		start := time.Now()
		age, err := h.store.ChangeSettings(ctx, id, store.Change{Bump: 1, Set: map[string]string{"delay_min": fmt.Sprint(300 + i)}})
		if err != nil {
			t.Fatal(err)
		}
	wait:
		for {
			select {
			case a := <-got[id]:
				if a >= age {
					break wait
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no settings event for %s", id)
			}
		}
		controls = append(controls, time.Since(start))
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	t.Logf("take of a queued job (%d): p50 %v p99 %v max %v", len(takes), pct(takes, .5), pct(takes, .99), pct(takes, 1))
	t.Logf("long-poll take, job queued while waiting (%d): p50 %v p99 %v max %v", len(polls), pct(polls, .5), pct(polls, .99), pct(polls, 1))
	t.Logf("control message, settings change to stream event (%d): p50 %v p99 %v max %v", len(controls), pct(controls, .5), pct(controls, .99), pct(controls, 1))
}

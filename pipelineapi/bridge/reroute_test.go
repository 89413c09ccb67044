package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// TestReroutedJobIsAbortedUpstream: when the node releases a job because
// an operator rerouted it, the upstream pipeline behind the bridge is
// made to abort it as after !abort (a settings message, abort_requested,
// mark_aborted, HGET aborted, mark_done), and none of its later writes
// reaches the node, which no longer holds the job for this key.
func TestReroutedJobIsAbortedUpstream(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	_, c := holding(ctx, t, node, "j5")
	ps := c.Subscribe(ctx, "archivebot:job:j5")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if v, _ := c.HGet(ctx, "j5", "delay_min").Result(); v != "250" {
		t.Fatalf("delay_min %q", v)
	}
	// The node reroutes it: the key no longer holds it.
	node.mu.Lock()
	delete(node.held, "j5")
	node.mu.Unlock()
	before := len(node.callList())
	d, _ := json.Marshal(wire.Released{Ident: "j5", Reason: wire.ReleasedRerouted + " an operator took the job back"})
	node.events <- client.Event{Name: wire.EventReleased, Data: d}

	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := ps.ReceiveMessage(rctx)
	if err != nil || msg.Payload != "1" {
		t.Fatalf("settings message %v %v; want the new age 1", msg, err)
	}
	v, err := c.HMGet(ctx, "j5", "delay_min", "settings_age", "abort_requested").Result()
	if err != nil || fmt.Sprint(v) != "[250 1 true]" {
		t.Fatalf("settings after the reroute: %v %v; want the abort requested", v, err)
	}
	if n, err := c.HIncrBy(ctx, "j5", "bytes_downloaded", 10).Result(); err != nil || n != 10 {
		t.Errorf("HINCRBY: %d %v", n, err)
	}
	e, _ := json.Marshal(map[string]any{"type": "stdout", "message": "Aborting"})
	if err := c.EvalSha(ctx, SHALog, []string{"j5"}, string(e), "updates", "j5_log").Err(); err != redis.Nil {
		t.Errorf("log script: %v", err)
	}
	if err := c.EvalSha(ctx, SHAMarkAborted, []string{"j5"}, "updates").Err(); err != redis.Nil {
		t.Fatalf("mark_aborted: %v", err)
	}
	if s, _ := c.HGet(ctx, "j5", "aborted").Result(); s != "true" {
		t.Errorf("HGET aborted after mark_aborted = %q", s)
	}
	if err := c.EvalSha(ctx, SHAMarkDone, []string{"j5"}, 172800, "updates", 1700000100, `{"aborted":true}`, "j5_log").Err(); err != redis.Nil {
		t.Fatalf("mark_done: %v", err)
	}
	for _, call := range node.callList()[before:] {
		if strings.Contains(call, "j5") {
			t.Errorf("the node got %q for a job it took back", call)
		}
	}
}

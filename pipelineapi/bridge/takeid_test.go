package bridge

import (
	"context"
	"reflect"
	"testing"
)

// A take whose answer the bridge lost (the node took the job, the answer
// did not come back) is tried again with the same take_id, so the node
// answers the job it took instead of taking another; the next take has a
// take_id of its own.
func TestTakeRetriedWithItsTakeID(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	node.queue("pending", "j1", nil)
	node.queue("pending", "j2", nil)
	node.loseTakes = 1
	_, addr := startBridge(t, node)
	c := dial(t, addr)
	if id := takeCycle(ctx, t, c, "pending"); id != "j1" {
		t.Fatalf("take after a lost answer = %q, want j1 (the job the lost take took)", id)
	}
	node.mu.Lock()
	takes := append(node.takes[:0:0], node.takes...)
	left := append([]string(nil), node.queues["pending"]...)
	node.mu.Unlock()
	if len(takes) != 2 || takes[0].TakeID == "" || takes[0].TakeID != takes[1].TakeID {
		t.Fatalf("takes sent %+v, want two with one take_id", takes)
	}
	if !reflect.DeepEqual(left, []string{"j2"}) {
		t.Fatalf("pending on the node = %v, want [j2]: the retry took another job", left)
	}
	if id := takeCycle(ctx, t, c, "pending"); id != "j2" {
		t.Fatalf("next take = %q, want j2", id)
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if n := len(node.takes); n != 3 || node.takes[2].TakeID == node.takes[0].TakeID {
		t.Fatalf("the next take reused the take_id: %+v", node.takes)
	}
}

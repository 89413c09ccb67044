package web

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// Issue 14: with HA, /readyz names this node's role and the lease holder;
// a standby (no IRC, no services) is ready when Redis answers.
func TestReadyzRole(t *testing.T) {
	b := redistest.Mini(t)
	st := store.NewStore(b.Client)
	var role atomic.Value
	role.Store("standby")
	s := New(Options{Store: st, IRCConnected: func() bool { return false }, Role: func() string { return role.Load().(string) }})
	code, body := readyz(t, s)
	if code != 200 || !body.Ready || body.Role != "standby" || body.Leader != nil {
		t.Fatalf("standby, no leader: %d %+v", code, body)
	}
	if _, _, err := st.AcquireLease(context.Background(), "node-x", time.Minute); err != nil {
		t.Fatal(err)
	}
	code, body = readyz(t, s)
	if code != 200 || body.Role != "standby" || body.Leader == nil || body.Leader.Node != "node-x" || body.Leader.Token != 1 {
		t.Fatalf("standby, node-x leads: %d %+v", code, body)
	}
	role.Store("leader")
	if code, body := readyz(t, s); code != 503 || body.Role != "leader" || body.IRC.OK {
		t.Fatalf("a leader without IRC: %d %+v", code, body)
	}
	b.Mini.Close()
	if code, body := readyz(t, s); code != 503 || body.Ready {
		t.Fatalf("standby, redis down: %d %+v", code, body)
	}
}

package web

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

func readyz(t *testing.T, s *Server) (int, readyBody) {
	t.Helper()
	r := get(t, s.Handler(), "/readyz", "")
	var b readyBody
	decode(t, r, &b)
	return r.StatusCode, b
}

// /readyz follows Redis going away and coming back, the IRC connection
// and the services' last successful cycles; /healthz stays 200.
func TestReadyz(t *testing.T) {
	b := redistest.Mini(t)
	var connected atomic.Bool
	connected.Store(true)
	var offset atomic.Int64 // how far the server's clock is ahead
	s := New(Options{Store: store.New(b.Client), IRCConnected: connected.Load,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	metrics.RegisterService("test-service", time.Minute)
	t.Cleanup(func() { metrics.UnregisterService("test-service") })

	if code, body := readyz(t, s); code != 200 || !body.Ready || !body.Redis.OK || !body.IRC.OK || !body.Services["test-service"].OK {
		t.Fatalf("fresh: %d %+v", code, body)
	}

	b.Mini.Close()
	code, body := readyz(t, s)
	if code != 503 || body.Ready || body.Redis.OK || body.Redis.Detail == "" {
		t.Fatalf("redis stopped: %d %+v", code, body)
	}
	if r := get(t, s.Handler(), "/healthz", ""); r.StatusCode != 200 {
		t.Fatalf("/healthz with redis down: %d", r.StatusCode)
	}
	// The other endpoints say the backend is unavailable.
	r := get(t, s.Handler(), "/status", "")
	expect(t, r, 503, ctJSON)

	if err := b.Mini.Restart(); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(t, s); code != 200 || !body.Ready {
		t.Fatalf("redis back: %d %+v", code, body)
	}

	connected.Store(false)
	if code, body := readyz(t, s); code != 503 || body.IRC.OK || body.IRC.Detail != "not connected" {
		t.Fatalf("irc down: %d %+v", code, body)
	}
	connected.Store(true)

	// No successful cycle for more than three intervals: not ready.
	offset.Store(int64(3*time.Minute + time.Second))
	if code, body := readyz(t, s); code != 503 || body.Services["test-service"].OK {
		t.Fatalf("stale service: %d %+v", code, body)
	}
	metrics.ServiceCycle("test-service", time.Now(), nil) // a cycle succeeds
	offset.Store(int64(2 * time.Minute))
	code, body = readyz(t, s)
	if code != 200 || body.Services["test-service"].LastSuccess == nil {
		t.Fatalf("after a successful cycle: %d %+v", code, body)
	}
}

// With HA, /readyz names this node's role and the lease holder;
// a standby (no IRC, no services) is ready when Redis answers.
func TestReadyzRole(t *testing.T) {
	b := redistest.Mini(t)
	st := store.New(b.Client)
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

// A node whose clock keeps it from leading is
// not ready, and /readyz says why.
func TestReadyzClockProblem(t *testing.T) {
	b := redistest.Mini(t)
	st := store.New(b.Client)
	var problem atomic.Value
	problem.Store("this node's clock is 30s from Redis's TIME")
	s := New(Options{Store: st, IRCConnected: func() bool { return false }, Role: func() string { return "standby" },
		ClockProblem: func() string { return problem.Load().(string) }})
	code, body := readyz(t, s)
	if code != 503 || body.Ready || body.Clock == nil || body.Clock.OK || !strings.Contains(body.Clock.Detail, "30s") {
		t.Fatalf("standby with a clock problem: %d %+v", code, body)
	}
	problem.Store("")
	if code, body := readyz(t, s); code != 200 || !body.Ready || body.Clock == nil || !body.Clock.OK {
		t.Fatalf("standby whose clock agrees: %d %+v", code, body)
	}
}

// A node whose live stream cannot read the leader's relay serves its
// viewers a stream that stopped: not ready, and /readyz says why; a
// standby that reads it is ready and says it is not the leader.
func TestReadyzRelay(t *testing.T) {
	b := redistest.Mini(t)
	st := store.New(b.Client)
	var problem atomic.Value
	problem.Store("read the stream relay: connection refused")
	s := New(Options{Store: st, IRCConnected: func() bool { return false }, Role: func() string { return "standby" },
		Relay: func() (bool, string) { p := problem.Load().(string); return p == "", p }})
	code, body := readyz(t, s)
	if code != 503 || body.Ready || body.Stream == nil || body.Stream.OK || !strings.Contains(body.Stream.Detail, "connection refused") {
		t.Fatalf("standby whose stream cannot read the relay: %d %+v", code, body)
	}
	problem.Store("")
	code, body = readyz(t, s)
	if code != 200 || !body.Ready || body.Stream == nil || !body.Stream.OK || !strings.Contains(body.Note, "not the leader") {
		t.Fatalf("standby reading the relay: %d %+v", code, body)
	}
}

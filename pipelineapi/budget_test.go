package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	refuselog "github.com/archiveteam/archivebot-go/internal/refusal"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// updateHead is the request line and headers of an update announcing a
// body of n bytes, signed-looking for key (the signature is checked only
// once the body is read).
func updateHead(key string, n int64) string {
	return strings.Replace(headOnly(key, time.Now(), n), "POST /v1/jobs/take ", "POST /v1/jobs/somejob/update ", 1)
}

func bodyBytesHeld() float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "archivebot_pipelineapi_body_bytes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestBodyBudgets: at the shipped defaults (32 MiB in total, 8 MiB per
// address and per key), bodies of 4 MiB that strangers send with a
// registered key's name are held only within the budgets; one more is
// refused 503 body_budget before it is read (the node does not wait for
// it), naming the budget, counted and logged; a legitimate take (a small
// body) is still answered while every budget is spent.
func TestBodyBudgets(t *testing.T) {
	b := redistest.Mini(t)
	// No read timeout: only the early refusal can answer.
	h := newHarness(t, b, Options{ReadTimeout: -1, IdleTimeout: -1})
	addr := h.serve()
	for _, k := range []string{"good", "other", "k3", "k4", "k5", "k6", "k7", "k8", "k9"} {
		h.addKey(k)
	}
	legit := h.addKeyAt("http://"+addr, "legit")
	const four = 4 << 20
	held := bodyBytesHeld()
	hold := func(local, key string) net.Conn {
		c := dialFrom(t, local, addr)
		fmt.Fprint(c, updateHead(key, four)+"{")
		return c
	}
	refused := func(local, key, which string) {
		t.Helper()
		before := refusals("-", which)
		c := dialFrom(t, local, addr)
		fmt.Fprint(c, updateHead(key, four))
		got := closedByNode(t, c, "a body over "+which)
		if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, `"error":"body_budget"`) || !strings.Contains(got, which) {
			t.Fatalf("a 4 MiB body over %s from %s (key %s): got %q, want 503 body_budget naming %s", which, local, key, got, which)
		}
		if refusals("-", which) != before+1 {
			t.Errorf("the refusal over %s is not counted", which)
		}
	}
	// Two bodies from one address and key: its 8 MiB.
	a1 := hold("127.0.0.1", "good")
	hold("127.0.0.1", "good")
	testproc.Eventually(t, "8 MiB of bodies held", func() bool { return bodyBytesHeld()-held == 2*four })
	refused("127.0.0.1", "other", "body_budget_per_addr")
	refused("127.0.0.2", "good", "body_budget_per_key")
	// Six more addresses and keys: 32 MiB in total.
	for i := 3; i <= 8; i++ {
		hold(fmt.Sprintf("127.0.0.%d", i), fmt.Sprintf("k%d", i))
	}
	testproc.Eventually(t, "32 MiB of bodies held", func() bool { return bodyBytesHeld()-held == 8*four })
	refused("127.0.0.9", "k9", "body_budget")
	// A pipeline's take needs none of the budget.
	if _, err := legit.Take(context.Background(), wire.TakeRequest{}); err != nil {
		t.Fatalf("a legitimate take while the budgets are spent: %v", err)
	}
	// A body's bytes come back when its request ends.
	a1.Close()
	testproc.Eventually(t, "a closed request's bytes released", func() bool { return bodyBytesHeld()-held == 7*four })
}

// TestBodyReadAllocatesOnce: a 4 MiB body costs the node about 4 MiB of
// allocations, not the doubling buffer of a read to EOF (which grew to
// 8 MiB and beyond: after a flood the node kept the larger buffers).
func TestBodyReadAllocatesOnce(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{})
	h.addKey("good")
	addr := h.serve()
	body := strings.Repeat("x", 4<<20)
	head := strings.Replace(updateHead("good", int64(len(body))), "Host: x\r\n", "Host: x\r\nConnection: close\r\n", 1)
	req := []byte(head + body) // built once: the test's own allocations stay out of the count
	send := func() {
		c := dialFrom(t, "127.0.0.1", addr)
		c.Write(req)
		if got := closedByNode(t, c, "a forged update"); !strings.Contains(got, "bad_signature") {
			t.Fatalf("a forged update: got %q, want 401 bad_signature", got)
		}
	}
	send() // warm up
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const n = 4
	for range n {
		send()
	}
	runtime.ReadMemStats(&m1)
	per := float64(m1.TotalAlloc-m0.TotalAlloc) / n / (1 << 20)
	t.Logf("%.1f MiB allocated per 4 MiB body", per)
	if per > 6 {
		t.Errorf("a 4 MiB body cost %.1f MiB of allocations; want about 4", per)
	}
}

// TestAddrClass: an IPv4 address counts alone, an IPv6 address by its
// /64 (one host holds a whole /64).
func TestAddrClass(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"2001:db8:1:2::", "2001:db8:1:2:abcd::9"},
	} {
		if addrClass(c.a) != addrClass(c.b) {
			t.Errorf("%s and %s are one /64; classes %q and %q", c.a, c.b, addrClass(c.a), addrClass(c.b))
		}
	}
	for _, c := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"127.0.0.1", "127.0.0.2"},
		{"::ffff:127.0.0.1", "::ffff:127.0.0.2"},
	} {
		if addrClass(c.a) == addrClass(c.b) {
			t.Errorf("%s and %s counted as one address (%q)", c.a, c.b, addrClass(c.a))
		}
	}
}

// lockedBuf is a log destination tests read while the server writes.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRefusalsLoggedWithCounts: a flood of refusals leaves a trace an
// operator can read: the first of a class at once, then, when the period
// ends, one line with how many were refused since, from how many
// addresses, and the busiest. The old node logged one line per key and
// reason every 10 s, without counts, and nothing of the rest.
func TestRefusalsLoggedWithCounts(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{})
	var buf lockedBuf
	h.srv.refusals = refuselog.New(slog.New(slog.NewTextHandler(&buf, nil)), time.Second)
	_, priv, _ := ed25519.GenerateKey(nil)
	c, _ := client.New(h.hs.URL, "nobody", priv)
	for range 5 {
		_, err := c.Take(context.Background(), wire.TakeRequest{})
		wantCode(t, err, 401, "unknown_key")
	}
	testproc.Eventually(t, "the period's line", func() bool { return strings.Contains(buf.String(), "refused=4") })
	out := buf.String()
	for _, want := range []string{"class=api_unknown_key refused=1 sources=1", "class=api_unknown_key refused=4 sources=1 top=127.0.0.1×4", "named_key=nobody"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

package web

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// limitedServer serves New(opt) on a loopback port with caps lim; it
// returns the server, its address and its log.
func limitedServer(t *testing.T, lim ConnLimits, hub HubOptions) (*Server, string, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	hub.Logger = log
	h := NewHub(hub)
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	srv := New(Options{Store: store.New(redistest.Mini(t).Client), Hub: h, Logger: log, Conns: lim})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; h.shutdown() })
	return srv, ln.Addr().String(), logs
}

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// healthzOn sends a GET /healthz on c and returns the status line and body.
func healthzOn(t *testing.T, c net.Conn) (string, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err.Error()
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	return res.Status, string(b)
}

// The web and stream listeners cap open connections, in total and per
// address (an IPv6 /64 counting as one): past a cap a connection is
// answered 503 with the cap's name at once and closed, counted and
// logged; a closed connection frees its place; a live-stream WebSocket
// holds one like any request. (Before, 3,000 anonymous WebSockets were
// held: fds 64 → 3,064.)
func TestWebConnectionCaps(t *testing.T) {
	srv, addr, logs := limitedServer(t, ConnLimits{Total: 4, PerAddr: 2}, HubOptions{})
	a1 := dialFrom(t, "127.0.0.1", addr)
	if st, _ := healthzOn(t, a1); !strings.HasPrefix(st, "200") {
		t.Fatalf("first connection: %q", st)
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/stream?v=2", nil)
	if err != nil {
		t.Fatalf("a stream within the caps: %v", err)
	}
	defer ws.Close()
	// 127.0.0.1 holds 2 (a request's keep-alive connection, a stream).
	if st, b := healthzOn(t, dialFrom(t, "127.0.0.1", addr)); !strings.HasPrefix(st, "503") || !strings.Contains(b, "max_conns_per_addr = 2") {
		t.Errorf("a third connection from one address: %q %q", st, b)
	}
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		if st, _ := healthzOn(t, dialFrom(t, src, addr)); !strings.HasPrefix(st, "200") {
			t.Fatalf("connection from %s: %q", src, st)
		}
	}
	if st, b := healthzOn(t, dialFrom(t, "127.0.0.4", addr)); !strings.HasPrefix(st, "503") || !strings.Contains(b, "max_conns = 4") {
		t.Errorf("a fifth connection: %q %q", st, b)
	}
	// A closed connection frees its place.
	a1.Close()
	testproc.Eventually(t, "the closed connection released", func() bool { return srv.conns.open() == 3 })
	if st, _ := healthzOn(t, dialFrom(t, "127.0.0.4", addr)); !strings.HasPrefix(st, "200") {
		t.Errorf("after a close: %q", st)
	}
	testproc.Eventually(t, "both refusals logged", func() bool {
		l := logs.String()
		return strings.Contains(l, "class=web_conns_max_conns_per_addr") && strings.Contains(l, "class=web_conns_max_conns ")
	})
}

func TestAddrKeyGroupsIPv6By64(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.1:80", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
	} {
		a, _ := net.ResolveTCPAddr("tcp", c.addr)
		if got := addrKey(a); got != c.want {
			t.Errorf("addrKey(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// A stream that answers every ping does not stay for ever: at its
// maximum age it is closed with 1001 (going away), and counted; the
// dashboard reconnects.
func TestStreamMaxAge(t *testing.T) {
	_, addr, _ := limitedServer(t, ConnLimits{}, HubOptions{MaxStreamAge: 200 * time.Millisecond})
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/stream?v=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "stream_max_age") {
			t.Fatalf("the stream ended with %v, want a close 1001 naming http.stream_max_age", err)
		}
		return
	}
}

// BenchmarkStreamConnMemory measures what one idle live-stream client
// costs the node (heap bytes and goroutines, over 500 clients), the
// figure behind http.max_conns's default (doc/benchmarks.md).
func BenchmarkStreamConnMemory(b *testing.B) {
	const n = 500
	logs := io.Discard
	log := slog.New(slog.NewTextHandler(logs, nil))
	h := NewHub(HubOptions{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	srv := New(Options{Store: store.New(redistest.Mini(b).Client), Hub: h, Logger: log})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ctx, ln)
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		conns := make([]*websocket.Conn, 0, n)
		for j := 0; j < n; j++ {
			c, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/stream?v=2", nil)
			if err != nil {
				b.Fatal(err)
			}
			c.ReadMessage() // hello
			conns = append(conns, c)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		// Both ends live in this process: the client's half is counted
		// too, so the node's share is below these figures.
		b.ReportMetric(float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse)/n, "bytes/conn")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/conn")
		for _, c := range conns {
			c.Close()
		}
	}
	h.shutdown()
}

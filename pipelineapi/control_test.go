package pipelineapi

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

func (h *harness) streams(key string) int {
	t := h.srv.currentTerm()
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keyStateLocked(key).streams)
}

// TestControlStreamStalledReaderClosed: a client that opens
// its control stream and stops reading loses it once a write has waited
// write_timeout, and its slot is free again. Before, the writer blocked
// for ever: no bye or revocation reached it, and the slot stayed counted.
func TestControlStreamStalledReaderClosed(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{WriteTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	c := h.holding("alpha", "j")
	// Big settings events: 256 ignore patterns of 4 KiB (1 MiB each).
	for i := range 256 {
		b.Client.SAdd(ctx, store.KeyIgnores("j"), fmt.Sprintf("%d-%s", i, strings.Repeat("x", 4096)))
	}
	hs := httptest.NewServer(h.srv.Handler())
	defer hs.Close()
	req, err := c.NewRequest(ctx, "GET", wire.PathControl, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n", wire.PathControl)
	for _, k := range []string{wire.HeaderKey, wire.HeaderTimestamp, wire.HeaderNonce, wire.HeaderSignature} {
		fmt.Fprintf(conn, "%s: %s\r\n", k, req.Header.Get(k))
	}
	fmt.Fprint(conn, "\r\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("control stream: %q %v", line, err)
	}
	testproc.Eventually(t, "the stream registered", func() bool { return h.streams("alpha") == 1 })
	// The client reads nothing more; settings changes fill the socket.
	for i := 0; h.streams("alpha") != 0; i++ {
		if i > 200 {
			t.Fatalf("the stream of a client that stopped reading is still open after %d settings changes", i)
		}
		if _, err := h.store.ChangeSettings(ctx, "j", store.Change{Bump: 1, Set: map[string]string{"delay_min": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestControlStreamKeyReplacedBeforeRegistration: a stream
// whose request was verified with a key that was replaced before the
// stream registered gets a bye at once (before, only a key removed
// altogether was noticed there).
func TestControlStreamKeyReplacedBeforeRegistration(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{})
	h.addKey("alpha")
	old, _, _ := ed25519.GenerateKey(nil) // what the request was verified with
	ctx, cancel := context.WithTimeout(context.Background(), testproc.WaitFor)
	defer cancel()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", wire.PathControl, nil).WithContext(ctx)
	if rf := h.srv.control(&request{w: w, r: r, t: h.srv.currentTerm(), key: "alpha", pub: old, op: "control"}); rf != nil {
		t.Fatal(rf)
	}
	if ctx.Err() != nil || !strings.Contains(w.Body.String(), "event: bye") || !strings.Contains(w.Body.String(), "revoked_key") {
		t.Fatalf("stream of a replaced key: %q (err %v), want a bye revoked_key at once", w.Body.String(), ctx.Err())
	}
}

package pipelineapi

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// serve runs h.srv.Serve (the listener with its limits) on a loopback
// port until the test ends and returns its address.
func (h *harness) serve() string {
	h.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.srv.Serve(ctx, ln, "", "") }()
	h.t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// dialFrom opens a connection to addr from the loopback address local
// (127.0.0.2 is another remote address for the node).
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByNode reads c until the node closes it (what it answered
// first), failing when the node keeps it open for 20 s: the old code
// kept such connections for ever.
func closedByNode(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the node kept the connection open (read %q)", what, b)
	}
	return string(b)
}

func connRefusals(limit string) float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "archivebot_pipelineapi_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, p := range m.GetLabel() {
				if p.GetName() == "limit" && p.GetValue() == limit {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// headOnly is the request line and headers of a take with a body of n
// bytes announced, signed-looking for key (the signature is not checked
// before the body).
func headOnly(key string, ts time.Time, n int64) string {
	sig := strings.Repeat("A", 86) + "=="
	return fmt.Sprintf("POST /v1/jobs/take HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"%s: %s\r\n%s: %d\r\n%s: %s\r\n%s: %s\r\n\r\n",
		n, wire.HeaderKey, key, wire.HeaderTimestamp, ts.Unix(), wire.HeaderNonce, strings.Repeat("ab", 16), wire.HeaderSignature, sig)
}

// TestListenerConnectionCaps: connections over max_conns_per_addr (from
// one address) and over max_conns (in total, every address holding its
// fair share) are refused at once with a 503 that names the cap, and
// counted; others still get in.
func TestListenerConnectionCaps(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{MaxConns: 3, MaxConnsPerAddr: 2, ReadTimeout: -1, IdleTimeout: -1})
	addr := h.serve()
	dialFrom(t, "127.0.0.1", addr)
	dialFrom(t, "127.0.0.1", addr)
	testproc.Eventually(t, "two connections open", func() bool { return h.srv.openConns() == 2 })
	before := connRefusals("max_conns_per_addr")
	got := closedByNode(t, dialFrom(t, "127.0.0.1", addr), "a third connection from one address")
	if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "max_conns_per_addr") {
		t.Fatalf("third connection from one address: got %q, want a 503 naming max_conns_per_addr", got)
	}
	if connRefusals("max_conns_per_addr") != before+1 {
		t.Errorf("the refusal is not counted")
	}
	dialFrom(t, "127.0.0.2", addr)
	testproc.Eventually(t, "three connections open", func() bool { return h.srv.openConns() == 3 })
	// 127.0.0.1 holds two: a newcomer from elsewhere takes one's place
	// (TestListenerFairShare); then every address holds one.
	dialFrom(t, "127.0.0.3", addr)
	testproc.Eventually(t, "one connection each", func() bool {
		return h.srv.openConns() == 3 && connRefusals("evicted") > 0
	})
	before = connRefusals("max_conns")
	got = closedByNode(t, dialFrom(t, "127.0.0.4", addr), "a fourth address")
	if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "max_conns") {
		t.Fatalf("a fourth address when three hold one each: got %q, want a 503 naming max_conns", got)
	}
	if connRefusals("max_conns") != before+1 {
		t.Errorf("the refusal is not counted")
	}
	if n := h.srv.openConns(); n != 3 {
		t.Errorf("%d connections counted open, want 3", n)
	}
}

// TestListenerFairShare: when max_conns is reached by a few addresses
// (strangers holding every slot), a connection from an address holding
// fewer gets in, in place of the busiest address's newest connection,
// which the node closes; the eviction is counted. The old listener
// refused the newcomer 503 too_many_connections: a pipeline shut out.
func TestListenerFairShare(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{MaxConns: 4, MaxConnsPerAddr: 4, ReadTimeout: -1, IdleTimeout: -1})
	addr := h.serve()
	var held []net.Conn
	for range 4 {
		held = append(held, dialFrom(t, "127.0.0.1", addr))
	}
	testproc.Eventually(t, "four connections open", func() bool { return h.srv.openConns() == 4 })
	c := h.addKeyAt("http://"+addr, "pipe", client.WithHTTPClient(&http.Client{Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}),
		client.WithTakeRetry(client.Retry{Attempts: 1}))
	before := connRefusals("evicted")
	if _, err := c.Take(context.Background(), wire.TakeRequest{}); err != nil {
		t.Fatalf("a pipeline's take while one address holds every connection: %v", err)
	}
	if connRefusals("evicted") != before+1 {
		t.Errorf("the eviction is not counted")
	}
	// The busiest address's newest connection was the one closed.
	if got := closedByNode(t, held[3], "the evicted connection"); got != "" {
		t.Errorf("the evicted connection got %q, want nothing (closed)", got)
	}
	if n := h.srv.openConns(); n != 4 {
		t.Errorf("%d connections counted open, want 4", n)
	}
}

// TestListenerSlowAndIdleClosed: a request whose body trickles in, one
// that sends its headers and nothing more, and a kept-alive connection
// without a second request are closed by the node (read_timeout,
// idle_timeout). The old listener kept all three open for ever.
func TestListenerSlowAndIdleClosed(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{ReadTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	h.addKey("slow")
	addr := h.serve()

	slow := dialFrom(t, "127.0.0.1", addr)
	fmt.Fprint(slow, headOnly("slow", time.Now(), 1000))
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte now and then, as the attack did
		for {
			if _, err := slow.Write([]byte(" ")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	closedByNode(t, slow, "a body trickling in")

	silent := dialFrom(t, "127.0.0.1", addr)
	fmt.Fprint(silent, headOnly("slow", time.Now(), 1000))
	closedByNode(t, silent, "headers and no body")

	idle := dialFrom(t, "127.0.0.1", addr)
	fmt.Fprint(idle, "GET /healthz-not-here HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(idle)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	idle.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle kept-alive connection: got %v, want the node to close it", err)
	}
	testproc.Eventually(t, "every connection released", func() bool { return h.srv.openConns() == 0 })
}

// TestRefusedBeforeBody: an unknown or revoked key, a stale timestamp and
// a Content-Length over the limit are answered before the body is read
// (the node does not wait for it) and the connection is closed; the
// refusal says what was wrong and nothing is written.
func TestRefusedBeforeBody(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		// No read timeout: only the early refusal can answer these.
		h := newHarness(t, b, Options{ReadTimeout: -1, IdleTimeout: -1})
		h.addKey("good")
		h.addKey("gone")
		if err := h.store.RevokePipelineKey(context.Background(), "gone"); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(t, "the revocation", func() bool { _, r := h.srv.currentTerm().publicKey("gone"); return r })
		addr := h.serve()
		before := h.dump()
		for _, c := range []struct {
			what, head, want string
		}{
			{"unknown key", headOnly("nobody", time.Now(), 1000), "401 Unauthorized"},
			{"revoked key", headOnly("gone", time.Now(), 1000), "401 Unauthorized"},
			{"stale timestamp", headOnly("good", time.Now().Add(-time.Hour), 1000), "401 Unauthorized"},
			{"Content-Length over the limit", headOnly("good", time.Now(), wire.MaxBody+1), "413 Request Entity Too Large"},
		} {
			conn := dialFrom(t, "127.0.0.1", addr)
			fmt.Fprint(conn, c.head)
			got := closedByNode(t, conn, c.what)
			if !strings.HasPrefix(got, "HTTP/1.1 "+c.want) {
				t.Errorf("%s: got %q, want %s", c.what, got, c.want)
			}
			code := map[string]string{"unknown key": "unknown_key", "revoked key": "revoked_key",
				"stale timestamp": "stale_timestamp", "Content-Length over the limit": "too_large"}[c.what]
			if !strings.Contains(got, `"error":"`+code+`"`) {
				t.Errorf("%s: got %q, want error %s", c.what, got, code)
			}
		}
		h.sameDump(before, "refusals before the body")
	})
}

// TestUnverifiedRefusalsNotTheKeys: requests that name a real key but are
// not verified (a forged signature, a stale timestamp, a replay) count
// under key "-" and leave the key's statistics alone, and a replay does
// not spend the key's rate budget (the rate limit ran before
// the nonce check, and refusals counted under any registered name).
func TestUnverifiedRefusalsNotTheKeys(t *testing.T) {
	eachHarness(t, Options{Rate: 1}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.addKey("victim")
		_, priv, _ := ed25519.GenerateKey(nil)
		forger, _ := client.New(h.hs.URL, "victim", priv)
		stale, _ := client.New(h.hs.URL, "victim", priv, client.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
		dashSig, dashStale := refusals("-", "bad_signature"), refusals("-", "stale_timestamp")
		keySig, keyStale := refusals("victim", "bad_signature"), refusals("victim", "stale_timestamp")
		for range 5 {
			_, err := forger.Take(ctx, wire.TakeRequest{})
			wantCode(t, err, 401, "bad_signature")
			_, err = stale.Take(ctx, wire.TakeRequest{})
			wantCode(t, err, 401, "stale_timestamp")
		}
		if refusals("-", "bad_signature")-dashSig != 5 || refusals("-", "stale_timestamp")-dashStale != 5 {
			t.Errorf("unverified refusals not counted under key \"-\"")
		}
		if refusals("victim", "bad_signature") != keySig || refusals("victim", "stale_timestamp") != keyStale {
			t.Errorf("unverified refusals counted under the key they named")
		}

		// The key's budget is 2 requests at once (rate 1, burst 2): one
		// take, ten replays of it, and the pipeline's next take still
		// gets through.
		req, err := c.NewRequest(ctx, "POST", wire.PathTake, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		replays := make([]*http.Request, 10)
		for i := range replays {
			replays[i] = req.Clone(ctx)
			replays[i].Body = io.NopCloser(strings.NewReader("{}"))
		}
		if err := c.Send(req, nil); err != nil {
			t.Fatal(err)
		}
		dashReplay := refusals("-", "replayed_nonce")
		for _, r := range replays {
			wantCode(t, c.Send(r, nil), 401, "replayed_nonce")
		}
		if refusals("-", "replayed_nonce")-dashReplay != 10 {
			t.Errorf("replays not counted under key \"-\"")
		}
		if _, err := c.Take(ctx, wire.TakeRequest{}); err != nil {
			t.Fatalf("the pipeline's own take after replays: %v (replays spent its budget)", err)
		}
		var k store.PipelineKey
		testproc.Eventually(t, "the key's statistics written", func() bool {
			ks, _ := h.store.ListPipelineKeys(ctx)
			for _, x := range ks {
				if x.Name == "victim" {
					k = x
				}
			}
			return !k.LastSeen.IsZero()
		})
		if k.Refusals != 0 || k.LastRefusal != "" {
			t.Errorf("key statistics: %d refusals, last %q; want none (no verified request was refused)", k.Refusals, k.LastRefusal)
		}
	})
}

// TestLongPollOutlivesReadTimeout: a long-poll take waits past
// read_timeout (net/http cancels a request's context when its read
// deadline passes during the handler) and gets the job queued then.
func TestLongPollOutlivesReadTimeout(t *testing.T) {
	b := redistest.Mini(t)
	h := newHarness(t, b, Options{ReadTimeout: 200 * time.Millisecond, TakePoll: time.Hour})
	addr := h.serve()
	c := h.addKeyAt("http://"+addr, "alpha")
	got := make(chan string, 1)
	go func() {
		j, err := c.Take(context.Background(), wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
		if err != nil || j == nil {
			got <- fmt.Sprint("no job: ", j, err)
			return
		}
		got <- j.Ident
	}()
	testproc.Eventually(t, "the take waiting", func() bool { return h.waitingTakes("alpha") == 1 })
	time.Sleep(600 * time.Millisecond) // past the read timeout
	h.queue("late", store.KeyPending)
	if id := <-got; id != "late" {
		t.Fatalf("a take waiting past read_timeout: %s, want the job queued then", id)
	}
}

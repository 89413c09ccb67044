package bridge_test

// `archivebot bridge` checks its key with the node before it serves
//.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// runBridge runs `archivebot bridge -key key -node node` until it exits
// or says it is serving (which fails the test: it must not serve).
func runBridge(t *testing.T, key, node string) (code int, stderr string) {
	t.Helper()
	var out, errb testproc.Buffer
	done := make(chan int, 1)
	go func() {
		done <- bridge.Run([]string{"-key", key, "-node", node, "-listen", "127.0.0.1:0"}, &out, &errb)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case code := <-done:
			if strings.Contains(out.String(), "serving") {
				t.Errorf("-node %s: said it serves: %q", node, out.String())
			}
			return code, errb.String()
		case <-time.After(10 * time.Millisecond):
		}
		if strings.Contains(out.String(), "serving") || time.Now().After(deadline) {
			t.Fatalf("-node %s: serving without a word about the key: stdout %q, stderr %q", node, out.String(), errb.String())
		}
	}
}

func TestStartChecksNode(t *testing.T) {
	ctx := context.Background()
	rb := redistest.RealOrMini(t)
	st := store.New(rb.Client)
	hs := apitest.Serve(t, pipelineapi.Options{Store: st, Sink: &sink{}})
	dir := t.TempDir()
	newKey := func(name string) (string, bridge.KeyFile) {
		path := filepath.Join(dir, name)
		k, err := bridge.InitKey(path, name)
		if err != nil {
			t.Fatal(err)
		}
		return path, k
	}
	// Waits until the server's view of the key answers code.
	known := func(k bridge.KeyFile, url, code string) {
		cl, err := client.New(url, k.Name, k.Priv)
		if err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(t, "the server to answer "+code+" for "+k.Name, func() bool {
			_, err := cl.Job(ctx, "none")
			return client.IsCode(err, code)
		})
	}

	unknown, uk := newKey("vol-unknown")
	known(uk, hs.URL, "unknown_key")
	code, msg := runBridge(t, unknown, hs.URL)
	if code != 1 || !strings.Contains(msg, "does not know key \"vol-unknown\"") ||
		!strings.Contains(msg, "archivebot pipeline-key add vol-unknown "+uk.Public()) {
		t.Errorf("unknown key: exit %d, %q", code, msg)
	}

	revoked, rk := newKey("vol-revoked")
	if err := st.AddPipelineKey(ctx, rk.Name, rk.Public()); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokePipelineKey(ctx, rk.Name); err != nil {
		t.Fatal(err)
	}
	known(rk, hs.URL, "revoked_key")
	if code, msg := runBridge(t, revoked, hs.URL); code != 1 || !strings.Contains(msg, "revoked key \"vol-revoked\"") {
		t.Errorf("revoked key: exit %d, %q", code, msg)
	}

	// Another public key registered under the name.
	other, ok := newKey("vol-other")
	_, reg := newKey("vol-other-registered")
	if err := st.AddPipelineKey(ctx, ok.Name, reg.Public()); err != nil {
		t.Fatal(err)
	}
	known(ok, hs.URL, "bad_signature")
	if code, msg := runBridge(t, other, hs.URL); code != 1 || !strings.Contains(msg, "another public key") {
		t.Errorf("another key registered: exit %d, %q", code, msg)
	}

	// A node whose clock is 5 minutes ahead.
	good, gk := newKey("vol-good")
	if err := st.AddPipelineKey(ctx, gk.Name, gk.Public()); err != nil {
		t.Fatal(err)
	}
	ahead := apitest.Serve(t, pipelineapi.Options{Store: st, Sink: &sink{}, Now: func() time.Time { return time.Now().Add(5 * time.Minute) }})
	known(gk, ahead.URL, "stale_timestamp")
	if code, msg := runBridge(t, good, ahead.URL); code != 1 || !strings.Contains(msg, "clock") {
		t.Errorf("clock 5 min behind the node's: exit %d, %q", code, msg)
	}

	// The node's web port, nothing listening, no scheme.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		fmt.Fprintf(w, "{\"error\":\"method %s not allowed: this API is read-only (GET)\"}\n", r.Method)
	}))
	defer web.Close()
	if code, msg := runBridge(t, good, web.URL); code != 1 || !strings.Contains(msg, "not its web (http.listen) port") {
		t.Errorf("the web port: exit %d, %q", code, msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	if code, msg := runBridge(t, good, closed); code != 1 || !strings.Contains(msg, "cannot reach the node") {
		t.Errorf("nothing listening: exit %d, %q", code, msg)
	}
	var out, errb bytes.Buffer
	if code := bridge.Run([]string{"-key", good, "-node", strings.TrimPrefix(hs.URL, "http://")}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "want http://HOST:PORT") {
		t.Errorf("-node without http://: exit %d, %q", code, errb.String())
	}

	// The key the node knows: nothing to say.
	cl, err := client.New(hs.URL, gk.Name, gk.Priv)
	if err != nil {
		t.Fatal(err)
	}
	known(gk, hs.URL, "not_held")
	if warn, err := bridge.CheckNode(ctx, cl, hs.URL, gk); warn != "" || err != nil {
		t.Errorf("CheckNode of a known key: %q, %v", warn, err)
	}
}

// laterKnown answers unknown_key until its n-th question.
type laterKnown struct {
	n, asked int
	name     string
}

func (l *laterKnown) WhoAmI(ctx context.Context) (wire.WhoAmI, error) {
	l.asked++
	if l.asked < l.n {
		return wire.WhoAmI{}, &client.Error{Status: 401, Code: "unknown_key", Reason: "no key named " + l.name + " is registered"}
	}
	return wire.WhoAmI{Key: l.name, NodeTime: time.Now().UnixMilli()}, nil
}

// TestStartWaitsForANewKey: a key registered a moment before the bridge
// starts is not known to the node until its next read of the keys (every
// 250 ms); the start check asks again for a few seconds instead of
// refusing to serve. The chaos soak, which registers a bridge's key and
// starts it at once, met the refusal.
func TestStartWaitsForANewKey(t *testing.T) {
	k, err := bridge.InitKey(filepath.Join(t.TempDir(), "new.key"), "vol-new")
	if err != nil {
		t.Fatal(err)
	}
	node := &laterKnown{n: 3, name: "vol-new"}
	if warn, err := bridge.CheckNode(context.Background(), node, "http://node", k); err != nil || warn != "" {
		t.Fatalf("warn %q, err %v; want serving once the node knows the key", warn, err)
	}
	if node.asked != 3 {
		t.Errorf("asked %d times, want 3", node.asked)
	}
}

package soak

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// TestProxyRecordsRefusedTakes: the API proxy records each take the
// node refused (Outcome refused, the error's code, the status, the key
// that asked), invariant 3's evidence that a revoked key asked again
// and got nothing; the pipeline still gets the node's answer as it was.
func TestProxyRecordsRefusedTakes(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"revoked_key","reason":"key api03 was revoked"}`)
	}))
	defer node.Close()
	dir := t.TempDir()
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, rec: rec, jobs: newJobList(10)}
	u, _ := url.Parse(node.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = s.proxyRecord
	proxy := httptest.NewServer(rp)
	defer proxy.Close()
	req, _ := http.NewRequest("POST", proxy.URL+wire.PathTake, bytes.NewReader([]byte(`{}`)))
	req.Header.Set(wire.HeaderKey, "api03")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(body, []byte("revoked_key")) {
		t.Errorf("the pipeline got %d %s, want the node's 401 revoked_key", resp.StatusCode, body)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var refused []history.Event
	for _, e := range events {
		if history.Refused(e) {
			refused = append(refused, e)
		}
	}
	if len(refused) != 1 {
		t.Fatalf("refused takes recorded: %+v, want one", events)
	}
	if e := refused[0]; e.Target != "api03" || e.Text != "revoked_key" || e.Num["status"] != 401 || e.Via != history.ViaProxy {
		t.Errorf("refused take recorded as %+v", e)
	}
}

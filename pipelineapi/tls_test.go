package pipelineapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testtls"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// pipelines.tls_cert / tls_key: the listener serves HTTPS and the signed
// requests work over it.
func TestServeTLS(t *testing.T) {
	certs := testtls.New(t, t.TempDir())
	h := newHarness(t, redistest.Mini(t), Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ctx, ln, certs.Cert, certs.Key) }()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.Roots}}}
	c := h.addKeyAt("https://"+ln.Addr().String(), "alpha", client.WithHTTPClient(hc))
	if _, err := c.Report(ctx, map[string]string{"version": "1"}); err != nil {
		t.Fatalf("report over TLS: %v", err)
	}
	// Plain HTTP to the TLS listener is not served.
	if resp, err := http.Get("http://" + ln.Addr().String() + wire.PathTake); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP answered 200 on the TLS listener")
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/internal/testtls"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// pipelines.tls_cert / tls_key: the listener serves HTTPS and the signed
// requests work over it.
func TestServeTLS(t *testing.T) {
	b := redistest.Mini(t)
	certs := testtls.New(t, t.TempDir())

	st := store.NewStore(b.Client)
	pub, priv, _ := ed25519.GenerateKey(nil)
	if err := st.AddPipelineKey(context.Background(), "alpha", wire.FormatPublicKey(pub)); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, certs.Cert, certs.Key) }()
	go s.Run(ctx)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.Roots}}}
	c, err := client.New("https://"+ln.Addr().String(), "alpha", priv, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	testproc.Eventually(t, "the server to lead", func() bool {
		_, err = c.Report(ctx, map[string]string{"version": "1"})
		return err == nil || !client.IsCode(err, "not_leader")
	})
	if err != nil {
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

package pipelineapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// pipelines.tls_cert / tls_key: the listener serves HTTPS and the signed
// requests work over it.
func TestServeTLS(t *testing.T) {
	b := redistest.Mini(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

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
	go func() { served <- s.Serve(ctx, ln, certFile, keyFile) }()
	go s.Run(ctx)
	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
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

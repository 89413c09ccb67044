package irc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

// testCA writes a fresh CA and a server certificate for 127.0.0.1 and
// localhost signed by it into dir; it returns the file names.
func testCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "archivebot-go test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "irc.test"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// TestTLS: ircs:// to ngircd with a certificate from a private CA, trusted
// through irc.tls_ca; without it the certificate is refused.
func TestTLS(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile := testCA(t, irctest.ReadableTempDir(t))
	n := irctest.StartNgircd(t, irctest.NgircdOptions{CertFile: certFile, KeyFile: keyFile})

	// Without the CA the handshake fails verification.
	noCA := New(testIRCConfig(n.TLSURL(), "#test"), nil, nil)
	srv, err := noCA.dialer()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	err = tls.Client(raw, srv.tls).HandshakeContext(context.Background())
	raw.Close()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("handshake without the CA: %v, want a certificate error", err)
	}

	// A bad CA file is a configuration error, reported by Run.
	bad := testIRCConfig(n.TLSURL(), "#test")
	bad.TLSCA = filepath.Join(t.TempDir(), "missing.pem")
	if err := New(bad, nil, nil).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "irc.tls_ca") {
		t.Errorf("Run with a missing CA file: %v", err)
	}

	cfg := testIRCConfig(n.TLSURL(), "#test")
	cfg.TLSCA = caFile
	u := irctest.Dial(t, n.Addr(), "tina")
	u.Join("#test")
	h := startBot(t, cfg, nil)
	u.WaitBotIn("ArchiveBot", "#test")
	if r := strings.Join(u.Ask("ArchiveBot", "#test", "!status"), ""); !strings.HasPrefix(r, "Job status:") {
		t.Errorf("!status over TLS: %q", r)
	}
	if !strings.Contains(n.LogText(), "initialized TLS") {
		t.Error("ngircd did not log a TLS connection")
	}
	_ = h
}

package irc

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testtls"
)

// TestTLS: ircs:// to ngircd with a certificate from a private CA, trusted
// through irc.tls_ca; without it the certificate is refused.
func TestTLS(t *testing.T) {
	t.Parallel()
	certs := testtls.New(t, irctest.ReadableTempDir(t))
	n := irctest.StartNgircd(t, irctest.NgircdOptions{CertFile: certs.Cert, KeyFile: certs.Key})

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
	cfg.TLSCA = certs.CA
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

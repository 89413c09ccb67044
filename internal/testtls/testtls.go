// Package testtls makes the certificates TLS tests serve with: a fresh
// private CA and a server certificate for 127.0.0.1 and localhost signed by
// it, written as PEM files, so a test can hand the files to a server and
// trust the CA on the client.
package testtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files New wrote, and the CA as a pool a client trusts.
type Files struct {
	CA   string // the CA certificate
	Cert string // the server certificate, for 127.0.0.1 and localhost
	Key  string // the server certificate's EC private key
	// Roots holds the CA certificate only.
	Roots *x509.CertPool
}

// New writes a fresh CA and a server certificate for 127.0.0.1 and
// localhost signed by it into dir (ca.pem, cert.pem, key.pem, readable by
// all: a server run as another program must read them). The certificates
// are valid from an hour ago for a day.
func New(t testing.TB, dir string) Files {
	t.Helper()
	now := time.Now()
	ca, caKey := issue(t, &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "archivebot-go test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	cert, key := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "archivebot-go test server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
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
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return Files{
		CA:    write("ca.pem", "CERTIFICATE", ca.Raw),
		Cert:  write("cert.pem", "CERTIFICATE", cert.Raw),
		Key:   write("key.pem", "EC PRIVATE KEY", keyDER),
		Roots: roots,
	}
}

// issue makes a fresh P-256 key and a certificate of tmpl for it, signed
// by parent's key, or by itself when parent is nil.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

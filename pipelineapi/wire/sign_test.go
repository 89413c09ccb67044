package wire

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func testKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return priv.Public().(ed25519.PublicKey), priv
}

const testNonce = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

func headers(s Signed) func(string) string {
	h := http.Header{}
	h.Set(HeaderKey, s.Key)
	h.Set(HeaderTimestamp, s.Timestamp)
	h.Set(HeaderNonce, s.Nonce)
	h.Set(HeaderSignature, s.Signature)
	return h.Get
}

// The signing string is exactly the documented one (doc/pipeline-api.md,
// Signing, example).
func TestSigningStringDocExample(t *testing.T) {
	got := SigningString("POST", "/v1/jobs/take", "", BodyDigest([]byte("{}")), "1764601200", testNonce, "pipe-1")
	want := "archivebot-pipeline-v1\nPOST\n/v1/jobs/take\n\n44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\n1764601200\n0f1e2d3c4b5a69788796a5b4c3d2e1f0\npipe-1"
	if got != want {
		t.Fatalf("signing string:\n%q\nwant\n%q", got, want)
	}
}

func TestSignVerify(t *testing.T) {
	pub, priv := testKey(t)
	now := time.Unix(1764601200, 0)
	body := []byte(`{"heartbeat":1}`)
	s := Sign(priv, "pipe-1", "POST", "/v1/jobs/a%2Fb/update", "x=1", body, now, testNonce)
	p, err := ParseHeaders(headers(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(pub, "POST", "/v1/jobs/a%2Fb/update", "x=1", body, now.Add(59*time.Second)); err != nil {
		t.Fatalf("verify: %v", err)
	}
	cases := []struct {
		name                  string
		method, path, q, body string
		now                   time.Time
		want                  error
	}{
		{"method", "PUT", "/v1/jobs/a%2Fb/update", "x=1", string(body), now, ErrBadSig},
		{"path", "POST", "/v1/jobs/a/b/update", "x=1", string(body), now, ErrBadSig},
		{"query", "POST", "/v1/jobs/a%2Fb/update", "x=2", string(body), now, ErrBadSig},
		{"body", "POST", "/v1/jobs/a%2Fb/update", "x=1", `{"heartbeat":2}`, now, ErrBadSig},
		{"late", "POST", "/v1/jobs/a%2Fb/update", "x=1", string(body), now.Add(61 * time.Second), ErrStale},
		{"early", "POST", "/v1/jobs/a%2Fb/update", "x=1", string(body), now.Add(-61 * time.Second), ErrStale},
	}
	for _, c := range cases {
		if err := p.Verify(pub, c.method, c.path, c.q, []byte(c.body), c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	otherPub, _, _ := ed25519.GenerateKey(nil)
	if err := p.Verify(otherPub, "POST", "/v1/jobs/a%2Fb/update", "x=1", body, now); !errors.Is(err, ErrBadSig) {
		t.Errorf("other key: %v", err)
	}
	// The key name is signed: the same signature under another name fails.
	s2 := s
	s2.Key = "pipe-2"
	p2, _ := ParseHeaders(headers(s2))
	if err := p2.Verify(pub, "POST", "/v1/jobs/a%2Fb/update", "x=1", body, now); !errors.Is(err, ErrBadSig) {
		t.Errorf("renamed key: %v", err)
	}
}

func TestParseHeadersRefusals(t *testing.T) {
	_, priv := testKey(t)
	good := Sign(priv, "pipe-1", "GET", "/v1/control", "", nil, time.Unix(1764601200, 0), testNonce)
	mod := func(f func(*Signed)) Signed { s := good; f(&s); return s }
	cases := []struct {
		name string
		s    Signed
		want error
	}{
		{"none", Signed{}, ErrMissing},
		{"no sig", mod(func(s *Signed) { s.Signature = "" }), ErrMissing},
		{"bad name", mod(func(s *Signed) { s.Key = "-x" }), ErrMalformed},
		{"long name", mod(func(s *Signed) { s.Key = strings.Repeat("a", 65) }), ErrMalformed},
		{"ts sign", mod(func(s *Signed) { s.Timestamp = "+1764601200" }), ErrMalformed},
		{"ts text", mod(func(s *Signed) { s.Timestamp = "soon" }), ErrMalformed},
		{"short nonce", mod(func(s *Signed) { s.Nonce = "abcd" }), ErrMalformed},
		{"upper nonce", mod(func(s *Signed) { s.Nonce = strings.ToUpper(testNonce) }), ErrMalformed},
		{"sig b64", mod(func(s *Signed) { s.Signature = strings.Repeat("!", 88) }), ErrMalformed},
		{"sig short", mod(func(s *Signed) { s.Signature = "AAAA" }), ErrMalformed},
	}
	for _, c := range cases {
		if _, err := ParseHeaders(headers(c.s)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestPublicKeyText(t *testing.T) {
	pub, _ := testKey(t)
	s := FormatPublicKey(pub)
	for _, in := range []string{s, strings.TrimPrefix(s, PublicKeyPrefix), " " + s + "\n"} {
		got, err := ParsePublicKey(in)
		if err != nil || !got.Equal(pub) {
			t.Errorf("ParsePublicKey(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "ed25519:", "ed25519:AAAA", "not base64!", s[:len(s)-2]} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted", bad)
		}
	}
}

package wire

import (
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary headers and request parts to the verifier:
// it must never panic, and must accept only what the key signed. A
// signature made over the fuzzed request is accepted; any header changed
// from it is refused.
func FuzzVerify(f *testing.F) {
	pub, priv := testKey(f)
	now := time.Unix(1764601200, 0)
	good := Sign(priv, "pipe-1", "POST", "/v1/jobs/take", "", []byte("{}"), now, testNonce)
	f.Add("pipe-1", good.Timestamp, good.Nonce, good.Signature, "POST", "/v1/jobs/take", "", []byte("{}"), int64(0))
	f.Add("", "", "", "", "GET", "/", "a=b", []byte(nil), int64(5))
	f.Add("x", "1e3", "zz", "====", "PUT", "/v1/jobs/%2F", "q", []byte("x"), int64(-100))
	f.Fuzz(func(t *testing.T, key, ts, nonce, sig, method, path, query string, body []byte, skew int64) {
		h := http.Header{}
		h.Set(HeaderKey, key)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderNonce, nonce)
		h.Set(HeaderSignature, sig)
		at := now.Add(time.Duration(skew%1000) * time.Second)
		if p, err := ParseHeaders(h.Get); err == nil {
			if p.Verify(pub, method, path, query, body, at) == nil {
				// Accepted: it must be exactly a signature of this request.
				msg := SigningString(method, path, query, BodyDigest(body), ts, nonce, key)
				if !ed25519.Verify(pub, []byte(msg), p.Signature) {
					t.Fatalf("accepted a request the key did not sign")
				}
			}
		}
		// Signed by the key: accepted when fresh and well-formed, and
		// refused once any part differs.
		if !ValidKeyName(key) {
			return
		}
		s := Sign(priv, key, method, path, query, body, at, testNonce)
		h2 := http.Header{}
		h2.Set(HeaderKey, s.Key)
		h2.Set(HeaderTimestamp, s.Timestamp)
		h2.Set(HeaderNonce, s.Nonce)
		h2.Set(HeaderSignature, s.Signature)
		p, err := ParseHeaders(h2.Get)
		if err != nil {
			t.Fatalf("own signature does not parse: %v", err)
		}
		if err := p.Verify(pub, method, path, query, body, at); err != nil {
			t.Fatalf("own signature refused: %v", err)
		}
		if err := p.Verify(pub, method, path, query, append(body, 'x'), at); err == nil {
			t.Fatalf("altered body accepted")
		}
		if err := p.Verify(pub, method, path+"x", query, body, at); err == nil {
			t.Fatalf("altered path accepted")
		}
		if err := p.Verify(pub, method, path, query+"x", body, at); err == nil {
			t.Fatalf("altered query accepted")
		}
	})
}

// Package wire is the pipeline API v1 as both ends see it
// (doc/pipeline-api.md): the request and answer types, the header names,
// the public key text format and the signing string. The node
// (package pipelineapi) verifies with it and the client
// (package pipelineapi/client) signs with it, so the two cannot disagree.
//
// The cryptography is crypto/ed25519; what is written here is only the
// string both ends sign and the checks of its parts.
package wire

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request.
const (
	HeaderKey       = "X-ArchiveBot-Key"
	HeaderTimestamp = "X-ArchiveBot-Timestamp"
	HeaderNonce     = "X-ArchiveBot-Nonce"
	HeaderSignature = "X-ArchiveBot-Signature"
)

// SigningVersion is the first line of the signing string.
const SigningVersion = "archivebot-pipeline-v1"

// MaxSkew is how far a request's timestamp may be from the node's clock.
const MaxSkew = 60 * time.Second

// Nonce bounds: at least 16 random bytes, at most 64, written in hex.
const (
	MinNonceHex = 32
	MaxNonceHex = 128
)

// MaxKeyName is the longest key name.
const MaxKeyName = 64

// PublicKeyPrefix may precede the base64 text of a public key.
const PublicKeyPrefix = "ed25519:"

// ValidKeyName reports whether name can name a pipeline key: 1 to 64
// characters of A-Z a-z 0-9 . _ -, starting with a letter or digit.
func ValidKeyName(name string) bool {
	if name == "" || len(name) > MaxKeyName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParsePublicKey reads a public key as operators paste it: base64
// (standard alphabet, padded) of the 32 raw bytes, optionally prefixed
// "ed25519:", surrounding space ignored.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, PublicKeyPrefix)
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key is not base64: %v", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key has %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// FormatPublicKey writes pub as "ed25519:" + base64.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// BodyDigest is the lowercase hex SHA-256 of body (of nothing for an empty
// body).
func BodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// SigningString is what a request's signature covers: these lines joined
// by "\n", with no newline at the end.
//
//	archivebot-pipeline-v1
//	METHOD                (upper case, as sent)
//	escaped path          (as on the request line, without the query)
//	raw query             (as on the request line after '?', or empty)
//	hex sha256 of the body
//	timestamp             (UNIX seconds, decimal)
//	nonce                 (hex)
//	key name
func SigningString(method, path, rawQuery, bodyDigest, timestamp, nonce, keyName string) string {
	return strings.Join([]string{SigningVersion, method, path, rawQuery, bodyDigest, timestamp, nonce, keyName}, "\n")
}

// Signed are the signature headers of one request.
type Signed struct {
	Key, Timestamp, Nonce, Signature string
}

// Sign signs a request with priv under keyName at time now with nonce
// (hex, from a random source).
func Sign(priv ed25519.PrivateKey, keyName, method, path, rawQuery string, body []byte, now time.Time, nonce string) Signed {
	ts := strconv.FormatInt(now.Unix(), 10)
	msg := SigningString(method, path, rawQuery, BodyDigest(body), ts, nonce, keyName)
	return Signed{Key: keyName, Timestamp: ts, Nonce: nonce,
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg)))}
}

// SplitRequestURI splits a request line's target into the escaped path and
// the raw query, as both ends sign them.
func SplitRequestURI(uri string) (path, rawQuery string) {
	path, rawQuery, _ = strings.Cut(uri, "?")
	return path, rawQuery
}

// Refusal reasons of authentication (the "error" of a 401 answer).
var (
	ErrMissing   = errors.New("missing_signature")
	ErrMalformed = errors.New("malformed_signature")
	ErrStale     = errors.New("stale_timestamp")
	ErrBadSig    = errors.New("bad_signature")
)

// Parsed is a request's signature headers, checked for form.
type Parsed struct {
	Key       string
	Timestamp int64
	Nonce     string
	Signature []byte
	tsText    string
}

// ParseHeaders checks the form of the four headers (get reads one
// header). It does not look the key up or verify anything.
func ParseHeaders(get func(string) string) (Parsed, error) {
	k, ts, n, sig := get(HeaderKey), get(HeaderTimestamp), get(HeaderNonce), get(HeaderSignature)
	if k == "" && ts == "" && n == "" && sig == "" {
		return Parsed{}, fmt.Errorf("%w: no %s header", ErrMissing, HeaderKey)
	}
	for _, h := range []struct{ name, v string }{{HeaderKey, k}, {HeaderTimestamp, ts}, {HeaderNonce, n}, {HeaderSignature, sig}} {
		if h.v == "" {
			return Parsed{}, fmt.Errorf("%w: no %s header", ErrMissing, h.name)
		}
	}
	if !ValidKeyName(k) {
		return Parsed{}, fmt.Errorf("%w: key name is not 1-64 of A-Za-z0-9._-", ErrMalformed)
	}
	if len(ts) > 12 || ts[0] == '+' || ts[0] == '-' {
		return Parsed{}, fmt.Errorf("%w: timestamp is not UNIX seconds", ErrMalformed)
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Parsed{}, fmt.Errorf("%w: timestamp is not UNIX seconds", ErrMalformed)
	}
	if len(n) < MinNonceHex || len(n) > MaxNonceHex || len(n)%2 != 0 || !isLowerHex(n) {
		return Parsed{}, fmt.Errorf("%w: nonce is not %d to %d lowercase hex digits", ErrMalformed, MinNonceHex, MaxNonceHex)
	}
	if len(sig) != base64.StdEncoding.EncodedLen(ed25519.SignatureSize) {
		return Parsed{}, fmt.Errorf("%w: signature is not base64 of %d bytes", ErrMalformed, ed25519.SignatureSize)
	}
	s, err := base64.StdEncoding.Strict().DecodeString(sig)
	if err != nil || len(s) != ed25519.SignatureSize {
		return Parsed{}, fmt.Errorf("%w: signature is not base64 of %d bytes", ErrMalformed, ed25519.SignatureSize)
	}
	return Parsed{Key: k, Timestamp: t, Nonce: n, Signature: s, tsText: ts}, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Fresh checks that p's timestamp is within MaxSkew of now (ErrStale):
// the node checks it before reading a request's body.
func (p Parsed) Fresh(now time.Time) error {
	d := now.Unix() - p.Timestamp
	if d > int64(MaxSkew/time.Second) || d < -int64(MaxSkew/time.Second) {
		return fmt.Errorf("%w: timestamp is %d s away from the node's clock (at most %d)", ErrStale, d, int64(MaxSkew/time.Second))
	}
	return nil
}

// Verify checks p, signed by pub, against the request as received: the
// timestamp within MaxSkew of now, and the signature over the signing
// string. It does not check the nonce (the node remembers nonces).
func (p Parsed) Verify(pub ed25519.PublicKey, method, path, rawQuery string, body []byte, now time.Time) error {
	if err := p.Fresh(now); err != nil {
		return err
	}
	msg := SigningString(method, path, rawQuery, BodyDigest(body), p.tsText, p.Nonce, p.Key)
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, []byte(msg), p.Signature) {
		return fmt.Errorf("%w: the signature does not match the request (method, path, query, body, timestamp, nonce or key differ from what was signed)", ErrBadSig)
	}
	return nil
}

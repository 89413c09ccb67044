package pipelineapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// FuzzServeRequest runs arbitrary requests through the server's whole
// request path (routing, the checks before the body, the body limit,
// signature, nonce, rate limit, decoding and the operations) against
// miniredis. A request is either sent as given or signed by the
// registered key first. It must never panic; every answer is JSON, and
// every refusal has an error code; a request not signed by the key is
// refused 401 (or 404/405/413 before authentication) and takes no job.
//
//	go test ./pipelineapi/ -run '^$' -fuzz FuzzServeRequest -fuzztime 60s
func FuzzServeRequest(f *testing.F) {
	b := redistest.Mini(f)
	st := store.New(b.Client)
	pub, priv, _ := ed25519.GenerateKey(nil)
	ctx := context.Background()
	if err := st.AddPipelineKey(ctx, "pipe-1", wire.FormatPublicKey(pub)); err != nil {
		f.Fatal(err)
	}
	srv := New(Options{Store: st, Rate: 1e9, LogRate: 1e9, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(rctx) }()
	f.Cleanup(func() { stop(); <-done })
	testproc.Eventually(f, "the term", func() bool {
		t := srv.currentTerm()
		if t == nil {
			return false
		}
		p, _ := t.publicKey("pipe-1")
		return p != nil
	})
	h := srv.Handler()
	for _, c := range []struct {
		method, uri string
		body        []byte
	}{
		{"POST", "/v1/jobs/take", []byte(`{}`)},
		{"POST", "/v1/jobs/take", []byte(`{"queues":["pending:pipe"],"wait_ms":0}`)},
		{"GET", "/v1/jobs/abc", nil},
		{"POST", "/v1/jobs/abc/update", []byte(`{"heartbeat":1,"log":[{"type":"stdout"}]}`)},
		{"POST", "/v1/jobs/a%2Fb/done", []byte(`{}`)},
		{"PUT", "/v1/pipeline", []byte(`{"fields":{"version":"1"}}`)},
		{"DELETE", "/v1/pipeline?x=1", nil},
		{"GET", "/v1/nope", nil},
	} {
		f.Add(c.method, c.uri, c.body, true, "", "", int64(0))
		f.Add(c.method, c.uri, c.body, false, "pipe-1", "AAAA", int64(0))
	}
	f.Fuzz(func(t *testing.T, method, uri string, body []byte, sign bool, key, sig string, skew int64) {
		if len(body) > wire.MaxBody+1 {
			body = body[:wire.MaxBody+1]
		}
		u, err := url.ParseRequestURI(uri)
		if err != nil || !validMethod(method) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r := (&http.Request{Method: method, URL: u, RequestURI: uri, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Host: "x"}).WithContext(rctx)
		path, q := wire.SplitRequestURI(uri)
		s := wire.Sign(priv, "pipe-1", method, path, q, body, time.Now().Add(time.Duration(skew%200)*time.Second), client.RandomNonce())
		if !sign {
			s.Key, s.Signature = key, sig
		}
		r.Header.Set(wire.HeaderKey, s.Key)
		r.Header.Set(wire.HeaderTimestamp, s.Timestamp)
		r.Header.Set(wire.HeaderNonce, s.Nonce)
		r.Header.Set(wire.HeaderSignature, s.Signature)
		working := b.Client.LLen(ctx, store.KeyWorking).Val()
		w := httptest.NewRecorder()
		if path == wire.PathControl {
			cancel() // the stream would last until the request ends
		}
		h.ServeHTTP(w, r)
		res := w.Result()
		if res.StatusCode != http.StatusOK || path != wire.PathControl {
			var e wire.Error
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatalf("%s %s: answer %d is not JSON: %q", method, uri, res.StatusCode, w.Body.String())
			}
			if res.StatusCode != http.StatusOK && e.Error == "" {
				t.Fatalf("%s %s: refusal %d without an error code: %q", method, uri, res.StatusCode, w.Body.String())
			}
		}
		if !sign {
			switch res.StatusCode {
			case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
			default:
				if !(key == "pipe-1" && ed25519.Verify(pub, []byte(wire.SigningString(method, path, q, wire.BodyDigest(body), s.Timestamp, s.Nonce, key)), []byte(sig))) {
					t.Fatalf("%s %s with a forged signature: %d %q", method, uri, res.StatusCode, w.Body.String())
				}
			}
			if n := b.Client.LLen(ctx, store.KeyWorking).Val(); n != working {
				t.Fatalf("an unsigned request changed working")
			}
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

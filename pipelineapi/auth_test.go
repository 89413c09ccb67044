package pipelineapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// Signed requests: what the API refuses before it reads a job
// (doc/pipeline-api.md, Signing).

func TestReplayedAndAlteredRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		body := []byte(`{"heartbeat":1}`)
		req, err := c.NewRequest(ctx, "POST", "/v1/jobs/j/update", body)
		if err != nil {
			t.Fatal(err)
		}
		replay := req.Clone(ctx)
		replay.Body = io.NopCloser(strings.NewReader(string(body)))
		if err := c.Send(req, nil); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(h.t, "the heartbeat", func() bool { return b.Client.HGet(ctx, "j", "heartbeat").Val() == "1" })
		before := h.dump()
		wantCode(t, c.Send(replay, nil), 401, "replayed_nonce")

		alter := func(name string, f func(*http.Request), code string) {
			t.Helper()
			r, err := c.NewRequest(ctx, "POST", "/v1/jobs/j/update", body)
			if err != nil {
				t.Fatal(err)
			}
			f(r)
			err = c.Send(r, nil)
			if e, ok := err.(*client.Error); !ok || e.Code != code {
				t.Errorf("%s: got %v, want %s", name, err, code)
			}
		}
		alter("body", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"heartbeat":9}`))
			r.ContentLength = 15
		}, "bad_signature")
		alter("query", func(r *http.Request) { r.URL.RawQuery = "x=1" }, "bad_signature")
		alter("path", func(r *http.Request) { r.URL.Path = "/v1/jobs/k/update"; r.URL.RawPath = "" }, "bad_signature")
		alter("key name", func(r *http.Request) { r.Header.Set(wire.HeaderKey, "beta") }, "unknown_key")
		alter("timestamp", func(r *http.Request) {
			ts := r.Header.Get(wire.HeaderTimestamp)
			r.Header.Set(wire.HeaderTimestamp, ts[:len(ts)-1]+string('0'+(ts[len(ts)-1]-'0'+1)%10))
		}, "bad_signature")
		alter("nonce", func(r *http.Request) { r.Header.Set(wire.HeaderNonce, strings.Repeat("ab", 16)) }, "bad_signature")
		h.sameDump(before, "replayed and altered requests")
	})
}

func TestStaleTimestampRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		pub, priv, _ := ed25519.GenerateKey(nil)
		if err := h.store.AddPipelineKey(ctx, "alpha", wire.FormatPublicKey(pub)); err != nil {
			t.Fatal(err)
		}
		testproc.Eventually(h.t, "the key", func() bool { p, _ := h.srv.currentTerm().publicKey("alpha"); return p != nil })
		h.queue("j", store.KeyPending)
		before := h.dump()
		// Timestamps are whole seconds on both sides, so a request signed
		// 61 s ahead can read as 60 s ahead when the node's second ticks
		// over in between: the skews keep a margin past MaxSkew.
		for _, skew := range []time.Duration{-wire.MaxSkew - 5*time.Second, wire.MaxSkew + 5*time.Second, -time.Hour} {
			c, _ := client.New(h.hs.URL, "alpha", priv, client.WithClock(func() time.Time { return time.Now().Add(skew) }))
			_, err := c.Take(ctx, wire.TakeRequest{})
			wantCode(t, err, 401, "stale_timestamp")
		}
		h.sameDump(before, "stale requests")
	})
}

func TestMissingAndWrongKeysRefused(t *testing.T) {
	eachHarness(t, Options{}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		h.addKey("alpha")
		h.queue("j", store.KeyPending)
		before := h.dump()
		// No signature at all.
		resp, err := http.Post(h.hs.URL+wire.PathTake, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		var e wire.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 401 || e.Error != "missing_signature" {
			t.Errorf("unsigned: %d %+v", resp.StatusCode, e)
		}
		// A name nobody registered.
		_, priv, _ := ed25519.GenerateKey(nil)
		stranger, _ := client.New(h.hs.URL, "stranger", priv)
		_, err = stranger.Take(ctx, wire.TakeRequest{})
		wantCode(t, err, 401, "unknown_key")
		// alpha's name with another private key.
		forger, _ := client.New(h.hs.URL, "alpha", priv)
		_, err = forger.Take(ctx, wire.TakeRequest{})
		wantCode(t, err, 401, "bad_signature")
		h.sameDump(before, "unauthenticated requests")
		if refusals("-", "unknown_key") < 1 {
			t.Error("an unknown key's refusal is not counted")
		}
	})
}

// A revoked key is refused, and its open control stream closed, within
// the key refresh (250 ms by default; the test measures and logs it).
func TestRevokedKeyRefused(t *testing.T) {
	eachHarness(t, Options{KeyRefresh: DefaultKeyRefresh}, func(t *testing.T, b *redistest.Backend, h *harness, ctx context.Context) {
		c := h.holding("alpha", "j")
		events := make(chan client.Event, 16)
		streamErr := make(chan error, 1)
		go func() {
			streamErr <- c.Control(ctx, func(ev client.Event) error { events <- ev; return nil })
		}()
		if ev := <-events; ev.Name != wire.EventSettings {
			t.Fatalf("first event %v", ev)
		}
		before := h.dump()
		revoked := time.Now()
		if err := h.store.RevokePipelineKey(ctx, "alpha"); err != nil {
			t.Fatal(err)
		}
		var bye client.Event
		for bye.Name != wire.EventBye {
			select {
			case bye = <-events: // settings events sent before it may come first
			case <-time.After(10 * time.Second):
				t.Fatal("the control stream stayed open after the revocation")
			}
		}
		closed := time.Since(revoked)
		if err := <-streamErr; err != io.EOF {
			t.Errorf("stream ended with %v", err)
		}
		var why wire.Error
		json.Unmarshal(bye.Data, &why)
		if bye.Name != wire.EventBye || why.Error != "revoked_key" {
			t.Errorf("last event %s %s", bye.Name, bye.Data)
		}
		_, err := c.Heartbeat(ctx, "j")
		wantCode(t, err, 401, "revoked_key")
		t.Logf("control stream closed %v after the revocation", closed)
		before[store.KeyPipelineKeys] = redistest.Entry{}
		after := h.dump()
		delete(before, store.KeyPipelineKeys)
		delete(before, store.KeyPipelineKeysRevoked)
		delete(after, store.KeyPipelineKeys)
		delete(after, store.KeyPipelineKeysRevoked)
		if !reflect.DeepEqual(before, after) {
			t.Errorf("the revoked key's request wrote:\n%v\n%v", before, after)
		}
		// The stream cannot be reopened.
		err = c.Control(ctx, func(client.Event) error { return nil })
		wantCode(t, err, 401, "revoked_key")
	})
}

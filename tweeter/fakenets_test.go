package tweeter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/tweeter"
)

// fakeAnswer is a scripted reply; hangup accepts the post, then drops the
// connection without answering (the answer lost after the send).
type fakeAnswer struct {
	status int
	header map[string]string
	body   string
	hangup bool
	// slow: accept the post, then answer only after this long (the
	// client's deadline passes first).
	slow time.Duration
}

const mastodonToken = "masto-SECRET-token"

// fakeMastodon is a local Mastodon serving POST /api/v1/statuses the way
// Mastodon does: bearer token, form body, and an Idempotency-Key that
// makes a second request with the same key return the first status
// instead of posting again.
type fakeMastodon struct {
	t *testing.T
	fakeAPI[fakeAnswer]

	byKey    map[string]string // Idempotency-Key -> status id
	statuses []fakeStatus
	requests int
	now      func() time.Time // when a status is made (the test's clock)
}

type fakeStatus struct {
	ID, Text, Key, Visibility string
	At                        time.Time
}

func newFakeMastodon(t *testing.T) *fakeMastodon {
	f := &fakeMastodon{t: t, byKey: map[string]string{}, now: time.Now}
	f.start(t, f.serve)
	return f
}

func (f *fakeMastodon) posted() []fakeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeStatus(nil), f.statuses...)
}

func (f *fakeMastodon) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/statuses" {
		f.t.Errorf("fake mastodon: unexpected %s %s", r.Method, r.URL.Path)
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+mastodonToken {
		f.t.Errorf("fake mastodon: Authorization = %q", got)
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"The access token is invalid"}`)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		f.t.Errorf("fake mastodon: Content-Type = %q", ct)
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		f.t.Errorf("fake mastodon: no Idempotency-Key")
	}
	if err := r.ParseForm(); err != nil {
		f.t.Errorf("fake mastodon: %v", err)
	}
	text := r.PostForm.Get("status")
	f.mu.Lock()
	f.requests++
	var a fakeAnswer
	if len(f.script) > 0 {
		a, f.script = f.script[0], f.script[1:]
	}
	if a.status != 0 && !a.hangup && a.slow == 0 {
		f.mu.Unlock()
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
		return
	}
	id, dup := f.byKey[key]
	if !dup {
		id = fmt.Sprint(1000 + len(f.statuses))
		f.byKey[key] = id
		f.statuses = append(f.statuses, fakeStatus{ID: id, Text: text, Key: key, Visibility: r.PostForm.Get("visibility"), At: f.now()})
	}
	f.mu.Unlock()
	if a.hangup {
		hangup(w)
		return
	}
	if a.slow > 0 {
		select {
		case <-time.After(a.slow):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": id, "content": text, "visibility": "public"})
}

// hangup closes the connection without an answer.
func hangup(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// fakeBluesky is a local PDS serving the XRPC calls the poster makes:
// createSession, refreshSession, createRecord and getRecord. Access tokens
// expire when the test says (expire), as a PDS's do after a couple of
// hours, with 400 ExpiredToken.
type fakeBluesky struct {
	t *testing.T
	// The scripted answers are for createRecord.
	fakeAPI[fakeAnswer]

	access   map[string]bool
	refresh  map[string]bool
	n        int
	records  map[string]map[string]any // rkey -> record
	order    []string                  // rkeys in creation order
	at       map[string]time.Time
	calls    []string // method names in order
	sessions int
	now      func() time.Time
}

const (
	bskyHandle   = "archivebot.test"
	bskyPassword = "abcd-SECRET-efgh-ijkl"
	bskyDID      = "did:plc:archivebottest"
)

func newFakeBluesky(t *testing.T) *fakeBluesky {
	f := &fakeBluesky{t: t, access: map[string]bool{}, refresh: map[string]bool{},
		records: map[string]map[string]any{}, at: map[string]time.Time{}, now: time.Now}
	f.start(t, f.serve)
	return f
}

// expire makes every access token issued so far expired.
func (f *fakeBluesky) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.access {
		f.access[k] = false
	}
}

func (f *fakeBluesky) posts() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, k := range f.order {
		out = append(out, f.records[k])
	}
	return out
}

func (f *fakeBluesky) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func xrpcErr(w http.ResponseWriter, status int, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": name, "message": msg})
}

func (f *fakeBluesky) issue() map[string]string {
	f.n++
	a, r := fmt.Sprintf("access-%d", f.n), fmt.Sprintf("refresh-%d", f.n)
	f.access[a], f.refresh[r] = true, true
	return map[string]string{"accessJwt": a, "refreshJwt": r, "handle": bskyHandle, "did": bskyDID}
}

func (f *fakeBluesky) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/xrpc/")
	if !ok {
		f.t.Errorf("fake bluesky: unexpected path %s", r.URL.Path)
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch method {
	case "com.atproto.server.createSession":
		var body struct{ Identifier, Password string }
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
			xrpcErr(w, 400, "InvalidRequest", "bad body")
			return
		}
		if body.Identifier != bskyHandle || body.Password != bskyPassword {
			xrpcErr(w, 401, "AuthenticationRequired", "Invalid identifier or password")
			return
		}
		f.sessions++
		json.NewEncoder(w).Encode(f.issue())
	case "com.atproto.server.refreshSession":
		if r.Method != http.MethodPost || !f.refresh[bearer] {
			xrpcErr(w, 400, "ExpiredToken", "Token has expired")
			return
		}
		delete(f.refresh, bearer)
		json.NewEncoder(w).Encode(f.issue())
	case "com.atproto.repo.getRecord":
		if valid, known := f.access[bearer]; !known || !valid {
			xrpcErr(w, 400, "ExpiredToken", "Token has expired")
			return
		}
		q := r.URL.Query()
		if q.Get("repo") != bskyDID || q.Get("collection") != "app.bsky.feed.post" {
			f.t.Errorf("fake bluesky: getRecord %v", q)
		}
		rec, ok := f.records[q.Get("rkey")]
		if !ok {
			xrpcErr(w, 400, "RecordNotFound", "Could not locate record")
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"uri": "at://" + bskyDID + "/app.bsky.feed.post/" + q.Get("rkey"), "value": rec})
	case "com.atproto.repo.createRecord":
		if r.Method != http.MethodPost {
			xrpcErr(w, 400, "InvalidRequest", "POST only")
			return
		}
		if valid, known := f.access[bearer]; !known || !valid {
			xrpcErr(w, 400, "ExpiredToken", "Token has expired")
			return
		}
		var body struct {
			Repo, Collection, Rkey string
			Record                 map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			xrpcErr(w, 400, "InvalidRequest", err.Error())
			return
		}
		if body.Repo != bskyDID || body.Collection != "app.bsky.feed.post" || body.Record["$type"] != "app.bsky.feed.post" {
			f.t.Errorf("fake bluesky: createRecord %+v", body)
		}
		if !tweeter.ValidTID(body.Rkey) {
			f.t.Errorf("fake bluesky: rkey %q is not a TID", body.Rkey)
		}
		if _, err := time.Parse(time.RFC3339, fmt.Sprint(body.Record["createdAt"])); err != nil {
			f.t.Errorf("fake bluesky: createdAt: %v", err)
		}
		var a fakeAnswer
		if len(f.script) > 0 {
			a, f.script = f.script[0], f.script[1:]
		}
		if a.status != 0 && !a.hangup && a.slow == 0 {
			for k, v := range a.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(a.status)
			io.WriteString(w, a.body)
			return
		}
		if _, dup := f.records[body.Rkey]; dup {
			xrpcErr(w, 400, "InvalidRequest", "Record already exists")
			return
		}
		f.records[body.Rkey] = body.Record
		f.order = append(f.order, body.Rkey)
		f.at[body.Rkey] = f.now()
		if a.hangup {
			hangup(w)
			return
		}
		if a.slow > 0 {
			f.mu.Unlock()
			select {
			case <-time.After(a.slow):
			case <-r.Context().Done():
			}
			f.mu.Lock()
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		json.NewEncoder(w).Encode(map[string]string{"uri": "at://" + bskyDID + "/app.bsky.feed.post/" + body.Rkey, "cid": "bafy"})
	default:
		f.t.Errorf("fake bluesky: unexpected method %s", method)
		xrpcErr(w, 501, "MethodNotImplemented", method)
	}
}

// deadline gives every request a short deadline d on the default
// transport: the client's timeout, shortened for tests.
type deadline struct{ d time.Duration }

func (t deadline) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := http.DefaultTransport.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelBody{resp.Body, cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel func()
}

func (b cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

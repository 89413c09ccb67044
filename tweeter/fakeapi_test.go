package tweeter_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/dghubble/oauth1"

	"github.com/archiveteam/archivebot-go/tweeter"
)

// testCreds are the fake account's keys. The fake API checks every request
// is signed with them, and the tests check they never reach the log.
var testCreds = tweeter.Credentials{
	ConsumerKey:    "ck-public-key",
	ConsumerSecret: "cs-SECRET-consumer",
	AccessToken:    "at-1234-token",
	AccessSecret:   "as-SECRET-access",
}

// answer is one scripted reply of the fake API.
type answer struct {
	status int
	header map[string]string
	body   string
}

// fakeAPI is what the fake services share: their test server, and the
// answers scripted for them, guarded by mu along with the rest of a fake's
// state.
type fakeAPI[A any] struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []A
}

// start serves h until the end of the test.
func (f *fakeAPI[A]) start(t *testing.T, h http.HandlerFunc) {
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
}

// reply queues answers the fake gives, in order, before it answers on its
// own.
func (f *fakeAPI[A]) reply(as ...A) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, as...)
}

// fakeTwitter is a local stand-in for api.twitter.com serving
// POST /1.1/statuses/update.json and POST /2/tweets. It replies with the
// scripted answers in order, then with success, and keeps what was posted.
type fakeTwitter struct {
	t *testing.T
	fakeAPI[answer]

	requests []string // "API text" of every well-formed request
	posted   []string // texts accepted
	nextID   int
}

func newFakeTwitter(t *testing.T) *fakeTwitter {
	f := &fakeTwitter{t: t, nextID: 1000}
	f.start(t, f.serve)
	return f
}

func (f *fakeTwitter) snapshot() (requests, posted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.requests...), append([]string{}, f.posted...)
}

// transport is the base transport for the OAuth1 client: requests for
// api.twitter.com go to the fake server instead, with their Host header
// (and thus the URL they were signed for) unchanged.
func (f *fakeTwitter) transport() http.RoundTripper {
	target, _ := url.Parse(f.srv.URL)
	return rewrite{target: target, base: f.srv.Client().Transport}
}

type rewrite struct {
	target *url.URL
	base   http.RoundTripper
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != "api.twitter.com" {
		return nil, fmt.Errorf("request to %s: only api.twitter.com is faked", req.URL.Host)
	}
	out := req.Clone(req.Context())
	out.Host = req.URL.Host
	out.URL.Scheme = r.target.Scheme
	out.URL.Host = r.target.Host
	return r.base.RoundTrip(out)
}

func (f *fakeTwitter) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := checkOAuth1(r, body, testCreds); err != nil {
		f.t.Errorf("fake twitter: %s %s: %v", r.Method, r.URL.Path, err)
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"errors":[{"code":32,"message":"Could not authenticate you."}]}`)
		return
	}
	var api, text string
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/1.1/statuses/update.json":
		api = "v1.1"
		if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
			f.t.Errorf("fake twitter v1.1: Content-Type %q", ct)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			f.t.Errorf("fake twitter v1.1: body %q: %v", body, err)
		}
		text = form.Get("status")
	case r.Method == http.MethodPost && r.URL.Path == "/2/tweets":
		api = "v2"
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			f.t.Errorf("fake twitter v2: Content-Type %q", ct)
		}
		var req struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			f.t.Errorf("fake twitter v2: body %q: %v", body, err)
		}
		text = req.Text
	default:
		f.t.Errorf("fake twitter: unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, api+" "+text)
	var a *answer
	if len(f.script) > 0 {
		a = &f.script[0]
		f.script = f.script[1:]
	}
	if a == nil || a.status/100 == 2 {
		f.posted = append(f.posted, text)
		f.nextID++
	}
	id := f.nextID
	f.mu.Unlock()

	if a != nil {
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		if a.body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if api == "v2" {
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"id": fmt.Sprint(id), "text": text}})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"id": id, "id_str": fmt.Sprint(id), "text": text})
}

// checkOAuth1 verifies the request carries an OAuth1 HMAC-SHA1 signature
// made with creds over the URL it was sent to (RFC 5849 §3.4), as Twitter
// would.
func checkOAuth1(r *http.Request, body []byte, creds tweeter.Credentials) error {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "OAuth ") {
		return fmt.Errorf("Authorization %q is not OAuth", h)
	}
	params := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(h, "OAuth "), ", ") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return fmt.Errorf("Authorization part %q", kv)
		}
		key, err1 := url.PathUnescape(k)
		val, err2 := url.PathUnescape(v[1 : len(v)-1])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("Authorization part %q is not percent-encoded", kv)
		}
		params[key] = val
	}
	want := map[string]string{
		"oauth_consumer_key":     creds.ConsumerKey,
		"oauth_token":            creds.AccessToken,
		"oauth_signature_method": "HMAC-SHA1",
		"oauth_version":          "1.0",
	}
	for k, v := range want {
		if params[k] != v {
			return fmt.Errorf("%s = %q, want %q", k, params[k], v)
		}
	}
	for _, k := range []string{"oauth_nonce", "oauth_timestamp", "oauth_signature"} {
		if params[k] == "" {
			return fmt.Errorf("no %s in %q", k, h)
		}
	}
	sig := params["oauth_signature"]
	delete(params, "oauth_signature")
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	if r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return err
		}
		for k, v := range form {
			params[k] = v[0]
		}
	}
	var pairs []string
	for k, v := range params {
		pairs = append(pairs, oauth1.PercentEncode(k)+"="+oauth1.PercentEncode(v))
	}
	sort.Strings(pairs)
	base := strings.Join([]string{
		r.Method,
		oauth1.PercentEncode("https://" + r.Host + r.URL.EscapedPath()),
		oauth1.PercentEncode(strings.Join(pairs, "&")),
	}, "&")
	mac := hmac.New(sha1.New, []byte(oauth1.PercentEncode(creds.ConsumerSecret)+"&"+oauth1.PercentEncode(creds.AccessSecret)))
	mac.Write([]byte(base))
	if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != sig {
		return fmt.Errorf("oauth_signature %q does not match the request (want %q over %q)", sig, got, base)
	}
	return nil
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLogger logs at debug level into a buffer and, on failure, the test log.
func newLogger(t *testing.T) (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	l := slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		out := b.String()
		for _, secret := range []string{testCreds.ConsumerSecret, testCreds.AccessSecret} {
			if strings.Contains(out, secret) {
				t.Errorf("a secret reached the log:\n%s", out)
			}
		}
		if t.Failed() {
			t.Logf("log:\n%s", out)
		}
	})
	return l, b
}

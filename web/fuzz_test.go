package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// FuzzRequest sends arbitrary paths, query strings and Accept headers at
// the server over upstream-like state: every answer must be a well-formed
// response below 500 (a panic is recovered into a 500, so it fails too),
// with a Content-Type, and JSON errors must be JSON.
func FuzzRequest(f *testing.F) {
	for _, s := range []struct{ path, query, accept string }{
		{"status", "", ""}, {"pending", "", "text/plain"}, {"logs/recent", "count=3", "*/*"},
		{"logs/recent", "count=-1", "application/json"}, {"finished", "", "text/html"},
		{"ignores/abc,def", "compact=true", ""}, {"feed", "", "application/rss+xml;q=0.5, application/json"},
		{"feed/archivebot.atom", "", "*"}, {"jobs/abc", "", ""}, {"jobs", "state=running&started_by=x", ""},
		{"metrics", "", ""}, {"readyz", "", ""}, {"../../etc/passwd", "", ""}, {"jobs/%2e%2e", "", ""},
		{"ignores/" + strings.Repeat("a,", 100), "", ""}, {"", "", ";q=x,,/"},
	} {
		f.Add(s.path, s.query, s.accept)
	}
	b := redistest.Mini(f)
	fx := newFixture(f, b)
	h := fx.srv.Handler()
	f.Fuzz(func(t *testing.T, path, query, accept string) {
		u := &url.URL{Path: "/" + path, RawQuery: query}
		req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "example.com",
			RequestURI: u.RequestURI(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		req = req.WithContext(t.Context())
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("GET %q Accept %q: %d %s", u.RequestURI(), accept, rec.Code, rec.Body.String())
		}
		if rec.Code >= 300 && rec.Code < 400 {
			return // ServeMux redirects unclean paths
		}
		if rec.Header().Get("Content-Type") == "" {
			t.Fatalf("GET %q: no Content-Type", u.RequestURI())
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") &&
			(!utf8.Valid(rec.Body.Bytes()) || !json.Valid(rec.Body.Bytes())) {
			t.Fatalf("GET %q: the JSON answer is not valid JSON: %.200q", u.RequestURI(), rec.Body.String())
		}
	})
}

// FuzzStreamClientMessage feeds raw bytes to the handling of a client
// message of our protocol (/stream?v=2): it must never panic, must answer
// every message with exactly one notice, "error" (and the filter
// unchanged) or "subscribed" (only for JSON; the filter in force holds at
// most 10000 idents), and give back every byte it queued.
func FuzzStreamClientMessage(f *testing.F) {
	for _, s := range []string{`{"subscribe":"all"}`, `{"subscribe":["a","b","a"]}`, `{"errors_only":true}`,
		`{"subscribe":"*","errors_only":false}`, `{"subscribe":5}`, `null`, `[]`, `{"subscribe":[1]}`,
		`{"subscribe":null}`, "\xff", `{"subscribe":["\u0000"]}`, ``, `{"errors_only":"yes"}`} {
		f.Add([]byte(s))
	}
	hub := NewHub(HubOptions{Logger: quietLogger()})
	f.Fuzz(func(t *testing.T, msg []byte) {
		c := idleClient(hub, true, queueLimits{frames: 4, bytes: 1 << 20, total: &hub.queued,
			maxTot: 1 << 30, maxAge: time.Hour})
		c.setFilter(false, []string{"x"}, true)
		key0, _, _, _ := c.filter()
		c.handleMsg(msg)
		if len(c.events) != 1 {
			t.Fatalf("%d notices for one message", len(c.events))
		}
		f, _, ok := c.next(time.Now())
		if !ok {
			t.Fatal("no notice")
		}
		key, all, subs, _ := c.filter()
		if len(subs) > 10000 || (all && subs != nil) {
			t.Fatalf("filter %q: all %v, %d idents", key, all, len(subs))
		}
		if _, err := json.Marshal(c.filterDoc()); err != nil {
			t.Fatalf("filter doc: %v", err)
		}
		switch f.note {
		case "error":
			if key != key0 {
				t.Fatalf("a refused message changed the filter: %q -> %q", key0, key)
			}
		case "subscribed":
			if !json.Valid(msg) {
				t.Fatalf("%q is not JSON but was accepted", msg)
			}
		default:
			t.Fatalf("answered %q", f.note)
		}
		if c.hub.queued.Load() != 0 {
			t.Fatalf("%d bytes still counted as queued", c.hub.queued.Load())
		}
	})
}

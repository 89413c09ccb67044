package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// TestPagesByAccept: a browser gets the dashboard's pages; */*, no Accept
// and application/json still get the data; the assets are embedded.
func TestPagesByAccept(t *testing.T) {
	srv := New(Options{Store: store.New(redistest.Mini(t).Client)})
	const browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	tests := []struct {
		path, accept, wantType, wantBody string
	}{
		{"/", browser, "text/html", `src="/static/dashboard.js"`},
		{"/", "*/*", "application/json", `"endpoints"`},
		{"/", "", "application/json", `"endpoints"`},
		{"/jobs/abc123", browser, "text/html", `src="/static/pages.js"`},
		{"/jobs/abc123", "*/*", "application/json", `unknown job`},
		{"/jobs/abc123", "application/json", "application/json", `unknown job`},
		{"/pipelines", browser, "text/html", `pages.js`},
		{"/pipelines", "*/*", "application/json", `"pipelines"`},
		{"/finished", browser, "text/html", `pages.js`},
		{"/finished", "application/json", "application/json", `[`},
		{"/pending", browser, "text/html", `pages.js`},
		// As upstream's: a browser gets a page, scripts the entries.
		{"/logs/recent", browser, "text/html", `pages.js`},
		{"/logs/recent", "*/*", "application/json", `[`},
		{"/logs/recent?count=3", "application/json", "application/json", `[`},
		{"/pending", "*/*", "text/plain", ``},
		{"/static/dashboard.js", "*/*", "text/javascript", `new WebSocket`},
		{"/static/style.css", "*/*", "text/css", `prefers-color-scheme: dark`},
	}
	for _, tc := range tests {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		ct := rec.Header().Get("Content-Type")
		if !strings.HasPrefix(ct, tc.wantType) || !strings.Contains(rec.Body.String(), tc.wantBody) {
			t.Errorf("GET %s (Accept %q): %d %s %.80q; want %s containing %q", tc.path, tc.accept, rec.Code, ct,
				rec.Body.String(), tc.wantType, tc.wantBody)
		}
		if tc.wantType == "text/html" && rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: page without Content-Security-Policy", tc.path)
		}
	}
	// No CDN: nothing the pages load comes from elsewhere.
	for _, name := range []string{"page.html", "dashboard.js", "pages.js", "common.js", "style.css"} {
		req := httptest.NewRequest("GET", "/static/"+name, nil)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("/static/%s: %d", name, rec.Code)
		}
		if b := rec.Body.String(); strings.Contains(b, "https://") || strings.Contains(b, "src=\"//") {
			t.Errorf("/static/%s refers to another site", name)
		}
	}
}

package web

// The dashboard: HTML, CSS and plain JavaScript embedded in the binary (no
// build step, no CDN; works offline). The live page is at /; /jobs/IDENT,
// /pipelines, /pending, /finished and /logs/recent answer with a page when the client
// prefers text/html, and with their data otherwise (JSON stays the answer
// for */* and application/json). See doc/web.md, Dashboard.

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed dashboard
var dashboardFiles embed.FS

var dashboardFS = func() fs.FS {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err)
	}
	return sub
}()

// pageCSP keeps the pages to their own scripts and this server's stream.
const pageCSP = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// addPages registers the static assets of the dashboard.
func (s *Server) addPages(mux *http.ServeMux) {
	static := http.StripPrefix("/static/", http.FileServerFS(dashboardFS))
	mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		static.ServeHTTP(w, r)
	}))
}

// page serves the embedded HTML page name instead of the endpoint's data
// when the client prefers text/html to every type in offers; it reports
// whether it did.
func (s *Server) page(w http.ResponseWriter, r *http.Request, name string, offers ...string) bool {
	varyAccept(w)
	if negotiate(r.Header.Get("Accept"), append(offers, typeHTML)...) != typeHTML {
		return false
	}
	b, err := fs.ReadFile(dashboardFS, name)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "page missing from the binary")
		return true
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
	return true
}

// pageOrNotJSON answers a request for a JSON endpoint that has a page: a
// browser gets page.html, a client that takes neither JSON nor HTML a
// 406. It returns true when it answered; false leaves the JSON to the
// caller.
func (s *Server) pageOrNotJSON(w http.ResponseWriter, r *http.Request) bool {
	return s.page(w, r, "page.html", typeJSON) || accepts(w, r, typeJSON, typeHTML) == ""
}

// Package web is the control node's HTTP API: upstream's JSON and text
// endpoints (/status, /pending, /pipelines, /logs/recent, /finished,
// /ignores, /feed) with upstream's shapes, and what upstream lacks
// (/jobs, /jobs/IDENT, /metrics, /healthz, /readyz). doc/web.md describes
// every endpoint.
//
// Like bot/, it is a front end: it reads and writes only through
// store.Store methods, and never reaches into the services. Dashboard
// actions (actions.go) are commands: they go through a Commander (the
// bot's Handle) with bot's Request and Replier types.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/archiveteam/archivebot-go/internal/httpserve"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/refusal"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Limits of what one request may carry. A longer path or query string is
// answered 414; headers beyond MaxHeaderBytes are refused by net/http
// (431).
const (
	MaxPathBytes   = 1024
	MaxQueryBytes  = 1024
	MaxHeaderBytes = 16 << 10
	// requestTimeout bounds the Redis work of one request.
	requestTimeout = 10 * time.Second
)

// Options configures the server.
type Options struct {
	Store Store
	// IgnoreSets returns every named ignore set with its patterns (the
	// bot's catalog); used by /ignores/IDENT?compact=true. Nil: every
	// pattern counts as a manual ignore.
	IgnoreSets func() map[string][]string
	// IRCConnected reports whether the IRC client is registered; nil means
	// console mode (always ready as far as IRC goes).
	IRCConnected func() bool
	// Role, when set (ha.enabled), is this node's role, "leader" or
	// "standby"; /readyz shows it with the lease holder, and a standby is
	// ready when Redis answers (it runs no IRC and no services).
	Role func() string
	// ClockProblem, when set (ha.enabled), says why this node's clock
	// keeps it from leading ("" when it does not); /readyz shows it and
	// is then not ready.
	ClockProblem func() string
	// Relay, when set (ha.enabled), reports whether this node's stream
	// reads the leader's relay, and if not why (/readyz).
	Relay  func() (bool, string)
	Logger *slog.Logger
	// Hub serves the live stream (/stream); nil: no stream (404).
	Hub *Hub
	// Now is the clock; default time.Now.
	Now func() time.Time
	// RecentAPI, when set, gives the last n log entries of a job that
	// arrived through the pipeline API (kept in memory, never in Redis):
	// /logs/recent shows them for jobs whose Redis log has none, with
	// their scores (the stream's), so that a page shows each entry once.
	RecentAPI func(ident string, n int) []record.LogEntry
	// RecentMaxBytes caps one /logs/recent answer; 0: no cap.
	RecentMaxBytes int
	// Actions switches dashboard sign-in and actions on (doc/web.md,
	// Signing in and acting); nil: off.
	Actions *ActionOptions
	// Conns caps the open connections of Serve's and ServeStream's
	// listeners together (http.max_conns, http.max_conns_per_addr).
	Conns ConnLimits
}

// Server is the HTTP API.
type Server struct {
	opt     Options
	store   Store
	log     *slog.Logger
	handler http.Handler
	now     func() time.Time
	limits  limits
	// key makes and checks the sessions' ids, MACs and CSRF tokens.
	key sessionKey
	// refusals logs every refusal class, rate-limited, with counts.
	refusals *refusal.Log
	// conns counts the listeners' connections against opt.Conns.
	conns *connCounter
	// ends are nick keys whose presence ended (EndPresence).
	ends chan string
}

// New builds the server; Serve runs it.
func New(opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	s := &Server{opt: opt, store: opt.Store, log: opt.Logger.With("service", "web"), now: opt.Now}
	s.refusals = refusal.New(s.log, 0)
	s.conns = newConnCounter(opt.Conns, s.refusals)
	s.ends = make(chan string, presenceEnds)
	if a := opt.Actions; a != nil {
		s.limits = limits{session: newRateLimiter(a.ActionsPerMinute), address: newRateLimiter(a.AddressPerMinute)}
		s.key = newSessionKey(a.Secret)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(&gaugeCollector{s: s})
	metricsHandler := promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg},
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.HandleFunc("GET /pending", s.handlePending)
	mux.HandleFunc("GET /pipelines", s.handlePipelines)
	mux.HandleFunc("GET /logs/recent", s.handleRecent)
	mux.HandleFunc("GET /finished", s.handleFinished)
	mux.HandleFunc("GET /ignores/{idents}", s.handleIgnores)
	mux.HandleFunc("GET /feed", s.feedHandler(typeAtom, typeRSS, typeJSON))
	mux.HandleFunc("GET /feed/archivebot.rss", s.feedHandler(typeRSS))
	mux.HandleFunc("GET /feed/archivebot.atom", s.feedHandler(typeAtom))
	mux.HandleFunc("GET /jobs", s.handleJobs)
	mux.HandleFunc("GET /jobs/{ident}", s.handleJob)
	mux.Handle("GET /metrics", metricsHandler)
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	mux.HandleFunc("GET /stream", s.handleStream)
	s.addPages(mux)
	s.addSessions(mux)
	mux.HandleFunc("GET /{$}", s.handleIndex)
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		jsonError(w, http.StatusNotFound, "no such endpoint; see / for the list")
	})
	s.handler = s.guard(mux)
	return s
}

// handleStream serves the live stream (doc/web.md, Live stream).
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	if s.opt.Hub == nil {
		jsonError(w, http.StatusNotFound, "the live stream is off")
		return
	}
	s.opt.Hub.serveStream(w, r)
}

// StreamHandler serves only /stream, for the second listener
// (http.stream_listen) where upstream's dashboard looks for it.
func (s *Server) StreamHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		// Upstream's protocol only (doc/web.md): our own is on http.listen.
		if v := r.URL.Query().Get("v"); v != "" && v != "1" {
			jsonError(w, http.StatusBadRequest, "this listener serves only upstream's stream protocol; /stream?v=2 is on the main listener (http.listen)")
			return
		}
		s.handleStream(w, r)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		jsonError(w, http.StatusNotFound, "this listener serves only /stream")
	})
	return s.guard(mux)
}

// Handler is the server's whole handler (tests and benchmarks call it
// directly).
func (s *Server) Handler() http.Handler { return s.handler }

// guard checks what every request must satisfy before routing (method,
// path and query length), and turns a panicking handler into a 500 logged
// with its stack instead of a dropped connection.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				jsonError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			// Only sign-in, sign-out and the dashboard's actions take
			// POST (doc/web.md, Signing in and acting).
			if !postPath(r.URL.Path) {
				s.refusals.Refused("web_method", remoteHost(r), "method", r.Method)
				w.Header().Set("Allow", "GET, HEAD, OPTIONS")
				jsonError(w, http.StatusMethodNotAllowed, "method POST not allowed: this endpoint is read-only (GET); only /login, /logout and /actions/ACTION take POST")
				return
			}
		case http.MethodOptions:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Allow-Methods", "GET, HEAD")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			s.refusals.Refused("web_method", remoteHost(r), "method", clip(r.Method, 20))
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			jsonError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: this API is read-only (GET)")
			return
		}
		if len(r.URL.EscapedPath()) > MaxPathBytes || len(r.URL.RawQuery) > MaxQueryBytes {
			s.refusals.Refused("web_uri_too_long", remoteHost(r), "path_bytes", len(r.URL.EscapedPath()), "query_bytes", len(r.URL.RawQuery))
		}
		if len(r.URL.EscapedPath()) > MaxPathBytes {
			jsonError(w, http.StatusRequestURITooLong, fmt.Sprintf("path longer than %d bytes", MaxPathBytes))
			return
		}
		if len(r.URL.RawQuery) > MaxQueryBytes {
			jsonError(w, http.StatusRequestURITooLong, fmt.Sprintf("query string longer than %d bytes", MaxQueryBytes))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// ErrAddrInUse is wrapped by Listen's error when the address is taken.
var ErrAddrInUse = errors.New("address already in use")

// Listen opens the listening socket; a taken port wraps ErrAddrInUse.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %w", addr, ErrAddrInUse)
	}
	return ln, err
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// no new connections, requests in flight get up to 5 seconds to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.handler)
}

// ServeStream answers only /stream on ln (http.stream_listen) until ctx
// ends.
func (s *Server) ServeStream(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.StreamHandler())
}

func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := httpserve.Server(h, httpserve.Timeouts{}, MaxHeaderBytes, s.log, ctx)
	return httpserve.Serve(ctx, srv, s.conns.wrap(ln), s.log)
}

// writeJSON sends v as JSON with CORS open to every origin (upstream sent
// Access-Control-Allow-Origin: * on its JSON endpoints).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "encoding the response failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// marshal encodes v as JSON followed by a newline, leaving &, < and >
// as they are (as Ruby's to_json did): URLs stay readable.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// errorBody is every error response: {"error": "..."}.
type errorBody struct {
	Error string `json:"error"`
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(errorBody{msg})
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, status int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(text))
}

// accepts negotiates; when nothing offered is acceptable it answers 406
// and returns "".
func accepts(w http.ResponseWriter, r *http.Request, offers ...string) string {
	if len(offers) > 1 {
		varyAccept(w)
	}
	t := negotiate(r.Header.Get("Accept"), offers...)
	if t == "" {
		jsonError(w, http.StatusNotAcceptable, fmt.Sprintf("none of the types this endpoint serves is acceptable: %v", offers))
	}
	return t
}

// storeError answers a failed store call: 503 when Redis is unreachable
// (or the request ran out of time), 500 otherwise; both logged.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	if store.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("request failed: backend unavailable", "path", r.URL.Path, "err", err)
		jsonError(w, http.StatusServiceUnavailable, "backend unavailable: Redis cannot be reached right now")
		return
	}
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	jsonError(w, http.StatusInternalServerError, "reading the job store failed; the details are in the log")
}

// index lists the endpoints, so that a bare GET / is not a dead end.
func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	if s.page(w, r, "index.html", typeJSON) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"endpoints": []string{"/status", "/pending", "/pipelines", "/logs/recent?count=N", "/finished",
			"/ignores/IDENT[,IDENT…][?compact=true]", "/feed", "/feed/archivebot.rss", "/feed/archivebot.atom",
			"/jobs[?state=queued|running&pipeline=P&started_by=NICK]", "/jobs/IDENT", "/metrics", "/healthz", "/readyz",
			"/stream (WebSocket, upstream's frames)", "/stream?v=2 (WebSocket, batches)"},
	})
}

// varyAccept tells caches that the answer depends on the Accept header
// (once, however many negotiations a handler makes).
func varyAccept(w http.ResponseWriter) {
	for _, v := range w.Header().Values("Vary") {
		if v == "Accept" {
			return
		}
	}
	w.Header().Add("Vary", "Accept")
}

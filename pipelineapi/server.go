// Package pipelineapi is the node's side of the pipeline API v1
// (doc/pipeline-api.md): pipelines sign every request with their own
// Ed25519 key, take and update only the jobs they hold, and send their log
// entries to the node instead of into Redis. It reads and writes Redis only
// through the store's methods (store/pipelineapi.go).
//
// A Server is created once; Run serves one leadership term (the whole run
// on a single node). Outside a term every request is answered 503.
package pipelineapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/httpserve"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	refuselog "github.com/archiveteam/archivebot-go/internal/refusal"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// Defaults of Options.
const (
	DefaultRate          = config.DefaultPipelineRate
	DefaultLogRate       = config.DefaultPipelineLogRate
	DefaultMaxStreams    = config.DefaultPipelineMaxStreams
	DefaultKeyRefresh    = 250 * time.Millisecond
	DefaultFlushInterval = time.Second
	// DefaultTakePoll is how often a waiting take looks again by itself;
	// a job queued through this node wakes it at once.
	DefaultTakePoll = 2 * time.Second
	// NonceWindow is how long nonces are remembered, before the timestamp
	// of the newest verified request (not by a node's clock): twice the
	// allowed skew, so that a request outside it is refused as stale
	// anyway, and 10 s for the nodes' clocks to differ (a node further
	// than ha.max_clock_skew from Redis's TIME does not lead).
	NonceWindow = 2*wire.MaxSkew + 10*time.Second
	// Listener limits (config.Default*).
	DefaultMaxConns          = config.DefaultPipelineMaxConns
	DefaultMaxConnsPerAddr   = config.DefaultPipelineMaxConnsPerAddr
	DefaultReadTimeout       = config.DefaultPipelineReadTimeout
	DefaultIdleTimeout       = config.DefaultPipelineIdleTimeout
	DefaultWriteTimeout      = config.DefaultPipelineWriteTimeout
	DefaultMaxWaitingTakes   = config.DefaultPipelineMaxWaitingTakes
	DefaultBodyBudget        = config.DefaultPipelineBodyBudget
	DefaultBodyBudgetPerAddr = config.DefaultPipelineBodyBudgetPerAddr
	DefaultBodyBudgetPerKey  = config.DefaultPipelineBodyBudgetPerKey
	// MaxNonces is the most nonces a key keeps in the window.
	MaxNonces = 20000
	// RecentPerJob is how many entries per job /logs/recent can show.
	RecentPerJob = 10
	// MaxRecentJobs bounds the jobs whose recent entries are kept, and
	// MaxRecentBytes their size in total (entries are up to 64 KiB).
	MaxRecentJobs  = 10000
	MaxRecentBytes = 32 << 20
	// notLeaderRetry is the Retry-After of a standby's 503.
	notLeaderRetry = 2
)

// Options configure a Server; zero values take the defaults.
type Options struct {
	Store Store
	// Sink gets the log entries for the live streams (the node's
	// coordinator.APILogPublisher; doc/pipeline-api.md, Logs off Redis);
	// nil: none.
	Sink LogSink
	// Leading, when set, is asked before every request in a term (the
	// lease's local deadline): false answers 503 at once.
	Leading func() bool
	Logger  *slog.Logger
	// Rate and LogRate are per key: requests and log entries per second
	// (burst twice as many). MaxStreams: open control streams per key.
	Rate, LogRate float64
	MaxStreams    int
	KeyRefresh    time.Duration
	FlushInterval time.Duration
	TakePoll      time.Duration
	// Ping is the control stream's keep-alive interval (default 15 s).
	Ping time.Duration
	Now  func() time.Time

	// Listener limits (doc/pipeline-api.md, Listener), used by Serve: 0
	// takes the default, a negative value switches the limit off.
	// MaxConns and MaxConnsPerAddr cap open connections in total and
	// per remote address. ReadTimeout bounds reading a request's
	// headers and body, IdleTimeout a kept-alive connection's wait for
	// its next request, WriteTimeout each write of an answer (and of a
	// control stream event).
	MaxConns, MaxConnsPerAddr int
	ReadTimeout, IdleTimeout  time.Duration
	WriteTimeout              time.Duration
	// MaxWaitingTakes caps the long-poll takes waiting per key.
	MaxWaitingTakes int
	// BodyBudget, BodyBudgetPerAddr and BodyBudgetPerKey bound the bytes
	// of request bodies over FreeBody held at once while they are read
	// and checked: in total, per remote address (IPv6 by /64) and per key
	// name (0: the default, negative: off).
	BodyBudget, BodyBudgetPerAddr, BodyBudgetPerKey int64
	// BanCheck is how many first responses of a job decide the ban line
	// (doc/pipeline-api.md, A ban shows itself); 0 takes
	// DefaultBanCheck, a negative value switches the check off.
	BanCheck int
}

// DefaultBanCheck is the default of Options.BanCheck.
const DefaultBanCheck = 50

// limit is v, its default def when 0, and 0 (off) when negative.
func limit[T ~int | ~int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Server serves the pipeline API.
type Server struct {
	opt   Options
	store Store
	log   *slog.Logger

	mu   sync.Mutex
	term *term
	ln   *limitListener // Serve's listener

	refusals *refuselog.Log // rate-limited refusal lines with counts

	budget *bodyBudget

	recentMu    sync.Mutex
	recent      map[string][]recentDoc // ident -> last entries (survives terms of this process)
	recentBytes int

	avoidMu   sync.Mutex
	avoidSeen map[string]string // key -> the avoid list its report last gave (written)
}

// New returns a server; it answers 503 until Run starts a term.
func New(opt Options) *Server {
	config.Positive(&opt.Rate, DefaultRate)
	config.Positive(&opt.LogRate, DefaultLogRate)
	config.Positive(&opt.MaxStreams, DefaultMaxStreams)
	config.Positive(&opt.KeyRefresh, DefaultKeyRefresh)
	config.Positive(&opt.FlushInterval, DefaultFlushInterval)
	config.Positive(&opt.TakePoll, DefaultTakePoll)
	config.Positive(&opt.Ping, 15*time.Second)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.MaxConns = limit(opt.MaxConns, DefaultMaxConns)
	opt.MaxConnsPerAddr = limit(opt.MaxConnsPerAddr, DefaultMaxConnsPerAddr)
	opt.ReadTimeout = limit(opt.ReadTimeout, DefaultReadTimeout)
	opt.IdleTimeout = limit(opt.IdleTimeout, DefaultIdleTimeout)
	opt.WriteTimeout = limit(opt.WriteTimeout, DefaultWriteTimeout)
	opt.MaxWaitingTakes = limit(opt.MaxWaitingTakes, DefaultMaxWaitingTakes)
	opt.BanCheck = limit(opt.BanCheck, DefaultBanCheck)
	opt.BodyBudget = limit(opt.BodyBudget, DefaultBodyBudget)
	opt.BodyBudgetPerAddr = limit(opt.BodyBudgetPerAddr, DefaultBodyBudgetPerAddr)
	opt.BodyBudgetPerKey = limit(opt.BodyBudgetPerKey, DefaultBodyBudgetPerKey)
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Server{opt: opt, store: opt.Store, log: opt.Logger.With("service", "pipelineapi"),
		refusals: refuselog.New(opt.Logger.With("service", "pipelineapi"), 0), recent: map[string][]recentDoc{},
		budget: newBodyBudget(opt.BodyBudget, opt.BodyBudgetPerAddr, opt.BodyBudgetPerKey)}
}

// MaxHeaderBytes bounds a request's headers (net/http answers 431
// beyond).
const MaxHeaderBytes = 16 << 10

// Serve answers on ln until ctx ends (requests in flight get 5 s; the
// server helper, internal/httpserve, the web listener's too), with
// TLS when cert and key are set, within the listener limits of Options:
// a connection over MaxConns or MaxConnsPerAddr is refused at once; a
// request's headers and body must arrive within ReadTimeout, an answer
// go out within WriteTimeout (after a take's wait), and a kept-alive
// connection is closed after IdleTimeout without a request.
func (s *Server) Serve(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	o := s.opt
	// Zero in Options is no bound (limit); to the server helper zero is
	// the web listener's value, so it gets -1. The headers get the web
	// listener's ReadHeaderTimeout.
	none := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	var write time.Duration
	if o.ReadTimeout > 0 && o.WriteTimeout > 0 {
		write = o.ReadTimeout + o.WriteTimeout
	}
	hs := httpserve.Server(s.Handler(), httpserve.Timeouts{Read: none(o.ReadTimeout), Idle: none(o.IdleTimeout), Write: none(write)},
		MaxHeaderBytes, s.log, nil)
	lim := newLimitListener(ln, o.MaxConns, o.MaxConnsPerAddr, certFile == "" && keyFile == "", s.refusals)
	s.mu.Lock()
	s.ln = lim
	s.mu.Unlock()
	ln = lim
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("pipelines.tls_cert/tls_key: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	err := httpserve.Serve(ctx, hs, ln, s.log)
	if ctx.Err() != nil {
		return nil // stopped: requests still running after the grace are cut, as before
	}
	return err
}

// LogSink receives the log entries the API accepted, with the job's
// record (the node's coordinator.APILogPublisher). StreamLog must not
// block: it is called on the request path.
type LogSink interface {
	StreamLog(job *record.Job, entries []record.LogEntry)
}

func (s *Server) streamSink() LogSink { return s.opt.Sink }

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// recentDoc is an entry kept for /logs/recent with its score in the
// job's log, which the dashboard uses to show each entry once (the stream
// sends the same score).
type recentDoc struct {
	doc   string
	score float64
}

// Recent returns the last n entries (n <= RecentPerJob) that arrived
// through the API for ident, oldest first, with their scores:
// /logs/recent shows them.
func (s *Server) Recent(ident string, n int) []record.LogEntry {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	r := s.recent[ident]
	if n < len(r) {
		r = r[len(r)-n:]
	}
	out := make([]record.LogEntry, len(r))
	for i, d := range r {
		out[i] = record.NewLogEntry(d.doc, d.score)
	}
	return out
}

// addRecent keeps docs, the entries scored first, first+1, …, as ident's
// most recent.
func (s *Server) addRecent(ident string, docs []string, first float64) {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	if len(docs) > RecentPerJob {
		first += float64(len(docs) - RecentPerJob)
		docs = docs[len(docs)-RecentPerJob:]
	}
	r := s.recent[ident]
	s.recentBytes -= size(r)
	for i, d := range docs {
		r = append(r, recentDoc{doc: d, score: first + float64(i)})
	}
	if len(r) > RecentPerJob {
		r = append(r[:0:0], r[len(r)-RecentPerJob:]...)
	}
	s.recent[ident] = r
	s.recentBytes += size(r)
	// Over a bound: drop other jobs' entries (any: the bound matters, not
	// which; a job's next entries bring it back).
	for k, v := range s.recent {
		if len(s.recent) <= MaxRecentJobs && s.recentBytes <= MaxRecentBytes {
			break
		}
		if k != ident {
			s.recentBytes -= size(v)
			delete(s.recent, k)
		}
	}
}

func size(docs []recentDoc) int {
	n := 0
	for _, d := range docs {
		n += len(d.doc)
	}
	return n
}

func (s *Server) forgetRecent(ident string) {
	s.recentMu.Lock()
	s.recentBytes -= size(s.recent[ident])
	delete(s.recent, ident)
	s.recentMu.Unlock()
}

func (s *Server) currentTerm() *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term == nil || (s.opt.Leading != nil && !s.opt.Leading()) {
		return nil
	}
	return s.term
}

// request is one authenticated request.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	t    *term
	key  string            // verified key name
	pub  ed25519.PublicKey // the public key it was verified with
	op   string
	body []byte
}

// refusal is an answer other than 200.
type refusal struct {
	status     int
	code       string
	reason     string
	retryAfter int
	// metric, when set, is the reason counted in /metrics and the key's
	// statistics instead of code (a limit with its own name).
	metric string
}

// counted is the reason a refusal is counted under.
func (rf *refusal) counted() string {
	if rf.metric != "" {
		return rf.metric
	}
	return rf.code
}

func (e *refusal) Error() string { return e.code + ": " + e.reason }

func refuse(status int, code, reason string) *refusal {
	return &refusal{status: status, code: code, reason: reason}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	op, ident, ok := route(r)
	if !ok {
		s.answerRefusal(w, r, "-", "route", refuse(http.StatusNotFound, "not_found", "no such endpoint (doc/pipeline-api.md)"), false)
		return
	}
	if op == "" {
		s.answerRefusal(w, r, "-", "route", refuse(http.StatusMethodNotAllowed, "bad_method", r.Method+" is not allowed here"), false)
		return
	}
	t := s.currentTerm()
	if t == nil {
		s.answerRefusal(w, r, "-", op, &refusal{status: http.StatusServiceUnavailable, code: "not_leader",
			reason: "this node is not the leader; retry", retryAfter: notLeaderRetry}, false)
		return
	}
	// Everything that can be refused without the body is refused before
	// it is read, and the connection closed: a stranger cannot make the
	// node wait for (or hold) a body.
	// Refusals before a request is verified count under key "-": a
	// stranger who knows a key's name cannot skew its figures.
	p, pub, rf := t.precheck(r, arrived)
	if rf != nil {
		label := "-"
		// Close without reading the body: net/http would otherwise read
		// up to 256 KiB of it before closing.
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Now())
		s.answerRefusal(w, r, label, op, rf, true)
		return
	}
	// The body is read within its endpoint's bound and the body budgets
	// (budget.go): what strangers send costs the node at most the
	// budgets, whatever they send.
	body, release, rf := s.readBody(w, r, op, p.Key)
	if rf != nil {
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Now())
		s.answerRefusal(w, r, "-", op, rf, true)
		return
	}
	defer release()
	key, verified, rf := t.authenticate(r, p, pub, body)
	if rf != nil {
		label := "-"
		if verified {
			label = key
			t.refused(key, rf.counted())
		}
		s.answerRefusal(w, r, label, op, rf, true)
		return
	}
	t.seen(key)
	req := &request{w: w, r: r, t: t, key: key, pub: pub, op: op, body: body}
	var res any
	switch op {
	case "take":
		res, rf = s.take(req)
	case "job":
		res, rf = s.readJob(req, ident)
	case "update":
		res, rf = s.update(req, ident)
	case "abort":
		res, rf = s.abort(req, ident)
	case "done":
		res, rf = s.done(req, ident)
	case "report":
		res, rf = s.report(req)
	case "unregister":
		res, rf = s.unregister(req)
	case "whoami":
		res = s.whoami(req)
	case "control":
		rf = s.control(req)
		if rf == nil {
			metrics.APIRequest(key, op, http.StatusOK)
			return
		}
	}
	if rf != nil {
		if rf.status == http.StatusForbidden || rf.status == http.StatusRequestEntityTooLarge || rf.status == http.StatusTooManyRequests {
			t.refused(key, rf.counted())
		}
		s.answerRefusal(w, r, key, op, rf, true)
		return
	}
	metrics.APIRequest(key, op, http.StatusOK)
	writeJSON(w, http.StatusOK, res)
}

// route maps a request to its operation ("" when the path exists but not
// for this method) and the job ident of /v1/jobs/IDENT paths.
func route(r *http.Request) (op, ident string, ok bool) {
	path, _ := wire.SplitRequestURI(r.RequestURI)
	if path == "" || path[0] != '/' {
		path = r.URL.EscapedPath()
	}
	m := r.Method
	pick := func(method, o string) string {
		if m == method {
			return o
		}
		return ""
	}
	switch path {
	case wire.PathTake:
		return pick(http.MethodPost, "take"), "", true
	case wire.PathControl:
		return pick(http.MethodGet, "control"), "", true
	case wire.PathPipeline:
		switch m {
		case http.MethodPut:
			return "report", "", true
		case http.MethodDelete:
			return "unregister", "", true
		case http.MethodGet:
			return "whoami", "", true
		}
		return "", "", true
	}
	rest, found := strings.CutPrefix(path, wire.PathJobs)
	if !found || rest == "" {
		return "", "", false
	}
	esc, action, _ := strings.Cut(rest, "/")
	id, err := url.PathUnescape(esc)
	if err != nil || id == "" || strings.Contains(action, "/") {
		return "", "", false
	}
	switch action {
	case "":
		return pick(http.MethodGet, "job"), id, true
	case "update", "abort", "done":
		return pick(http.MethodPost, action), id, true
	}
	return "", "", false
}

func (s *Server) answerRefusal(w http.ResponseWriter, r *http.Request, key, op string, rf *refusal, count bool) {
	// Not the peer's doing: a standby's or fenced node's 503, a store
	// failure (logged where it happens).
	if rf.code != "not_leader" && rf.status < 500 || rf.code == "body_budget" {
		if count {
			metrics.APIRefusal(key, rf.counted())
		}
		s.logRefusal(r, key, op, rf)
	}
	metrics.APIRequest(key, op, rf.status)
	if rf.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rf.retryAfter))
	}
	writeJSON(w, rf.status, wire.Error{Error: rf.code, Reason: rf.reason})
}

// logRefusal logs a refusal through the node's refusal log
// (internal/refusal): per reason, the first at once, then one line every
// 10 s with how many were refused, from how many addresses, and the
// busiest (IPv6 by /64). Counted in /metrics all the same.
func (s *Server) logRefusal(r *http.Request, key, op string, rf *refusal) {
	named := r.Header.Get(wire.HeaderKey)
	if len(named) > 64 {
		named = named[:64] + "…"
	}
	s.refusals.Refused("api_"+rf.counted(), addrClass(remoteIP(r.RemoteAddr)), "key", key, "named_key", named, "op", op,
		"status", rf.status, "error", rf.code, "reason", rf.reason)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal","reason":"encoding the answer failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// precheck is what is checked before a request's body is read: the
// signature headers well-formed, the key registered and not revoked, the
// timestamp fresh (the announced body length is readBody's). It
// returns the parsed headers (p.Key also on a refusal, for counting) and
// the key's public key.
func (t *term) precheck(r *http.Request, arrived time.Time) (wire.Parsed, ed25519.PublicKey, *refusal) {
	p, err := wire.ParseHeaders(r.Header.Get)
	if err != nil {
		code := wire.ErrMalformed.Error()
		if errors.Is(err, wire.ErrMissing) {
			code = wire.ErrMissing.Error()
		}
		return wire.Parsed{Key: r.Header.Get(wire.HeaderKey)}, nil, refuse(http.StatusUnauthorized, code, err.Error())
	}
	pub, revoked := t.publicKey(p.Key)
	if pub == nil && wire.ValidKeyName(p.Key) {
		// Registered since the last read? (pipeline-key add, then the
		// pipeline's first request at once.)
		t.knowKeysSince(r.Context(), arrived)
		pub, revoked = t.publicKey(p.Key)
	}
	if revoked {
		return p, nil, refuse(http.StatusUnauthorized, "revoked_key", "key "+p.Key+" was revoked")
	}
	if pub == nil {
		return p, nil, refuse(http.StatusUnauthorized, "unknown_key", "no key named "+p.Key+" is registered")
	}
	if err := p.Fresh(t.s.opt.Now()); err != nil {
		return p, nil, refuse(http.StatusUnauthorized, wire.ErrStale.Error(), err.Error())
	}
	return p, pub, nil
}

// authenticate checks the signature against the request as received
// (headers prechecked, body read), records the nonce, and then takes the
// request from the key's rate budget: only a verified request (signed by
// the key, its nonce new) spends it, so a replay cannot use up a
// pipeline's budget. It returns the key name and whether the request was
// verified (a refusal after that counts under the key).
func (t *term) authenticate(r *http.Request, p wire.Parsed, pub ed25519.PublicKey, body []byte) (string, bool, *refusal) {
	path, rawQuery := wire.SplitRequestURI(r.RequestURI)
	if err := p.Verify(pub, r.Method, path, rawQuery, body, t.s.opt.Now()); err != nil {
		code := wire.ErrBadSig.Error()
		if errors.Is(err, wire.ErrStale) {
			code = wire.ErrStale.Error()
		}
		return p.Key, false, refuse(http.StatusUnauthorized, code, err.Error())
	}
	res, err := t.s.store.CheckNonce(r.Context(), p.Key, p.Nonce, p.Timestamp, NonceWindow, MaxNonces)
	if err != nil {
		return p.Key, false, storeRefusal(err)
	}
	switch res {
	case store.NonceReplayed:
		return p.Key, false, refuse(http.StatusUnauthorized, "replayed_nonce", "this nonce was already used; sign every request with a new one")
	case store.NonceTooMany:
		return p.Key, true, &refusal{status: http.StatusTooManyRequests, code: "rate_limited",
			reason: fmt.Sprintf("more than %d requests in %s", MaxNonces, NonceWindow), retryAfter: 5}
	}
	if rf := t.rateLimit(p.Key); rf != nil {
		return p.Key, true, rf
	}
	return p.Key, true, nil
}

// storeRefusal turns a Redis failure into a 503 (fenced: not the
// leader) or a 500.
func storeRefusal(err error) *refusal {
	if store.IsFenced(err) {
		return &refusal{status: http.StatusServiceUnavailable, code: "not_leader",
			reason: "this node is no longer the leader; retry", retryAfter: notLeaderRetry}
	}
	return &refusal{status: http.StatusInternalServerError, code: "internal", reason: "the node's store failed; retry", retryAfter: 1}
}

func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// decode reads body into v, refusing unknown fields and trailing data.
func decode(body []byte, v any) *refusal {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(http.StatusBadRequest, "bad_request", "body: "+err.Error())
	}
	if dec.More() {
		return refuse(http.StatusBadRequest, "bad_request", "body: data after the JSON value")
	}
	return nil
}

// pubKeyOf parses a stored public key; nil when it does not parse.
func pubKeyOf(text string) ed25519.PublicKey {
	k, err := wire.ParsePublicKey(text)
	if err != nil {
		return nil
	}
	return k
}

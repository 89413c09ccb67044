package web

// Signing in through IRC (doc/web.md, Signing in and acting): !login
// issues a one-time code (LoginLink), /login turns it into a session
// cookie, /session tells the page who it is signed in as, /logout ends
// it. Sessions live in Redis (store/websessions.go), so every node of an
// HA pair sees them; only the leader acts (actions.go).

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/store"
)

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "archivebot_session"

// CodeTTL is how long a sign-in link works.
const CodeTTL = bot.LoginLinkTTL

// Presence is what the web needs of the IRC front end, read when an
// action runs: a nick's rank in a channel, and the services account it
// is logged into (known false: the server tells no accounts).
type Presence interface {
	Rank(channel, nick string) bot.Rank
	Account(nick string) (account string, known bool)
}

// Commander runs a command as if typed in IRC: *bot.Bot.
type Commander interface {
	Handle(ctx context.Context, req bot.Request, out bot.Replier)
}

// ActionOptions switches dashboard sign-in and actions on.
type ActionOptions struct {
	// PublicURL is http.public_url, the base of sign-in links.
	PublicURL string
	Bot       Commander
	// Presence returns the IRC front end's live state; nil while there is
	// none (not connected, a standby, the console).
	Presence func() Presence
	// Leader reports whether this node acts (nil: always) and, when it
	// does not, who does ("" when nobody holds the lease).
	Leader func() (leading bool, leader string)
	// Say posts text in channel, as the bot (the channel sees the action).
	Say func(ctx context.Context, channel, text string) error
	// Channels are the configured channels; the first is where an action
	// on a job started elsewhere (or by another program) is judged.
	Channels func() []string

	SessionTTL       time.Duration
	SessionsPerNick  int
	SessionsTotal    int
	ActionsPerMinute int
	AddressPerMinute int
}

// randomToken returns n random bytes, base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// codeRE is the shape of the codes LoginLink makes (16 bytes, base64url).
var codeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// shortCode is what logs may show of a code.
func shortCode(code string) string {
	if len(code) > 4 {
		return code[:4] + "…"
	}
	return "…"
}

// LoginLink issues a one-time sign-in link for the nick of req, bound
// to its services account when the server tells it (bot.Options.Login).
func (s *Server) LoginLink(ctx context.Context, req bot.Request) (string, error) {
	a := s.opt.Actions
	if a == nil {
		return "", errors.New("dashboard sign-in is off")
	}
	account, known := "", false
	if p := a.presence(); p != nil {
		account, known = p.Account(req.Nick)
	}
	code := randomToken(16)
	if err := s.store.CreateLoginCode(ctx, code, req.Nick, nickKey(req), account, known, CodeTTL); err != nil {
		return "", err
	}
	s.log.Info("sign-in link issued", "nick", req.Nick, "account", account, "account_known", known, "code", shortCode(code))
	return strings.TrimRight(a.PublicURL, "/") + "/login?code=" + code, nil
}

// Logout ends every dashboard session of req's nick (!logout).
func (s *Server) Logout(ctx context.Context, req bot.Request) (int, error) {
	n, err := s.store.RevokeWebSessionsOf(ctx, nickKey(req))
	if err == nil && n > 0 {
		s.log.Info("dashboard sessions ended by !logout", "nick", req.Nick, "sessions", n)
	}
	return n, err
}

func nickKey(req bot.Request) string {
	if req.NickKey != "" {
		return req.NickKey
	}
	return strings.ToLower(req.Nick)
}

func (a *ActionOptions) presence() Presence {
	if a.Presence == nil {
		return nil
	}
	return a.Presence()
}

// addSessions registers sign-in, sign-out and the actions.
func (s *Server) addSessions(mux *http.ServeMux) {
	mux.HandleFunc("GET /login", s.handleLoginPage)
	mux.HandleFunc("POST /login", s.handleLogin)
	mux.HandleFunc("POST /logout", s.handleLogout)
	mux.HandleFunc("GET /session", s.handleSession)
	mux.HandleFunc("POST /actions/{action}", s.handleAction)
}

// postPath reports whether path takes POST (the guard lets only these
// through).
func postPath(path string) bool {
	return path == "/login" || path == "/logout" || strings.HasPrefix(path, "/actions/")
}

var loginTmpl = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — ArchiveBot</title><link rel="stylesheet" href="/static/style.css"></head>
<body><main class="login"><h1>{{.Title}}</h1><p id="login-message">{{.Message}}</p>
{{if .Code}}<form method="post" action="/login"><input type="hidden" name="code" value="{{.Code}}">
<button type="submit" id="signin">Sign in as {{.Nick}}</button></form>
<p class="hint">Your rank in the channel is checked each time you act, not now.</p>{{end}}
<p><a href="/">Back to the dashboard</a></p></main></body></html>
`))

type loginPage struct{ Title, Message, Code, Nick string }

func (s *Server) loginPage(w http.ResponseWriter, status int, p loginPage) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	loginTmpl.Execute(w, p)
}

// refusePage answers a sign-in that does not happen, with the reason.
func (s *Server) refusePage(w http.ResponseWriter, status int, reason, msg string) {
	metrics.WebRefused(reason)
	s.loginPage(w, status, loginPage{Title: "Not signed in", Message: msg + " Nothing was changed."})
}

const newLinkHint = " Type !login in the channel (or to the bot in private) for a new link."

// codeRefusal maps a refused code to its page.
func (s *Server) codeRefusal(w http.ResponseWriter, err error) bool {
	var le *store.SessionLimitError
	switch {
	case errors.Is(err, store.ErrCodeUnknown):
		s.refusePage(w, http.StatusNotFound, "code_unknown", "This sign-in link is not one the bot issued, or it was issued long ago (links work for "+bot.LoginLinkValidity()+")."+newLinkHint)
	case errors.Is(err, store.ErrCodeUsed):
		s.refusePage(w, http.StatusGone, "code_used", "This sign-in link was already used: each link works once."+newLinkHint)
	case errors.Is(err, store.ErrCodeExpired):
		s.refusePage(w, http.StatusGone, "code_expired", "This sign-in link expired: links work for "+bot.LoginLinkValidity()+"."+newLinkHint)
	case errors.As(err, &le):
		reason := "sessions_total"
		if le.PerNick {
			reason = "sessions_per_nick"
		}
		s.refusePage(w, http.StatusTooManyRequests, reason, "Not signed in: "+le.Error()+".")
	default:
		return false
	}
	return true
}

// signInOff answers when sign-in is not configured.
func (s *Server) signInOff(w http.ResponseWriter) bool {
	if s.opt.Actions != nil {
		return false
	}
	s.refusePage(w, http.StatusNotFound, "off", "Signing in to the dashboard is off on this node (http.public_url is not set).")
	return true
}

// handleLoginPage is GET /login?code=…: it shows whose link it is and a
// button; the code is used only by the POST, so that a link preview
// (many IRC clients fetch links) cannot spend it.
func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if s.signInOff(w) || !s.allowAddress(w, r, true) {
		return
	}
	code := r.URL.Query().Get("code")
	if !codeRE.MatchString(code) {
		s.codeRefusal(w, store.ErrCodeUnknown)
		return
	}
	c, err := s.store.PeekLoginCode(r.Context(), code)
	switch {
	case err != nil:
		s.storeError(w, r, err)
	case c == nil:
		s.codeRefusal(w, store.ErrCodeUnknown)
	case c.Used:
		s.codeRefusal(w, store.ErrCodeUsed)
	case !c.Expires.After(s.now()):
		s.codeRefusal(w, store.ErrCodeExpired)
	default:
		s.loginPage(w, http.StatusOK, loginPage{Title: "Sign in to ArchiveBot", Code: code, Nick: c.Nick,
			Message: "This link was made for " + c.Nick + " by !login. Signing in lets you act on jobs from the dashboard with your rank in the job's channel."})
	}
}

// handleLogin is POST /login: the code becomes a session cookie.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if s.signInOff(w) || !s.allowAddress(w, r, true) {
		return
	}
	if reason := crossSite(r, s.opt.Actions.PublicURL); reason != "" {
		s.refusePage(w, http.StatusForbidden, "cross_site", reason)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	code := r.PostFormValue("code")
	if !codeRE.MatchString(code) {
		s.codeRefusal(w, store.ErrCodeUnknown)
		return
	}
	a := s.opt.Actions
	token := randomToken(32)
	ws, err := s.store.LoginWithCode(r.Context(), code, token, randomToken(32), a.SessionTTL, a.SessionsPerNick, a.SessionsTotal)
	if err != nil {
		if !s.codeRefusal(w, err) {
			s.storeError(w, r, err)
		}
		return
	}
	metrics.WebSignIn()
	s.log.Info("dashboard sign-in", "nick", ws.Nick, "account", ws.Account, "account_known", ws.AccountKnown,
		"code", shortCode(code), "session", ws.ID[:12], "expires", ws.Expires.UTC().Format(time.RFC3339))
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", Expires: ws.Expires,
		MaxAge: int(time.Until(ws.Expires) / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookie(r, a.PublicURL)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// secureCookie: Secure when this request came over TLS or the public URL
// is https (a TLS-terminating proxy in front).
func secureCookie(r *http.Request, publicURL string) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(publicURL), "https:")
}

// crossSite says why a state-changing request comes from another site
// ("" when it does not): the browser's Sec-Fetch-Site, else its Origin,
// must be this origin. A client that sends neither (curl) is not a browser
// page another site controls; the CSRF token still binds it.
func crossSite(r *http.Request, publicURL string) string {
	// A browser that sends Sec-Fetch-Site is judged by it alone: under
	// the pages' Referrer-Policy no-referrer its form posts say Origin
	// null even from the same origin.
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return ""
	case "":
	default:
		return "Refused: this request came from another site (Sec-Fetch-Site: " + clip(site, 20) + "); the dashboard acts only on requests from its own pages."
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && (strings.EqualFold(u.Host, r.Host) || sameOrigin(origin, publicURL)) {
		return ""
	}
	return "Refused: this request came from another site (Origin " + clip(origin, 80) + "); the dashboard acts only on requests from its own pages."
}

func sameOrigin(origin, publicURL string) bool {
	if publicURL == "" {
		return false
	}
	a, err1 := url.Parse(origin)
	b, err2 := url.Parse(publicURL)
	return err1 == nil && err2 == nil && strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// session returns the request's live session, or nil and why not.
func (s *Server) session(r *http.Request) (*store.WebSession, string, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, "Not signed in: type !login in the channel for a sign-in link.", nil
	}
	if len(c.Value) > 64 {
		return nil, "Not signed in: that session cookie is not one of ours. Type !login in the channel for a sign-in link.", nil
	}
	ws, err := s.store.WebSessionByToken(r.Context(), c.Value)
	if err != nil {
		return nil, "", err
	}
	if ws == nil {
		return nil, "Not signed in: that session ended (expired, signed out or revoked). Type !login in the channel for a new link.", nil
	}
	return ws, "", nil
}

// checkCSRF compares the request's token (header X-CSRF-Token, or form
// field csrf) with the session's.
func checkCSRF(r *http.Request, ws *store.WebSession) string {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if got == "" {
		return "Refused: the request carries no CSRF token (reload the page)."
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(ws.CSRF)) != 1 {
		return "Refused: wrong CSRF token (reload the page)."
	}
	return ""
}

// sessionInfo is GET /session.
type sessionInfo struct {
	Nick         string `json:"nick"`
	Account      string `json:"account,omitempty"`
	AccountKnown bool   `json:"account_known"`
	Expires      int64  `json:"expires"`
	CSRF         string `json:"csrf"`
	Leader       bool   `json:"leader"`
	LeaderNode   string `json:"leader_node,omitempty"`
}

// handleSession tells the page who it is signed in as, its CSRF token,
// and whether this node acts. Never cached, never cross-origin.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	if s.opt.Actions == nil {
		privateJSON(w, http.StatusNotFound, errorBody{"dashboard sign-in is off on this node (http.public_url is not set)"})
		return
	}
	ws, why, err := s.session(r)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if ws == nil {
		privateJSON(w, http.StatusUnauthorized, errorBody{why})
		return
	}
	leading, leader := s.leader()
	privateJSON(w, http.StatusOK, sessionInfo{Nick: ws.Nick, Account: ws.Account, AccountKnown: ws.AccountKnown,
		Expires: ws.Expires.Unix(), CSRF: ws.CSRF, Leader: leading, LeaderNode: leader})
}

func (s *Server) leader() (bool, string) {
	if s.opt.Actions.Leader == nil {
		return true, ""
	}
	return s.opt.Actions.Leader()
}

// handleLogout is POST /logout: ends this session.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if s.opt.Actions == nil {
		privateJSON(w, http.StatusNotFound, errorBody{"dashboard sign-in is off on this node"})
		return
	}
	ws, ok := s.authorize(w, r)
	if !ok {
		return
	}
	if _, err := s.store.RevokeWebSession(r.Context(), ws.ID); err != nil {
		s.storeError(w, r, err)
		return
	}
	s.log.Info("dashboard sign-out", "nick", ws.Nick, "session", ws.ID[:12])
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureCookie(r, s.opt.Actions.PublicURL)})
	privateJSON(w, http.StatusOK, map[string]any{"signed_out": ws.Nick})
}

// authorize checks a state-changing request: rate per address, same
// site, a live session, its CSRF token. It answers the refusal itself.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (*store.WebSession, bool) {
	if !s.allowAddress(w, r, false) {
		return nil, false
	}
	if why := crossSite(r, s.opt.Actions.PublicURL); why != "" {
		s.refuse(w, http.StatusForbidden, "cross_site", why)
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, http.StatusBadRequest, "bad_input", "Refused: the form could not be read (at most 8 KiB, form-encoded).")
		return nil, false
	}
	ws, why, err := s.session(r)
	if err != nil {
		s.storeError(w, r, err)
		return nil, false
	}
	if ws == nil {
		s.refuse(w, http.StatusUnauthorized, "no_session", why)
		return nil, false
	}
	if why := checkCSRF(r, ws); why != "" {
		s.refuse(w, http.StatusForbidden, "csrf", why)
		return nil, false
	}
	return ws, true
}

// refuse answers a refused action with its reason and counts it.
func (s *Server) refuse(w http.ResponseWriter, status int, reason, msg string) {
	metrics.WebRefused(reason)
	privateJSON(w, status, errorBody{msg + " Nothing was changed."})
}

// privateJSON is writeJSON without the open CORS header: answers about a
// session are for its own pages only.
func privateJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`+"\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}

// WhoisNote is what !whois adds about nick's dashboard sessions
// (bot.AddWhoisNote): "" when it has none.
func (s *Server) WhoisNote(ctx context.Context, nick string) string {
	list, err := s.store.WebSessions(ctx)
	if err != nil {
		return "dashboard sessions: unknown (Redis did not answer)"
	}
	n, last := 0, time.Time{}
	for _, ws := range list {
		if strings.EqualFold(ws.Nick, nick) {
			n++
			if ws.Expires.After(last) {
				last = ws.Expires
			}
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return "signed in on the dashboard until " + last.UTC().Format("15:04Z")
	}
	return itoa(n) + " dashboard sessions, the last until " + last.UTC().Format("15:04Z")
}

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
	"net"
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
const CodeTTL = 2 * time.Minute

// Presence is what the web needs of the IRC front end, read when an
// action runs: a nick's rank in a channel, and the services account it
// is logged into (known false: the server tells no accounts).
type Presence interface {
	Rank(channel, nick string) bot.Rank
	Account(nick string) (account string, known bool)
	// Presence names nick's unbroken stay in the bot's channels ("" while
	// it is in none); a session made without an account is bound to it.
	Presence(nick string) string
	// AllowCommand counts one command of nick against its IRC throttle
	// and says whether it may run; CommandLimits are that throttle's
	// limits a minute (without, with a rank).
	AllowCommand(nick string, privileged bool) bool
	CommandLimits() (plain, privileged int)
	// Channels are the bot's channels (where a rank at sign-in is read).
	Channels() []string
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

	SessionTTL      time.Duration
	SessionsPerNick int
	SessionsTotal   int
	// SessionsRankless bounds the sessions of nicks that had no rank in
	// any of the bot's channels at !login (web.sessions_rankless): below
	// SessionsTotal, so that strangers never fill the room of those with
	// a rank. 0: no bound of its own.
	SessionsRankless int
	ActionsPerMinute int
	AddressPerMinute int
	// Secret is the key of the sessions' ids, MACs and CSRF tokens
	// (web.secret_file); empty: a random key of this process.
	Secret []byte
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
// to its services account when the server tells it, else (and when the
// nick is logged into none) to the nick's present stay in the bot's
// channels, with the highest rank it has there now (bot.Options.Login).
func (s *Server) LoginLink(ctx context.Context, req bot.Request) (string, error) {
	a := s.opt.Actions
	if a == nil {
		return "", errors.New("dashboard sign-in is off")
	}
	c := store.LoginCode{Nick: req.Nick, NickKey: nickKey(req), Expires: s.now().Add(CodeTTL)}
	if p := a.presence(); p != nil {
		c.Account, c.AccountKnown = p.Account(req.Nick)
		c.Presence = p.Presence(req.Nick)
		for _, ch := range p.Channels() {
			c.Rank = max(c.Rank, int(p.Rank(ch, req.Nick)))
		}
		if c.Account == "" && c.Presence == "" {
			s.refusals.Refused("web_login_absent", req.Nick)
			return "", bot.LoginRefusal("on this server a dashboard session is bound to your presence in my channels, and you are in none of them: join one and type !login again.")
		}
		if c.Account == "" {
			s.endStaleSessions(ctx, c.NickKey, c.Presence)
		}
	}
	code := randomToken(16)
	id := s.key.id("code", code)
	c.MAC = s.key.codeMAC(id, c)
	if err := s.store.CreateLoginCode(ctx, id, c); err != nil {
		return "", err
	}
	s.log.Info("sign-in link issued", "nick", req.Nick, "account", c.Account, "account_known", c.AccountKnown,
		"rank", rankName(bot.Rank(c.Rank)), "code", shortCode(code))
	return strings.TrimRight(a.PublicURL, "/") + "/login?code=" + code, nil
}

// presenceEnds bounds the nicks waiting for RunPresenceEnds; past it a
// nick's sessions end at their next request (or its next !login) instead.
const presenceEnds = 1024

// EndPresence ends, soon, the sessions bound to the presence of the nick
// whose key is nickKey, which ended (the IRC client's OnPresenceEnd). It
// never blocks: RunPresenceEnds does the work.
func (s *Server) EndPresence(nickKey string) {
	if s.opt.Actions == nil {
		return
	}
	select {
	case s.ends <- nickKey:
	default:
		s.refusals.Refused("web_presence_end_queue_full", nickKey, "queue", presenceEnds,
			"why", "sessions of nicks that left end at their next request instead")
	}
}

// RunPresenceEnds ends the sessions EndPresence was told of, until ctx
// ends.
func (s *Server) RunPresenceEnds(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-s.ends:
			current := ""
			if p := s.opt.Actions.presence(); p != nil {
				current = p.Presence(k)
			}
			c, cancel := context.WithTimeout(ctx, requestTimeout)
			s.endStaleSessions(c, k, current)
			cancel()
		}
	}
}

// endStaleSessions ends the nick's sessions bound to an earlier presence
// (someone who held the nick before): they can never act again, and must
// not hold the nick's room.
func (s *Server) endStaleSessions(ctx context.Context, nickKey, presence string) {
	list, err := s.store.NickSessions(ctx, nickKey)
	if err != nil {
		return
	}
	for _, ws := range list {
		if ws.Account == "" && ws.Presence != presence {
			if ok, _ := s.store.RevokeWebSession(ctx, ws.ID); ok {
				s.log.Info("dashboard session ended: its nick's presence ended", "nick", ws.Nick, "session", ws.ID[:12])
			}
		}
	}
}

// Logout ends the dashboard sessions that are the requester's (!logout).
// Where the server tells no accounts, those are its nick's. Where it
// tells them, a session bound to an account is its holder's, whatever nick
// it was made for: the requester ends the sessions bound to the account it
// is logged into now (under any nick), and its nick's sessions bound to no
// account; a session bound to another account is left alone, so whoever
// takes a nick cannot end its owner's sessions.
func (s *Server) Logout(ctx context.Context, req bot.Request) (int, error) {
	acct, known := "", false
	if a := s.opt.Actions; a != nil {
		if p := a.presence(); p != nil {
			acct, known = p.Account(req.Nick)
		}
	}
	all, err := s.store.WebSessions(ctx)
	if err != nil {
		return 0, err
	}
	key := nickKey(req)
	ended, left := 0, 0
	for _, ws := range all {
		var mine bool
		switch {
		case ws.AccountKnown && ws.Account != "":
			mine = known && acct != "" && strings.EqualFold(ws.Account, acct)
		case ws.NickKey != key:
			mine = false
		case ws.AccountKnown: // made while the nick was logged into none
			mine = known && acct == ""
		default: // made where the server told no accounts: the nick's
			mine = true
		}
		if !mine {
			if ws.NickKey == key {
				left++
			}
			continue
		}
		ok, err := s.store.RevokeWebSession(ctx, ws.ID)
		if err != nil {
			return ended, err
		}
		if ok {
			ended++
		}
	}
	if ended > 0 || left > 0 {
		s.log.Info("dashboard sessions ended by !logout", "nick", req.Nick, "account", acct, "account_known", known,
			"sessions", ended, "left_bound_to_another_account", left)
	}
	return ended, nil
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

// refusePage answers a sign-in that does not happen, with the reason;
// counted and logged (rate-limited).
func (s *Server) refusePage(w http.ResponseWriter, r *http.Request, status int, reason, msg string) {
	metrics.WebRefused(reason)
	s.refusals.Refused("web_"+reason, remoteHost(r), "status", status, "why", msg)
	s.loginPage(w, status, loginPage{Title: "Not signed in", Message: msg + " Nothing was changed."})
}

const newLinkHint = " Type !login in the channel (or to the bot in private) for a new link."

// codeRefusal maps a refused code to its page.
func (s *Server) codeRefusal(w http.ResponseWriter, r *http.Request, err error) bool {
	var le *store.SessionLimitError
	switch {
	case errors.Is(err, store.ErrCodeUnknown):
		s.refusePage(w, r, http.StatusNotFound, "code_unknown", "This sign-in link is not one the bot issued (or it is older than 10 minutes)."+newLinkHint)
	case errors.Is(err, store.ErrCodeUsed):
		s.refusePage(w, r, http.StatusGone, "code_used", "This sign-in link was already used: each link works once."+newLinkHint)
	case errors.Is(err, store.ErrCodeExpired):
		s.refusePage(w, r, http.StatusGone, "code_expired", "This sign-in link expired: links work for 2 minutes."+newLinkHint)
	case errors.As(err, &le):
		reason := "sessions_total"
		switch {
		case le.PerNick:
			reason = "sessions_per_nick"
		case le.Rankless:
			reason = "sessions_rankless"
		}
		s.refusePage(w, r, http.StatusTooManyRequests, reason, "Not signed in: "+le.Error()+".")
	default:
		return false
	}
	return true
}

// signInOff answers when sign-in is not configured.
func (s *Server) signInOff(w http.ResponseWriter, r *http.Request) bool {
	if s.opt.Actions != nil {
		return false
	}
	s.refusePage(w, r, http.StatusNotFound, "off", "Signing in to the dashboard is off on this node (http.public_url is not set).")
	return true
}

// handleLoginPage is GET /login?code=…: it shows whose link it is and a
// button; the code is used only by the POST, so that a link preview
// (many IRC clients fetch links) cannot spend it.
func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if s.signInOff(w, r) || !s.allowAddress(w, r, true) {
		return
	}
	code := r.URL.Query().Get("code")
	if !codeRE.MatchString(code) {
		s.codeRefusal(w, r, store.ErrCodeUnknown)
		return
	}
	c, err := s.peekCode(r, code)
	switch {
	case err != nil:
		s.storeError(w, r, err)
	case c == nil:
		s.codeRefusal(w, r, store.ErrCodeUnknown)
	case c.Used:
		s.codeRefusal(w, r, store.ErrCodeUsed)
	case !c.Expires.After(s.now()):
		s.codeRefusal(w, r, store.ErrCodeExpired)
	default:
		s.loginPage(w, http.StatusOK, loginPage{Title: "Sign in to ArchiveBot", Code: code, Nick: c.Nick,
			Message: "This link was sent to " + c.Nick + " on IRC. Signing in lets you act on jobs from the dashboard with your rank in the job's channel."})
	}
}

// handleLogin is POST /login: the code becomes a session cookie.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if s.signInOff(w, r) || !s.allowAddress(w, r, true) {
		return
	}
	if reason := crossSite(r, s.opt.Actions.PublicURL, true); reason != "" {
		s.refusePage(w, r, http.StatusForbidden, "cross_site", reason)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	code := r.PostFormValue("code")
	if !codeRE.MatchString(code) {
		s.codeRefusal(w, r, store.ErrCodeUnknown)
		return
	}
	a := s.opt.Actions
	c, err := s.peekCode(r, code)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if c == nil {
		s.codeRefusal(w, r, store.ErrCodeUnknown)
		return
	}
	token := randomToken(32)
	now := s.now()
	ws := store.WebSession{ID: s.key.id("session", token), Nick: c.Nick, NickKey: c.NickKey, Account: c.Account,
		AccountKnown: c.AccountKnown, Rank: c.Rank, Presence: c.Presence,
		Created: time.UnixMilli(now.UnixMilli()), Expires: time.UnixMilli(now.Add(a.SessionTTL).UnixMilli())}
	ws.MAC = s.key.sessionMAC(ws)
	evicted, err := s.store.LoginWithCode(r.Context(), s.key.id("code", code), c.MAC, ws,
		store.SessionBounds{PerNick: a.SessionsPerNick, Total: a.SessionsTotal, Rankless: a.SessionsRankless})
	if err != nil {
		if !s.codeRefusal(w, r, err) {
			s.storeError(w, r, err)
		}
		return
	}
	metrics.WebSignIn()
	attrs := []any{"nick", ws.Nick, "account", ws.Account, "account_known", ws.AccountKnown, "rank", rankName(bot.Rank(ws.Rank)),
		"code", shortCode(code), "session", ws.ID[:12], "expires", ws.Expires.UTC().Format(time.RFC3339)}
	if evicted != "" {
		attrs = append(attrs, "replaced_rankless_session", evicted[:12])
	}
	s.log.Info("dashboard sign-in", attrs...)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", Expires: ws.Expires,
		MaxAge: int(time.Until(ws.Expires) / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookie(r, a.PublicURL)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// peekCode reads a code's record; nil when there is none, or when its
// MAC does not verify (written or rewritten by someone without the key:
// logged, and answered as a code never issued).
func (s *Server) peekCode(r *http.Request, code string) (*store.LoginCode, error) {
	id := s.key.id("code", code)
	c, err := s.store.PeekLoginCode(r.Context(), id)
	if err != nil || c == nil {
		return nil, err
	}
	if !macOK(c.MAC, s.key.codeMAC(id, *c)) {
		s.refusals.Refused("web_forged_code", remoteHost(r), "nick", c.Nick,
			"why", "a sign-in code in Redis does not carry its MAC: written by someone without web.secret_file's key, or by a node with another key")
		return nil, nil
	}
	return c, nil
}

// secureCookie: Secure when this request came over TLS or the public URL
// is https (a TLS-terminating proxy in front).
func secureCookie(r *http.Request, publicURL string) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(publicURL), "https:")
}

// crossSite says why a state-changing request comes from another site
// ("" when it does not): the browser's Sec-Fetch-Site, else its Origin,
// must be this origin. A request that sends neither (curl; a browser
// older than 2019) is not a page another site controls in a current
// browser: an action still needs its CSRF token, which no other site can
// read; a sign-in (login, true) needs no token, so it is refused unless
// the request proves it comes from the sign-in page (doc/web.md, What is
// promised).
func crossSite(r *http.Request, publicURL string, login bool) string {
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
		if login {
			return "Refused: this sign-in carries neither Sec-Fetch-Site nor Origin, so it cannot be told from another site's form; sign in from the link's page in a current browser."
		}
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

// session returns the request's live session and its token, or nil and
// why not. A session whose MAC does not verify is none; one bound to its
// nick's presence (made without an account) ends once that presence did.
func (s *Server) session(r *http.Request) (*store.WebSession, string, string, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil, "", "Not signed in: type !login in the channel for a sign-in link.", nil
	}
	if len(c.Value) > 64 {
		return nil, "", "Not signed in: that session cookie is not one of ours. Type !login in the channel for a sign-in link.", nil
	}
	ws, err := s.store.WebSession(r.Context(), s.key.id("session", c.Value))
	if err != nil {
		return nil, "", "", err
	}
	if ws == nil {
		return nil, "", "Not signed in: that session ended (expired, signed out or revoked). Type !login in the channel for a new link.", nil
	}
	if !macOK(ws.MAC, s.key.sessionMAC(*ws)) {
		s.refusals.Refused("web_forged_session", remoteHost(r), "nick", ws.Nick,
			"why", "a session in Redis does not carry its MAC: written or changed by someone without web.secret_file's key, or made by a node with another key")
		return nil, "", "Not signed in: that session does not verify (made by a node with another web.secret_file, or changed in Redis). Type !login in the channel for a new link.", nil
	}
	if why := s.presenceEnded(r.Context(), ws); why != "" {
		return nil, "", why, nil
	}
	return ws, c.Value, "", nil
}

// presenceEnded ends a session bound to its nick's presence once that
// presence ended (the nick parted, was kicked, quit, changed nick, or the
// bot reconnected): the next holder of the nick is someone else as far as
// the bot can tell. It says why, or "" when the session stands (or when
// there is no IRC connection to ask: actions are then refused anyway).
func (s *Server) presenceEnded(ctx context.Context, ws *store.WebSession) string {
	if ws.Account != "" {
		return ""
	}
	p := s.opt.Actions.presence()
	if p == nil {
		return ""
	}
	if now := p.Presence(ws.Nick); ws.Presence != "" && now == ws.Presence {
		return ""
	}
	if ok, _ := s.store.RevokeWebSession(ctx, ws.ID); ok {
		s.log.Info("dashboard session ended: its nick left the bot's channels or changed hands since sign-in", "nick", ws.Nick, "session", ws.ID[:12])
	}
	return "Not signed in: your session ended because " + ws.Nick + " left the bot's channels (or changed nick, or the bot reconnected) since you signed in; on this server a session lasts while its nick stays. Type !login in the channel for a new link."
}

// checkCSRF compares the request's token (header X-CSRF-Token, or form
// field csrf) with the session's, derived from its token.
func (s *Server) checkCSRF(r *http.Request, token string) string {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if got == "" {
		return "Refused: the request carries no CSRF token (reload the page)."
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.key.csrf(token))) != 1 {
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
	ws, token, why, err := s.session(r)
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
		Expires: ws.Expires.Unix(), CSRF: s.key.csrf(token), Leader: leading, LeaderNode: leader})
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
	if why := crossSite(r, s.opt.Actions.PublicURL, false); why != "" {
		s.refuse(w, r, http.StatusForbidden, "cross_site", why)
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, http.StatusBadRequest, "bad_input", "Refused: the form could not be read (at most 8 KiB, form-encoded).")
		return nil, false
	}
	ws, token, why, err := s.session(r)
	if err != nil {
		s.storeError(w, r, err)
		return nil, false
	}
	if ws == nil {
		s.refuse(w, r, http.StatusUnauthorized, "no_session", why)
		return nil, false
	}
	if why := s.checkCSRF(r, token); why != "" {
		s.refuse(w, r, http.StatusForbidden, "csrf", why)
		return nil, false
	}
	return ws, true
}

// refuse answers a refused action with its reason, counts it and logs it
// (rate-limited, with counts: internal/refusal).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, reason, msg string, attrs ...any) {
	metrics.WebRefused(reason)
	s.refusals.Refused("web_"+reason, remoteHost(r), append(append([]any{"status", status}, attrs...), "why", msg)...)
	privateJSON(w, status, errorBody{msg + " Nothing was changed."})
}

// remoteHost is the request's TCP peer address, without the port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
// (bot.AddWhoisNote; only voiced users and operators are told): "" when it
// has none. One round trip.
func (s *Server) WhoisNote(ctx context.Context, nick, nickKey string) string {
	exps, err := s.store.NickSessionExpiries(ctx, nickKey)
	if err != nil {
		return "dashboard sessions: unknown (Redis did not answer)"
	}
	switch len(exps) {
	case 0:
		return ""
	case 1:
		return "signed in on the dashboard until " + exps[0].UTC().Format("15:04Z")
	}
	return itoa(len(exps)) + " dashboard sessions, the last until " + exps[len(exps)-1].UTC().Format("15:04Z")
}

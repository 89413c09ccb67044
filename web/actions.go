package web

// Dashboard actions (doc/web.md, Signing in and acting). Each is the IRC
// command it stands for, run through the command table (Bot.Handle) as
// the signed-in nick, from the job's channel (the first configured
// channel for the queue actions pause and resume), with the rank the bot sees
// there now and Where "web": one permission check, one audit line, one
// history entry, the same replies. The channel sees them as
// "NICK (web): …"; the page gets them in the answer.

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/store"
)

// action is one dashboard action: the command it stands for and the
// form fields after the ident, in order.
type action struct {
	command string
	fields  []string
	// words are fields that must be one word (the rest may have spaces).
	words bool
	// queue: the action names a queue (the queue field: pending,
	// pending-ao, pending-large, pending:NAME or all), not a job; it is
	// judged and said in the first configured channel.
	queue bool
	// optional is a last field that may be left out and may have spaces
	// (!pause's reason).
	optional string
}

var actions = map[string]action{
	"ignore":        {command: "!ignore", fields: []string{"pattern"}},
	"abort":         {command: "!abort"},
	"delay":         {command: "!delay", fields: []string{"min", "max"}, words: true},
	"concurrency":   {command: "!concurrency", fields: []string{"n"}, words: true},
	"explain":       {command: "!explain", fields: []string{"note"}},
	"ignorereports": {command: "!ignorereports", fields: []string{"on"}, words: true},
	"fail":          {command: "!fail"},
	"move":          {command: "!move", fields: []string{"to"}, words: true},
	"pause":         {command: "!pause", queue: true, optional: "reason"},
	"resume":        {command: "!resume", queue: true},
}

// maxFieldBytes bounds one field (a pattern, a note).
const maxFieldBytes = 400

// actionText builds the command line of an action from the form, or
// says what is wrong with it.
func actionText(name string, r *http.Request) (string, string) {
	a, ok := actions[name]
	if !ok {
		return "", "Refused: there is no dashboard action " + clip(name, 30) + "."
	}
	parts := []string{a.command}
	if a.queue {
		q := strings.TrimSpace(r.PostFormValue("queue"))
		if why := fieldProblem("queue", q, true); why != "" {
			return "", why
		}
		if !store.ValidQueueName(q) {
			return "", "Refused: queue must be pending, pending-ao, pending-large, pending:NAME or all."
		}
		parts = append(parts, q)
	} else {
		id := r.PostFormValue("ident")
		if !bot.IsIdent(id) {
			return "", "Refused: ident must be a job ident (lowercase letters and digits)."
		}
		parts = append(parts, id)
	}
	for _, f := range a.fields {
		v := strings.TrimSpace(r.PostFormValue(f))
		if why := fieldProblem(f, v, a.words); why != "" {
			return "", why
		}
		parts = append(parts, v)
	}
	if a.optional != "" {
		if v := strings.TrimSpace(r.PostFormValue(a.optional)); v != "" {
			if why := fieldProblem(a.optional, v, false); why != "" {
				return "", why
			}
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, " "), ""
}

// fieldProblem says what is wrong with one form field, or "".
func fieldProblem(f, v string, word bool) string {
	switch {
	case v == "":
		return "Refused: " + f + " is missing."
	case len(v) > maxFieldBytes:
		return "Refused: " + f + " is longer than 400 bytes."
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "Refused: " + f + " contains a control character (a line break?)."
	case word && strings.IndexFunc(v, unicode.IsSpace) >= 0:
		return "Refused: " + f + " must be one word."
	}
	return ""
}

// actionResult is the answer to an action that reached the command table.
type actionResult struct {
	Command string   `json:"command"`
	Channel string   `json:"channel"`
	Rank    string   `json:"rank"`
	Replies []string `json:"replies"`
	// Unsaid is set when the channel could not be told (IRC down).
	Unsaid string `json:"unsaid,omitempty"`
}

func rankName(r bot.Rank) string {
	switch r {
	case bot.RankOp:
		return "op"
	case bot.RankVoice:
		return "voice"
	}
	return "none"
}

// handleAction is POST /actions/{action}.
func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) {
	a := s.opt.Actions
	if a == nil {
		metrics.WebRefused("off")
		s.refusals.Refused("web_off", remoteHost(r))
		privateJSON(w, http.StatusNotFound, errorBody{"dashboard actions are off on this node (http.public_url is not set)"})
		return
	}
	ws, ok := s.authorize(w, r)
	if !ok {
		return
	}
	if leading, leader := s.leader(); !leading {
		metrics.WebRefused("standby")
		s.refusals.Refused("web_standby", remoteHost(r), "leader", leader)
		msg := "This node is a standby: only the leader acts. Nothing was changed."
		if leader != "" {
			msg = "This node is a standby: only the leader, " + leader + ", acts; open the dashboard there. Nothing was changed."
		}
		w.Header().Set("Retry-After", "5")
		privateJSON(w, http.StatusServiceUnavailable, map[string]string{"error": msg, "leader": leader})
		return
	}
	if !s.limits.session.allow(ws.ID, s.now()) {
		s.refuse(w, r, http.StatusTooManyRequests, "rate_session",
			"Refused: at most "+itoa(a.ActionsPerMinute)+" actions a minute per session; wait a little.", "nick", ws.Nick)
		return
	}
	name := r.PathValue("action")
	text, why := actionText(name, r)
	if why != "" {
		s.refuse(w, r, http.StatusBadRequest, "bad_input", why)
		return
	}
	p := a.presence()
	if p == nil {
		s.refuse(w, r, http.StatusServiceUnavailable, "no_irc", "Refused: the bot is not connected to IRC right now, so it cannot see your rank; try again shortly.")
		return
	}
	channel, err := s.actionChannel(r.Context(), actions[name], r.PostFormValue("ident"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if channel == "" {
		s.refuse(w, r, http.StatusServiceUnavailable, "no_irc", "Refused: the bot has no channel to judge your rank in.")
		return
	}
	nick, nickKey := ws.Nick, ws.NickKey
	if why := accountMismatch(ws, p); why != "" {
		holder := accountHolder(ws, p, channel)
		if holder == "" {
			s.log.Warn("dashboard action refused: account", "nick", ws.Nick, "session", ws.ID[:12], "why", why)
			s.refuse(w, r, http.StatusForbidden, "account", why)
			return
		}
		// The account's holder, under another nick now: the session is
		// theirs, not the nick's.
		s.log.Info("dashboard session acts through its account's holder", "session_nick", ws.Nick, "nick", holder, "account", ws.Account, "session", ws.ID[:12])
		nick, nickKey = holder, strings.ToLower(holder)
	}
	rank := p.Rank(channel, nick)
	if ws.Account == "" && bot.Rank(ws.Rank) < rank {
		// A session bound to the nick's presence, not an account, never
		// carries more rank than the nick had when it signed in.
		rank = bot.Rank(ws.Rank)
	}
	// The nick's IRC throttle: a web action counts as one of its commands.
	if !p.AllowCommand(nick, rank >= bot.RankVoice) {
		plain, priv := p.CommandLimits()
		w.Header().Set("Retry-After", "60")
		s.refuse(w, r, http.StatusTooManyRequests, "rate_irc", "Refused: "+nick+" is at its command limit (IRC and dashboard together: "+
			itoa(plain)+" commands a minute, "+itoa(priv)+" for voiced users and operators); wait a little.", "nick", nick)
		return
	}
	// The account as the IRC front end would fill it (jobs.require_account).
	acct, _ := p.Account(nick)
	req := bot.Request{Nick: nick, NickKey: nickKey, Channel: channel, Rank: rank, Account: acct, Text: text, Where: bot.WhereWeb}
	out := &webReplier{ctx: r.Context(), say: a.Say, channel: channel, prefix: nick + " (web): "}
	metrics.WebAction(name)
	a.Bot.Handle(r.Context(), req, out)
	if !out.said {
		// Refused by the command table (rank, usage, the job's state…):
		// the page says why, the channel hears nothing.
		s.refusals.Refused("web_action_"+out.outcome, ws.Nick, "command", name, "channel", channel, "rank", rankName(rank))
	}
	out.mu.Lock()
	res := actionResult{Command: text, Channel: channel, Rank: rankName(rank), Replies: out.replies, Unsaid: out.unsaid}
	out.mu.Unlock()
	privateJSON(w, http.StatusOK, res)
}

// accountMismatch applies the account binding: a session made while the
// server told accounts acts only through a nick logged into the same
// account (or, when it had none, still none); a session made without
// account information acts only while the server still tells none
// (doc/web.md, What is promised).
func accountMismatch(ws *store.WebSession, p Presence) string {
	acct, known := p.Account(ws.Nick)
	switch {
	case ws.AccountKnown && !known:
		return "Refused: your session is bound to a services account, and the bot cannot see which account " + ws.Nick + " is logged into now. Sign in again with !login."
	case ws.AccountKnown && acct != ws.Account:
		if acct == "" {
			return "Refused: your session is bound to the account " + ws.Account + ", and " + ws.Nick + " is now logged into none. Sign in again with !login."
		}
		if ws.Account == "" {
			return "Refused: your session was made while " + ws.Nick + " was logged into no account; it is now logged into " + acct + ". Sign in again with !login."
		}
		return "Refused: your session is bound to the account " + ws.Account + ", and " + ws.Nick + " is now logged into " + acct + ". Sign in again with !login."
	case !ws.AccountKnown && known:
		return "Refused: your session was made before the bot could see services accounts. Sign in again with !login."
	}
	return ""
}

// AccountHolders is what a Presence may tell besides: the nicks logged
// into a services account (the IRC front end does).
type AccountHolders interface {
	NicksOf(account string) []string
}

// accountHolder is the nick through which a session bound to an account
// acts when its own nick is not logged into that account now: a nick
// that is (the account's holder, renamed), the highest ranked in channel
// when several are; "" when none is, or the session is bound to no
// account, or the front end cannot tell.
func accountHolder(ws *store.WebSession, p Presence, channel string) string {
	h, ok := p.(AccountHolders)
	if !ok || !ws.AccountKnown || ws.Account == "" {
		return ""
	}
	best, bestRank := "", bot.Rank(-1)
	for _, n := range h.NicksOf(ws.Account) {
		if a, known := p.Account(n); !known || !strings.EqualFold(a, ws.Account) {
			continue
		}
		if r := p.Rank(channel, n); r > bestRank {
			best, bestRank = n, r
		}
	}
	return best
}

// actionChannel is where an action is judged and said: for an action on
// a job, the channel the job was started in when it is one of ours, else
// the first configured channel; for a queue action (pause, resume), the
// first configured channel.
func (s *Server) actionChannel(ctx context.Context, a action, ident string) (string, error) {
	var chans []string
	if s.opt.Actions.Channels != nil {
		chans = s.opt.Actions.Channels()
	}
	if len(chans) == 0 {
		return "", nil
	}
	if a.queue {
		return chans[0], nil
	}
	job, err := s.store.GetJob(ctx, ident)
	if err != nil {
		return "", err
	}
	if job != nil {
		for _, c := range chans {
			if strings.EqualFold(c, job.StartedIn.Value) {
				return c, nil
			}
		}
	}
	return chans[0], nil
}

// webReplier collects a command's answers for the page and, once the
// command table tells the outcome (bot.OutcomeReplier), says them in the
// channel, prefixed "NICK (web): ", only when the command did something
// (ok) or may have (unknown): a refusal is the page's alone.
type webReplier struct {
	ctx     context.Context
	say     func(ctx context.Context, channel, text string) error
	channel string
	prefix  string
	mu      sync.Mutex
	replies []string
	toSay   []string
	done    bool
	outcome string
	said    bool
	unsaid  string
}

func (w *webReplier) Reply(text string) {
	w.mu.Lock()
	w.replies = append(w.replies, text)
	if !w.done {
		w.toSay = append(w.toSay, text)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	// A follow-up after the outcome (an unknown outcome's): said at once.
	w.sayAll([]string{text})
}

// Outcome is called by the command table once the command is done.
func (w *webReplier) Outcome(outcome string) {
	w.mu.Lock()
	w.done, w.outcome = true, outcome
	lines := w.toSay
	w.toSay = nil
	speak := outcome == metrics.OutcomeOK || outcome == metrics.OutcomeUnknown
	w.said = speak
	w.mu.Unlock()
	if speak {
		w.sayAll(lines)
	}
}

func (w *webReplier) sayAll(lines []string) {
	if w.say == nil {
		return
	}
	for _, text := range lines {
		if err := w.say(w.ctx, w.channel, w.prefix+text); err != nil {
			w.mu.Lock()
			w.unsaid = "The channel could not be told (" + err.Error() + ")."
			w.mu.Unlock()
			return
		}
	}
}

// Private answers go to the page only.
func (w *webReplier) Private(text string) {
	w.mu.Lock()
	w.replies = append(w.replies, text)
	w.mu.Unlock()
}

// rateLimiter counts requests per key in fixed one-minute windows.
type rateLimiter struct {
	limit int // per minute; 0: none
	mu    sync.Mutex
	start time.Time
	n     map[string]int
}

func newRateLimiter(limit int) *rateLimiter { return &rateLimiter{limit: limit, n: map[string]int{}} }

func (l *rateLimiter) allow(key string, now time.Time) bool {
	if l == nil || l.limit <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= time.Minute {
		l.start, l.n = now, map[string]int{}
	}
	if l.n[key] >= l.limit {
		return false
	}
	l.n[key]++
	return true
}

// limits are the sign-in and action rate limits.
type limits struct{ session, address *rateLimiter }

// allowAddress applies the per-address limit to sign-ins and actions.
func (s *Server) allowAddress(w http.ResponseWriter, r *http.Request, page bool) bool {
	if s.limits.address.allow(remoteHost(r), s.now()) {
		return true
	}
	msg := "Refused: at most " + itoa(s.opt.Actions.AddressPerMinute) + " sign-ins and actions a minute from one address; wait a little."
	w.Header().Set("Retry-After", "60")
	if page {
		s.refusePage(w, r, http.StatusTooManyRequests, "rate_address", msg)
	} else {
		s.refuse(w, r, http.StatusTooManyRequests, "rate_address", msg)
	}
	return false
}

func itoa(n int) string { return strconv.Itoa(n) }

package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// fakePresence is the IRC state a test sets: ranks in channels, and the
// services account of each nick (accounts nil: the server tells none).
type fakePresence struct {
	mu       sync.Mutex
	ranks    map[string]bot.Rank // "channel nick"
	accounts map[string]string
	// presence: each nick's presence id ("": "p-NICK"; set "-" for none).
	presence map[string]string
	// limit is the IRC throttle's per nick (0: none); commands counts them.
	limit    int
	commands map[string]int
}

func (p *fakePresence) Presence(nick string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch id := p.presence[strings.ToLower(nick)]; id {
	case "":
		return "p-" + strings.ToLower(nick)
	case "-":
		return ""
	default:
		return id
	}
}

func (p *fakePresence) setPresence(nick, id string) {
	p.mu.Lock()
	if p.presence == nil {
		p.presence = map[string]string{}
	}
	p.presence[strings.ToLower(nick)] = id
	p.mu.Unlock()
}

func (p *fakePresence) AllowCommand(nick string, privileged bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.commands == nil {
		p.commands = map[string]int{}
	}
	if p.limit > 0 && p.commands[strings.ToLower(nick)] >= p.limit {
		return false
	}
	p.commands[strings.ToLower(nick)]++
	return true
}

func (p *fakePresence) CommandLimits() (int, int) { return p.limit, p.limit * 10 }

func (p *fakePresence) Channels() []string { return []string{"#main", "#archivebot"} }

func (p *fakePresence) Rank(channel, nick string) bot.Rank {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ranks[strings.ToLower(channel+" "+nick)]
}

func (p *fakePresence) Account(nick string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accounts == nil {
		return "", false
	}
	return p.accounts[strings.ToLower(nick)], true
}

func (p *fakePresence) set(channel, nick string, r bot.Rank) {
	p.mu.Lock()
	p.ranks[strings.ToLower(channel+" "+nick)] = r
	p.mu.Unlock()
}

func (p *fakePresence) setAccount(nick, acct string) {
	p.mu.Lock()
	if p.accounts == nil {
		p.accounts = map[string]string{}
	}
	p.accounts[strings.ToLower(nick)] = acct
	p.mu.Unlock()
}

// actionsRig is a web server with sign-in and actions on, over a real
// bot and store, a fake IRC presence, and a record of channel lines.
type actionsRig struct {
	b       *redistest.Backend
	st      *store.Store
	srv     *Server
	h       http.Handler
	p       *fakePresence
	bot     *bot.Bot
	mu      sync.Mutex
	said    []string
	leading bool
	job     string
	logs    *syncBuf
}

func newActionsRig(t testing.TB, be *redistest.Backend, public string) *actionsRig {
	t.Helper()
	be.Client.FlushDB(context.Background())
	rig := &actionsRig{b: be, st: store.New(be.Client), p: &fakePresence{ranks: map[string]bot.Rank{}}, leading: true, logs: &syncBuf{}}
	rig.bot = bot.New(rig.st, bot.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	u := "http://example.com/"
	rig.job = ident.Of(u)
	if err := rig.st.Register(context.Background(), store.NewJob{Ident: rig.job, URL: u, FetchDepth: "inf", Slug: "x",
		StartedBy: "alice", StartedIn: "#archivebot", DelayMin: 250, DelayMax: 375, Concurrency: 3, Queue: store.KeyPending}); err != nil {
		t.Fatal(err)
	}
	rig.srv = New(Options{Store: rig.st, Logger: slog.New(slog.NewTextHandler(rig.logs, nil)), Actions: &ActionOptions{
		PublicURL: public, Bot: rig.bot,
		Presence: func() Presence { return rig.p },
		Leader: func() (bool, string) {
			rig.mu.Lock()
			defer rig.mu.Unlock()
			if rig.leading {
				return true, ""
			}
			return false, "node-b"
		},
		Say: func(ctx context.Context, channel, text string) error {
			rig.mu.Lock()
			rig.said = append(rig.said, channel+" "+text)
			rig.mu.Unlock()
			return nil
		},
		Channels:   func() []string { return []string{"#main", "#archivebot"} },
		SessionTTL: time.Hour, SessionsPerNick: 3, SessionsTotal: 100, ActionsPerMinute: 1 << 30, AddressPerMinute: 1 << 30,
	}})
	rig.h = rig.srv.Handler()
	return rig
}

// signIn issues a link for nick as !login would and follows it as a
// browser does; it returns the session cookie and its CSRF token.
func (rig *actionsRig) signIn(t testing.TB, nick string) (*http.Cookie, string) {
	t.Helper()
	link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: nick})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	page := rig.do(t, "GET", u.RequestURI(), nil, nil, nil)
	if page.StatusCode != 200 || !strings.Contains(body(t, page), "Sign in as "+nick) {
		t.Fatalf("login page: %d", page.StatusCode)
	}
	res := rig.do(t, "POST", "/login", url.Values{"code": {u.Query().Get("code")}}, nil, map[string]string{"Origin": "http://node.test", "Sec-Fetch-Site": "same-origin"})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /login: %d %s", res.StatusCode, body(t, res))
	}
	var c *http.Cookie
	for _, k := range res.Cookies() {
		if k.Name == SessionCookie {
			c = k
		}
	}
	if c == nil {
		t.Fatal("no session cookie")
	}
	var info sessionInfo
	decode(t, rig.do(t, "GET", "/session", nil, c, nil), &info)
	return c, info.CSRF
}

// plantCode stores a sign-in code for nick as LoginLink would, valid for
// ttl.
func (rig *actionsRig) plantCode(t testing.TB, code, nick string, ttl time.Duration) {
	t.Helper()
	id := rig.srv.key.id("code", code)
	c := store.LoginCode{Nick: nick, NickKey: strings.ToLower(nick), Presence: rig.p.Presence(nick), Expires: time.Now().Add(ttl)}
	c.MAC = rig.srv.key.codeMAC(id, c)
	if err := rig.st.CreateLoginCode(context.Background(), id, c); err != nil {
		t.Fatal(err)
	}
}

func (rig *actionsRig) do(t testing.TB, method, path string, form url.Values, c *http.Cookie, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, "http://node.test"+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c != nil {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	rig.h.ServeHTTP(rec, req)
	return rec.Result()
}

func (rig *actionsRig) act(t *testing.T, action string, c *http.Cookie, csrf string, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("ident") == "" {
		form.Set("ident", rig.job)
	}
	h := map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin", "Origin": "http://node.test"}
	for k, v := range hdr {
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	res := rig.do(t, "POST", "/actions/"+action, form, c, h)
	return res, body(t, res)
}

// A sign-in link makes a session once, with a cookie that
// scripts cannot read and other sites cannot send; a reused, expired or
// forged link shows a clear page and changes nothing in Redis.
func TestSignInLinks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		rig := newActionsRig(t, be, "https://bot.example/")
		link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: "erin"})
		if err != nil || !regexp.MustCompile(`^https://bot\.example/login\?code=[A-Za-z0-9_-]{22}$`).MatchString(link) {
			t.Fatalf("link %q, %v", link, err)
		}
		code := strings.TrimPrefix(link, "https://bot.example/login?code=")
		if strings.Contains(rig.logs.String(), code) {
			t.Errorf("the log holds the whole code:\n%s", rig.logs)
		}
		// A GET (a link preview) does not spend the code.
		for i := 0; i < 2; i++ {
			if res := rig.do(t, "GET", "/login?code="+code, nil, nil, nil); res.StatusCode != 200 || !strings.Contains(body(t, res), `id="signin"`) {
				t.Fatalf("GET %d: %d", i, res.StatusCode)
			}
		}
		// A POST with neither Sec-Fetch-Site nor Origin cannot be told
		// from another site's form in an old browser: refused, the code
		// kept.
		res := rig.do(t, "POST", "/login", url.Values{"code": {code}}, nil, nil)
		if b := body(t, res); res.StatusCode != http.StatusForbidden || !strings.Contains(b, "neither Sec-Fetch-Site nor Origin") || len(res.Cookies()) != 0 {
			t.Fatalf("POST /login without Sec-Fetch-Site or Origin: %d %s", res.StatusCode, b)
		}
		res = rig.do(t, "POST", "/login", url.Values{"code": {code}}, nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /login: %d %s", res.StatusCode, body(t, res))
		}
		set := res.Header.Get("Set-Cookie")
		for _, want := range []string{SessionCookie + "=", "HttpOnly", "SameSite=Strict", "Secure", "Path=/"} {
			if !strings.Contains(set, want) {
				t.Errorf("Set-Cookie %q lacks %q", set, want)
			}
		}
		token := res.Cookies()[0].Value
		if strings.Contains(rig.logs.String(), token) {
			t.Error("the log holds the session token")
		}
		var info sessionInfo
		decode(t, rig.do(t, "GET", "/session", nil, res.Cookies()[0], nil), &info)
		if info.Nick != "erin" || len(info.CSRF) < 40 || !info.Leader {
			t.Errorf("/session = %+v", info)
		}
		if m := body(t, rig.do(t, "GET", "/metrics", nil, nil, nil)); strings.Contains(m, token) || strings.Contains(m, info.CSRF) || strings.Contains(m, code) {
			t.Error("/metrics holds a secret")
		}

		expired := "AAAAAAAAAAAAAAAAAAAAAA"
		rig.plantCode(t, expired, "erin", time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		before := be.Dump(t)
		for _, c := range []struct {
			name, code string
			status     int
			says       string
		}{
			{"reused", code, http.StatusGone, "already used"},
			{"expired", expired, http.StatusGone, "expired: links work for 2 minutes"},
			{"forged", "BBBBBBBBBBBBBBBBBBBBBB", http.StatusNotFound, "not one the bot issued"},
			{"malformed", "x<script>", http.StatusNotFound, "not one the bot issued"},
		} {
			for _, method := range []string{"GET", "POST"} {
				var res *http.Response
				if method == "GET" {
					res = rig.do(t, "GET", "/login?code="+url.QueryEscape(c.code), nil, nil, nil)
				} else {
					res = rig.do(t, "POST", "/login", url.Values{"code": {c.code}}, nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
				}
				b := body(t, res)
				if res.StatusCode != c.status || !strings.Contains(b, c.says) || !strings.Contains(b, "Nothing was changed") || strings.Contains(b, "<script>") {
					t.Errorf("%s code, %s: %d %q", c.name, method, res.StatusCode, b)
				}
				if len(res.Cookies()) != 0 {
					t.Errorf("%s code, %s: set a cookie", c.name, method)
				}
			}
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("refused codes changed Redis:\nbefore %v\nafter  %v", before, after)
		}
		// A cross-site sign-in form is refused too.
		rig.plantCode(t, "CCCCCCCCCCCCCCCCCCCCCC", "erin", time.Minute)
		res = rig.do(t, "POST", "/login", url.Values{"code": {"CCCCCCCCCCCCCCCCCCCCCC"}}, nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
		if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Errorf("cross-site sign-in: %d", res.StatusCode)
		}
		if c, _ := rig.st.PeekLoginCode(context.Background(), rig.srv.key.id("code", "CCCCCCCCCCCCCCCCCCCCCC")); c == nil || c.Used {
			t.Errorf("cross-site sign-in spent the code: %+v", c)
		}
	})
}

// An action is the command: run as the session's nick, in the
// job's channel, with the rank the bot sees now; the channel sees
// "NICK (web): …", the page gets the reply, the history says "(web)".
// The same user without voice is refused by the command table, and
// nothing changes.
func TestActionsAreCommands(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		rig := newActionsRig(t, be, "http://node.test/")
		// Signed in as an op: a session without an account never acts above its rank at sign-in.
		rig.p.set("#archivebot", "erin", bot.RankOp)
		c, csrf := rig.signIn(t, "erin")
		rig.p.set("#archivebot", "erin", bot.RankVoice)
		res, b := rig.act(t, "ignore", c, csrf, url.Values{"pattern": {`^https?://example\.com/trap/`}}, nil)
		if res.StatusCode != 200 || !strings.Contains(b, `"channel":"#archivebot"`) || !strings.Contains(b, "Added ignore pattern") || !strings.Contains(b, `"rank":"voice"`) {
			t.Fatalf("ignore: %d %s", res.StatusCode, b)
		}
		if len(rig.said) != 1 || !strings.HasPrefix(rig.said[0], "#archivebot erin (web): Added ignore pattern ^https?://example\\.com/trap/ to job "+rig.job) {
			t.Errorf("channel saw %q", rig.said)
		}
		job, _ := rig.st.GetJob(context.Background(), rig.job)
		h, _ := rig.st.History(context.Background(), rig.job, 5)
		if last := h[len(h)-1]; last.By != "erin (web)" || last.Event != store.EventIgnoreAdded {
			t.Errorf("history ends with %+v", last)
		}
		_ = job

		// Devoiced: the command table refuses; nothing changes.
		rig.p.set("#archivebot", "erin", bot.RankNone)
		before := be.Dump(t)
		res, b = rig.act(t, "abort", c, csrf, nil, nil)
		if res.StatusCode != 200 || !strings.Contains(b, "only channel operators or voiced users") || !strings.Contains(b, `"rank":"none"`) {
			t.Errorf("devoiced abort: %d %s", res.StatusCode, b)
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused action changed Redis")
		}
		// Op-only actions need op.
		rig.p.set("#archivebot", "erin", bot.RankVoice)
		if _, b = rig.act(t, "fail", c, csrf, nil, nil); !strings.Contains(b, "only channel operators may") {
			t.Errorf("voiced !fail: %s", b)
		}
		for _, a := range []struct {
			name string
			form url.Values
			says string
		}{
			{"delay", url.Values{"min": {"100"}, "max": {"200"}}, "delay"},
			{"concurrency", url.Values{"n": {"2"}}, "oncurrency"},
			{"explain", url.Values{"note": {"forum trap, see log"}}, "note"},
			{"ignorereports", url.Values{"on": {"off"}}, "gnore"},
		} {
			res, b := rig.act(t, a.name, c, csrf, a.form, nil)
			if res.StatusCode != 200 || strings.Contains(b, "Sorry") || !strings.Contains(b, a.says) {
				t.Errorf("%s: %d %s", a.name, res.StatusCode, b)
			}
		}
		rig.p.set("#archivebot", "erin", bot.RankOp)
		if res, b := rig.act(t, "move", c, csrf, url.Values{"to": {"back"}}, nil); res.StatusCode != 200 || strings.Contains(b, "Sorry, only") {
			t.Errorf("op !move: %s", b)
		}
		// A job started elsewhere is judged in the first channel.
		other := ident.Of("http://other.example/")
		rig.st.Register(context.Background(), store.NewJob{Ident: other, URL: "http://other.example/", FetchDepth: "inf", Slug: "y",
			StartedBy: "x", StartedIn: "#elsewhere", Queue: store.KeyPending})
		if _, b := rig.act(t, "abort", c, csrf, url.Values{"ident": {other}}, nil); !strings.Contains(b, `"channel":"#main"`) || !strings.Contains(b, "only channel operators or voiced") {
			t.Errorf("job from another channel: %s", b)
		}
	})
}

// Every way an action can be wrong is refused with its reason
// before the command table, counted, and changes nothing.
func TestActionRefusals(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		rig := newActionsRig(t, be, "http://node.test/")
		// Signed in as an op: a session without an account never acts above its rank at sign-in.
		rig.p.set("#archivebot", "erin", bot.RankOp)
		c, csrf := rig.signIn(t, "erin")
		rig.p.set("#archivebot", "erin", bot.RankOp)
		ig := url.Values{"pattern": {"trap"}}
		cases := []struct {
			name   string
			run    func() (*http.Response, string)
			status int
			says   string
		}{
			{"no cookie", func() (*http.Response, string) { return rig.act(t, "ignore", nil, csrf, ig, nil) }, 401, "Not signed in"},
			{"dead cookie", func() (*http.Response, string) {
				return rig.act(t, "ignore", &http.Cookie{Name: SessionCookie, Value: "not-a-session"}, csrf, ig, nil)
			}, 401, "session ended"},
			{"no csrf", func() (*http.Response, string) {
				return rig.act(t, "ignore", c, "", ig, map[string]string{"X-CSRF-Token": ""})
			}, 403, "no CSRF token"},
			{"wrong csrf", func() (*http.Response, string) { return rig.act(t, "ignore", c, "x"+csrf, ig, nil) }, 403, "wrong CSRF token"},
			{"cross-site fetch", func() (*http.Response, string) {
				return rig.act(t, "ignore", c, csrf, ig, map[string]string{"Sec-Fetch-Site": "cross-site"})
			}, 403, "another site"},
			{"foreign origin", func() (*http.Response, string) {
				return rig.act(t, "ignore", c, csrf, ig, map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"})
			}, 403, "another site"},
			{"line break", func() (*http.Response, string) {
				return rig.act(t, "ignore", c, csrf, url.Values{"pattern": {"a\r\nPRIVMSG #x :hi"}}, nil)
			}, 400, "control character"},
			{"two words", func() (*http.Response, string) {
				return rig.act(t, "concurrency", c, csrf, url.Values{"n": {"2 3"}}, nil)
			}, 400, "one word"},
			{"bad ident", func() (*http.Response, string) { return rig.act(t, "abort", c, csrf, url.Values{"ident": {"A!"}}, nil) }, 400, "ident"},
			{"unknown action", func() (*http.Response, string) { return rig.act(t, "expire", c, csrf, nil, nil) }, 400, "no dashboard action"},
		}
		before := be.Dump(t)
		for _, tc := range cases {
			res, b := tc.run()
			if res.StatusCode != tc.status || !strings.Contains(b, tc.says) || !strings.Contains(b, "Nothing was changed") {
				t.Errorf("%s: %d %s", tc.name, res.StatusCode, b)
			}
		}
		if len(rig.said) != 0 {
			t.Errorf("refusals reached the channel: %q", rig.said)
		}
		// Standby: 503 naming the leader.
		rig.mu.Lock()
		rig.leading = false
		rig.mu.Unlock()
		res, b := rig.act(t, "ignore", c, csrf, ig, nil)
		if res.StatusCode != 503 || !strings.Contains(b, `"leader":"node-b"`) || !strings.Contains(b, "standby") {
			t.Errorf("standby: %d %s", res.StatusCode, b)
		}
		rig.mu.Lock()
		rig.leading = true
		rig.mu.Unlock()
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("refused actions changed Redis")
		}
		m := body(t, rig.do(t, "GET", "/metrics", nil, nil, nil))
		for _, reason := range []string{"no_session", "csrf", "cross_site", "bad_input", "standby"} {
			if !strings.Contains(m, `archivebot_web_refused_total{reason="`+reason+`"}`) {
				t.Errorf("/metrics lacks the refusal %s", reason)
			}
		}
		// Sign-out ends the session; the cookie then acts no more.
		if res := rig.do(t, "POST", "/logout", url.Values{"csrf": {csrf}}, c, nil); res.StatusCode != 200 {
			t.Fatalf("logout: %d", res.StatusCode)
		}
		if res, _ := rig.act(t, "ignore", c, csrf, ig, nil); res.StatusCode != 401 {
			t.Errorf("after sign-out: %d", res.StatusCode)
		}
	})
}

// A session made while the server tells accounts is bound to
// the account: the nick taken over by another account, or logged out of
// it, cannot act; a session made without account information cannot act
// once the server tells accounts.
func TestActionAccountBinding(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	rig.p.setAccount("erin", "erin-acct")
	// Signed in as an op: a session without an account never acts above its rank at sign-in.
	rig.p.set("#archivebot", "erin", bot.RankOp)
	c, csrf := rig.signIn(t, "erin")
	rig.p.set("#archivebot", "erin", bot.RankVoice)
	ig := url.Values{"pattern": {"trap"}}
	if res, b := rig.act(t, "ignore", c, csrf, ig, nil); res.StatusCode != 200 || strings.Contains(b, "Sorry") {
		t.Fatalf("same account: %d %s", res.StatusCode, b)
	}
	before := be.Dump(t)
	rig.p.setAccount("erin", "mallory")
	if res, b := rig.act(t, "ignore", c, csrf, url.Values{"pattern": {"x"}}, nil); res.StatusCode != 403 || !strings.Contains(b, "now logged into mallory") {
		t.Errorf("taken over by another account: %d %s", res.StatusCode, b)
	}
	rig.p.setAccount("erin", "")
	if res, b := rig.act(t, "ignore", c, csrf, url.Values{"pattern": {"x"}}, nil); res.StatusCode != 403 || !strings.Contains(b, "logged into none") {
		t.Errorf("logged out of the account: %d %s", res.StatusCode, b)
	}
	if after := be.Dump(t); !reflect.DeepEqual(before, after) {
		t.Error("refused actions changed Redis")
	}
	// No account information at sign-in, then the server tells one.
	rig.p.accounts = nil
	// Signed in as an op: a session without an account never acts above its rank at sign-in.
	rig.p.set("#archivebot", "frank", bot.RankOp)
	c2, csrf2 := rig.signIn(t, "frank")
	rig.p.set("#archivebot", "frank", bot.RankVoice)
	if res, _ := rig.act(t, "ignore", c2, csrf2, url.Values{"pattern": {"y"}}, nil); res.StatusCode != 200 {
		t.Errorf("nick-bound session: %d", res.StatusCode)
	}
	rig.p.setAccount("frank", "frank")
	if res, b := rig.act(t, "ignore", c2, csrf2, url.Values{"pattern": {"z"}}, nil); res.StatusCode != 403 || !strings.Contains(b, "before the bot could see") {
		t.Errorf("accounts appeared: %d %s", res.StatusCode, b)
	}
}

// The rate limits refuse with 429, say so and count.
func TestActionRateLimits(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	rig.srv.limits.session = newRateLimiter(2)
	rig.srv.opt.Actions.ActionsPerMinute = 2
	// Signed in as an op: a session without an account never acts above its rank at sign-in.
	rig.p.set("#archivebot", "erin", bot.RankOp)
	c, csrf := rig.signIn(t, "erin")
	rig.p.set("#archivebot", "erin", bot.RankVoice)
	for i := 0; i < 2; i++ {
		if res, _ := rig.act(t, "explain", c, csrf, url.Values{"note": {"n"}}, nil); res.StatusCode != 200 {
			t.Fatalf("action %d: %d", i, res.StatusCode)
		}
	}
	if res, b := rig.act(t, "explain", c, csrf, url.Values{"note": {"n"}}, nil); res.StatusCode != 429 || !strings.Contains(b, "at most 2 actions a minute") {
		t.Errorf("third action: %d %s", res.StatusCode, b)
	}
	rig.srv.limits.address = newRateLimiter(1)
	rig.srv.opt.Actions.AddressPerMinute = 1
	rig.do(t, "GET", "/login?code=x", nil, nil, nil)
	if res := rig.do(t, "GET", "/login?code=x", nil, nil, nil); res.StatusCode != 429 || !strings.Contains(body(t, res), "from one address") {
		t.Errorf("address limit: %d", res.StatusCode)
	}
	m := body(t, rig.do(t, "GET", "/metrics", nil, nil, nil))
	for _, reason := range []string{"rate_session", "rate_address"} {
		if !strings.Contains(m, `archivebot_web_refused_total{reason="`+reason+`"}`) {
			t.Errorf("/metrics lacks %s", reason)
		}
	}
}

// !whois says whether a nick is signed in on the dashboard.
func TestWhoisNote(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	if got := rig.srv.WhoisNote(context.Background(), "erin", "erin"); got != "" {
		t.Errorf("before sign-in: %q", got)
	}
	rig.signIn(t, "erin")
	if got := rig.srv.WhoisNote(context.Background(), "ERIN", "erin"); !strings.HasPrefix(got, "signed in on the dashboard until ") {
		t.Errorf("signed in: %q", got)
	}
}

// BenchmarkAction: one dashboard action (explain) end to end in the web
// server: session, CSRF, same-site and account checks, the job's channel,
// Bot.Handle and its Redis write (real Redis when ARCHIVEBOT_TEST_REDIS
// is set).
func BenchmarkAction(b *testing.B) {
	be := redistest.RealOrMini(b)
	rig := newActionsRig(b, be, "http://node.test/")
	// Signed in as an op: a session without an account never acts above its rank at sign-in.
	rig.p.set("#archivebot", "erin", bot.RankOp)
	c, csrf := rig.signIn(b, "erin")
	rig.p.set("#archivebot", "erin", bot.RankVoice)
	form := url.Values{"ident": {rig.job}, "note": {"bench"}}.Encode()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", "http://node.test/actions/explain", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-CSRF-Token", csrf)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		rec := httptest.NewRecorder()
		rig.h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

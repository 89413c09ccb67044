package irc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/archiveteam/archivebot-go/web"
)

// dashboard is the node's web server with sign-in and actions, on the
// bot and IRC client of a harness, spoken to over HTTP as a browser does.
type dashboard struct {
	t    *testing.T
	base string
	http *http.Client
	st   *store.Store
}

// startBotWithDashboard starts the bot on server url in channel, with a
// dashboard whose sign-in links the bot's !login sends.
func startBotWithDashboard(t *testing.T, serverURL, channel string) (*harness, *dashboard) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := store.New(rdb)
	var srv *web.Server
	b := bot.New(st, bot.Options{Logger: testLogger(t),
		Login:  func(ctx context.Context, req bot.Request) (string, error) { return srv.LoginLink(ctx, req) },
		Logout: func(ctx context.Context, req bot.Request) (int, error) { return srv.Logout(ctx, req) }})
	c := New(testIRCConfig(serverURL, channel), b, testLogger(t))
	fast(c)
	var hs *httptest.Server
	srv, hs = serveDashboard(t, st, testLogger(t), b, c, nil)
	return runHarness(t, c, b, m, rdb), &dashboard{t: t, base: hs.URL, http: hs.Client(), st: st}
}

// serveDashboard serves the node's web server, with sign-in and actions
// for bot b and client c over st, on an httptest server (closed when t
// ends), as the node wires them: sessions for an hour, 5 a nick and 100
// in all, 100 actions a minute a session and an address, unless tune
// changes them.
func serveDashboard(t testing.TB, st *store.Store, logger *slog.Logger, b *bot.Bot, c *Client, tune func(*web.ActionOptions)) (*web.Server, *httptest.Server) {
	hs := httptest.NewUnstartedServer(nil)
	opts := &web.ActionOptions{
		PublicURL: "http://" + hs.Listener.Addr().String() + "/", Bot: b,
		Presence: func() web.Presence { return c },
		Say:      c.Announce, Channels: c.Channels,
		SessionTTL: time.Hour, SessionsPerNick: 5, SessionsTotal: 100, ActionsPerMinute: 100, AddressPerMinute: 100,
	}
	if tune != nil {
		tune(opts)
	}
	srv := web.New(web.Options{Store: st, Logger: logger, Actions: opts})
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(hs.Close)
	return srv, hs
}

// do sends a same-origin request as the page's script does.
func (d *dashboard) do(method, path string, form url.Values, cookie *http.Cookie, csrf string) (*http.Response, string) {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, d.base+path, body)
	if err != nil {
		d.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Origin", d.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	client := *d.http
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// signIn follows a sign-in link: the session cookie and its CSRF token.
func (d *dashboard) signIn(link string) (*http.Cookie, string) {
	d.t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		d.t.Fatal(err)
	}
	res, body := d.do("POST", "/login", url.Values{"code": {u.Query().Get("code")}}, nil, "")
	if res.StatusCode != http.StatusSeeOther {
		d.t.Fatalf("POST /login: %d %s", res.StatusCode, body)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == web.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		d.t.Fatal("no session cookie")
	}
	_, body = d.do("GET", "/session", nil, cookie, "")
	var info struct {
		CSRF    string `json:"csrf"`
		Account string `json:"account"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		d.t.Fatalf("GET /session: %v: %s", err, body)
	}
	return cookie, info.CSRF
}

// note sets a job's note through the session; it returns the status and
// the answer.
func (d *dashboard) note(cookie *http.Cookie, csrf, ident, note string) (int, string) {
	d.t.Helper()
	res, body := d.do("POST", "/actions/explain", url.Values{"ident": {ident}, "note": {note}}, cookie, csrf)
	return res.StatusCode, body
}

// TestDashboardSessionFollowsAccount, on InspIRCd + Atheme: erin, voiced
// and logged into the account erin, signs in to the dashboard with the
// link !login sends her. Renamed to erin2, still logged in, her session
// keeps working, as erin2 with erin2's rank. mallory, logged into her own
// account, takes the nick erin and is voiced: erin's session still acts
// as the account's holder, never as the nick's; once no nick is logged
// into erin, it is refused, saying why, and nothing changes.
func TestDashboardSessionFollowsAccount(t *testing.T) {
	t.Parallel()
	const pass = "dash-secret-1"
	s, us := servicesUsers(t, pass, []string{"erin", "mallory"}, "opal", "erin", "mallory")
	opal, erin, mallory := us[0], us[1], us[2]
	mallory.Send("NICK mal")
	mallory.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" })
	mallory.Nick = "mal"
	opal.Join("#test")
	erin.Join("#test")
	opal.Send("MODE #test +v erin")
	erin.Expect("+v", isMode("#test", "+v", "erin"))

	h, d := startBotWithDashboard(t, s.URL(), "#test")
	erin.WaitBotIn("ArchiveBot", "#test")
	const ident = "acctjob1"
	if err := d.st.Register(context.Background(), store.NewJob{Ident: ident, URL: "http://acct.example/", FetchDepth: "inf",
		Slug: "acct", StartedBy: "erin", StartedIn: "#test", Queue: store.KeyPending}); err != nil {
		t.Fatal(err)
	}
	erin.Say("#test", "!login")
	pm := erin.Expect("the sign-in link", func(m ircmsg.Message) bool {
		return irctest.IsFrom(m, "ArchiveBot", "erin") && strings.Contains(m.Params[1], "/login?code=")
	})
	cookie, csrf := d.signIn(regexp.MustCompile(`http://\S+/login\?code=[A-Za-z0-9_-]+`).FindString(pm.Params[1]))
	// sayIn waits for the channel line of a web action, said as who.
	saidAs := func(who string) {
		t.Helper()
		opal.Expect("the action said in #test as "+who, func(m ircmsg.Message) bool {
			return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.HasPrefix(m.Params[1], who+" (web): ")
		})
	}
	noteIs := func(want string) {
		t.Helper()
		job, err := d.st.GetJob(context.Background(), ident)
		if err != nil || job.Note.Value != want {
			t.Fatalf("note %q (%v), want %q", job.Note.Value, err, want)
		}
	}
	if code, body := d.note(cookie, csrf, ident, "by erin"); code != http.StatusOK {
		t.Fatalf("erin's action: %d %s", code, body)
	}
	saidAs("erin")
	noteIs("by erin")

	// The holder under another nick keeps the session.
	erin.Send("NICK erin2")
	opal.Expect("erin's NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "erin" })
	erin.Nick = "erin2"
	testproc.Eventually(t, "the bot following the rename", func() bool { a, _ := h.client.Account("erin2"); return a == "erin" })
	if code, body := d.note(cookie, csrf, ident, "by erin2"); code != http.StatusOK {
		t.Fatalf("the account's holder renamed to erin2: %d %s", code, body)
	}
	saidAs("erin2")
	noteIs("by erin2")

	// Someone else on the nick: mallory takes "erin", joins and is voiced.
	mallory.Send("NICK erin")
	mallory.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" })
	mallory.Nick = "erin"
	mallory.Join("#test")
	opal.Send("MODE #test +v erin")
	mallory.Expect("+v", isMode("#test", "+v", "erin"))
	testproc.Eventually(t, "mallory on the nick erin, voiced", func() bool {
		a, _ := h.client.Account("erin")
		return a == "mallory" && h.client.Rank("#test", "erin") == bot.RankVoice
	})
	// Nor can the nick's new owner end it.
	if r := strings.Join(mallory.Ask("ArchiveBot", "#test", "!logout"), "\n"); r != "You had no dashboard sessions." {
		t.Errorf("!logout by mallory on the nick erin: %q", r)
	}
	if code, body := d.note(cookie, csrf, ident, "as the holder"); code != http.StatusOK {
		t.Fatalf("with mallory on the nick, the holder (erin2) acting: %d %s", code, body)
	}
	saidAs("erin2")
	// The holder logs out: no nick is logged into erin; the session does
	// not fall back on the nick's new owner.
	erin.Logout()
	testproc.Eventually(t, "the bot seeing erin2 log out", func() bool { a, k := h.client.Account("erin2"); return k && a == "" })
	code, body := d.note(cookie, csrf, ident, "mallory was here")
	if code != http.StatusForbidden || !strings.Contains(body, "now logged into mallory") {
		t.Errorf("the session with mallory on the nick: %d %s", code, body)
	}
	noteIs("as the holder")
	// The holder, logged in again under erin2, ends her session.
	erin.Identify("erin", pass)
	if r := strings.Join(erin.Ask("ArchiveBot", "#test", "!logout"), "\n"); r != "Ended your dashboard session." {
		t.Errorf("!logout by erin2, logged into erin: %q", r)
	}
	if code, body := d.note(cookie, csrf, ident, "after logout"); code == http.StatusOK {
		t.Errorf("the session acted after its holder's !logout: %d %s", code, body)
	}
	noteIs("as the holder")
}

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
	"sync"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/archiveteam/archivebot-go/web"
)

// dashRig is the bot in #test on a real ngircd, with the dashboard's
// sign-in and actions on an httptest server, as the node wires them.
type dashRig struct {
	t    *testing.T
	n    *irctest.Ngircd
	h    *harness
	st   *store.Store
	base string
	opal *irctest.User // the channel's op (first in)
	job  string
	logs *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newDashRig(t *testing.T, commandsPerMinute int) *dashRig {
	t.Helper()
	n := irctest.StartNgircd(t, irctest.NgircdOptions{})
	opal := irctest.Dial(t, n.Addr(), "opal")
	opal.Join("#test")
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := store.New(rdb)
	logs := &lockedBuf{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), nil))
	var srv *web.Server
	b := bot.New(st, bot.Options{Logger: logger,
		Login: func(ctx context.Context, req bot.Request) (string, error) { return srv.LoginLink(ctx, req) }})
	cfg := testIRCConfig(n.URL(), "#test")
	cfg.CommandsPerMinute = commandsPerMinute
	c := New(cfg, b, logger)
	fast(c)
	h := runHarness(t, c, b, m, rdb)
	var hs *httptest.Server
	srv, hs = serveDashboard(t, st, logger, b, c, func(o *web.ActionOptions) {
		o.SessionsRankless, o.ActionsPerMinute, o.AddressPerMinute = 10, 1000, 1000
	})
	base := hs.URL
	// As the node wires it: a presence that ends ends its sessions.
	c.OnPresenceEnd(srv.EndPresence)
	go srv.RunPresenceEnds(h.ctx)
	opal.WaitBotIn("ArchiveBot", "#test")
	const job = "nickjob1"
	if err := st.Register(context.Background(), store.NewJob{Ident: job, URL: "http://nick.example/", FetchDepth: "inf",
		Slug: "nick", StartedBy: "opal", StartedIn: "#test", Queue: store.KeyPending}); err != nil {
		t.Fatal(err)
	}
	return &dashRig{t: t, n: n, h: h, st: st, base: base, opal: opal, job: job, logs: logs}
}

// join connects nick to #test, with rank r given by opal, and waits until
// the bot sees that rank.
func (d *dashRig) join(nick string, r bot.Rank) *irctest.User {
	d.t.Helper()
	u := irctest.Dial(d.t, d.n.Addr(), nick)
	u.Join("#test")
	d.give(nick, r)
	return u
}

func (d *dashRig) give(nick string, r bot.Rank) {
	d.t.Helper()
	switch r {
	case bot.RankOp:
		d.opal.Send("MODE #test +o %s", nick)
	case bot.RankVoice:
		d.opal.Send("MODE #test +v %s", nick)
	}
	testproc.Eventually(d.t, nick+" ranked", func() bool { return d.h.client.Rank("#test", nick) == r })
}

// session is a signed-in dashboard session: its cookie and CSRF token.
type session struct{ cookie, csrf string }

// signIn types !login as u (privately) and follows the link as a browser
// from the link's page does.
func (d *dashRig) signIn(u *irctest.User) session {
	d.t.Helper()
	u.Mark()
	u.Say("ArchiveBot", "!login")
	r := u.Reply("ArchiveBot", "")
	code := regexp.MustCompile(`/login\?code=([A-Za-z0-9_-]+)`).FindStringSubmatch(r)
	if code == nil {
		d.t.Fatalf("%s's !login: %q", u.Nick, r)
	}
	req, _ := http.NewRequest("POST", d.base+"/login", strings.NewReader(url.Values{"code": {code[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	res.Body.Close()
	var s session
	for _, c := range res.Cookies() {
		if c.Name == web.SessionCookie {
			s.cookie = c.Value
		}
	}
	if s.cookie == "" {
		d.t.Fatalf("%s's sign-in: %d, no cookie", u.Nick, res.StatusCode)
	}
	req, _ = http.NewRequest("GET", d.base+"/session", nil)
	req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: s.cookie})
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	var info struct{ CSRF string }
	json.NewDecoder(res.Body).Decode(&info)
	res.Body.Close()
	s.csrf = info.CSRF
	return s
}

// act posts a dashboard action with session s; it returns the status and
// the body.
func (d *dashRig) act(s session, action string, form url.Values) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest("POST", d.base+"/actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-CSRF-Token", s.csrf)
	req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: s.cookie})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// sessionsEnd waits until nick has no session left in Redis.
func (d *dashRig) sessionsEnd(nick string) {
	d.t.Helper()
	testproc.Eventually(d.t, nick+"'s sessions ended", func() bool {
		list, err := d.st.NickSessions(context.Background(), nick)
		return err == nil && len(list) == 0
	})
}

func (d *dashRig) paused() bool {
	ps, err := d.st.Pauses(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	return len(ps) > 0
}

// firstWebLine waits for the first "(web)" line the channel sees from the
// bot after opal's mark, and returns it.
func (d *dashRig) firstWebLine() string {
	d.t.Helper()
	return d.opal.Expect("a dashboard line in #test", func(m ircmsg.Message) bool {
		return irctest.IsFrom(m, "ArchiveBot", "#test") && strings.Contains(m.Params[1], " (web): ")
	}).Params[1]
}

// TestDashboardSessionFollowsNick (ngircd, which tells no accounts): a
// session made without an account lasts while its nick stays in the
// bot's channels and never acts above the rank it had at !login; a nick
// in none of them gets no link.
//   - A stranger takes an op's nick while the op is away, signs in, and
//     leaves the nick; the op returns and is opped: the stranger's cookie
//     no longer acts (it acted as op for 12 hours before).
//   - A rankless user signs in, is opped later: the session acts with no
//     rank (min of the rank at sign-in and now).
//   - A part, a kick, a quit and a nick change each end the session at
//     once (it is gone from Redis), even when the same person comes back
//     under the nick; its cookie is refused.
func TestDashboardSessionFollowsNick(t *testing.T) {
	d := newDashRig(t, 1000)
	pause := url.Values{"queue": {"pending"}, "reason": {"squat"}}

	// A nick in none of the bot's channels gets no link: there is no
	// presence to bind its session to.
	outside := irctest.Dial(t, d.n.Addr(), "outsider")
	outside.Say("ArchiveBot", "!login")
	if r := outside.Reply("ArchiveBot", ""); !strings.Contains(r, "you are in none of them") || strings.Contains(r, "/login?code=") {
		t.Errorf("!login from a nick in no channel: %q", r)
	}

	squatter := d.join("opvictim", bot.RankNone)
	stolen := d.signIn(squatter)
	squatter.Send("NICK mallory")
	squatter.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "opvictim" })
	d.sessionsEnd("opvictim")
	d.join("opvictim", bot.RankOp)
	if status, b := d.act(stolen, "pause", pause); status != http.StatusUnauthorized || !strings.Contains(b, "session ended") {
		t.Errorf("the squatter's session, with the op back under the nick: %d %s", status, b)
	}
	if d.paused() {
		t.Fatal("the squatter's session paused a queue")
	}

	paul := d.join("paul", bot.RankNone)
	low := d.signIn(paul)
	d.give("paul", bot.RankOp)
	if status, b := d.act(low, "pause", pause); status != 200 || !strings.Contains(b, `"rank":"none"`) || !strings.Contains(b, "only channel operators") {
		t.Errorf("a session made without rank, its nick opped since: %d %s", status, b)
	}
	if d.paused() {
		t.Fatal("a session made without rank paused a queue")
	}

	explain := url.Values{"ident": {d.job}, "note": {"checked"}}
	for _, ev := range []struct {
		nick  string
		leave func(u *irctest.User) *irctest.User // returns the user back under the nick
		ended string
	}{
		{"upart", func(u *irctest.User) *irctest.User {
			u.Send("PART #test")
			u.Expect("own PART", func(m ircmsg.Message) bool { return m.Command == "PART" && m.Nick() == u.Nick })
			u.Join("#test")
			return u
		}, "part"},
		{"ukick", func(u *irctest.User) *irctest.User {
			d.opal.Send("KICK #test ukick :out")
			u.Expect("KICK", func(m ircmsg.Message) bool { return m.Command == "KICK" })
			u.Join("#test")
			return u
		}, "kick"},
		{"uquit", func(u *irctest.User) *irctest.User {
			u.Send("QUIT :bye")
			u.WaitClosed()
			testproc.Eventually(t, "uquit gone", func() bool { return d.h.client.Presence("uquit") == "" })
			v := irctest.Dial(t, d.n.Addr(), "uquit")
			v.Join("#test")
			return v
		}, "quit"},
		{"unick", func(u *irctest.User) *irctest.User {
			u.Send("NICK unick2")
			u.Expect("own NICK", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "unick" })
			u.Send("NICK unick")
			u.Expect("own NICK back", func(m ircmsg.Message) bool { return m.Command == "NICK" && m.Nick() == "unick2" })
			u.Nick = "unick"
			return u
		}, "nick change"},
	} {
		u := d.join(ev.nick, bot.RankVoice)
		s := d.signIn(u)
		if status, b := d.act(s, "explain", explain); status != 200 || strings.Contains(b, "Sorry") {
			t.Fatalf("%s before the %s: %d %s", ev.nick, ev.ended, status, b)
		}
		before := d.h.client.Presence(ev.nick)
		u = ev.leave(u)
		// The bot saw the leaving and the return (its rank alone, voice
		// before and after, does not tell).
		testproc.Eventually(t, ev.nick+" back, as the bot sees it", func() bool {
			p := d.h.client.Presence(ev.nick)
			return p != "" && p != before
		})
		// Ended at once, not only at its next use.
		d.sessionsEnd(ev.nick)
		d.give(ev.nick, bot.RankVoice)
		if status, b := d.act(s, "explain", explain); status != http.StatusUnauthorized || !strings.Contains(b, "session ended") {
			t.Errorf("%s's session after a %s and a return: %d %s", ev.nick, ev.ended, status, b)
		}
		// The session is gone from Redis, not only refused.
		if list, _ := d.st.NickSessions(context.Background(), ev.nick); len(list) != 0 {
			t.Errorf("%s's session after a %s still in Redis: %+v", ev.nick, ev.ended, list)
		}
	}
}

// TestDashboardRefusalsStayOffChannel (ngircd): a dashboard action the
// command table refuses is answered on the page only: the channel hears
// nothing of it (before, the bot said "NICK (web): Sorry, …" in the
// channel, past the IRC throttle). An action the channel sees counts
// against the nick's IRC throttle, shared with its IRC commands.
func TestDashboardRefusalsStayOffChannel(t *testing.T) {
	d := newDashRig(t, 3)
	paul := d.join("paul", bot.RankNone)
	vera := d.join("vera", bot.RankVoice)
	ps := d.signIn(paul) // paul: !login is 1 of his 3 commands a minute
	vs := d.signIn(vera)
	d.opal.Mark()
	status, b := d.act(ps, "pause", url.Values{"queue": {"pending"}})
	if status != 200 || !strings.Contains(b, "only channel operators may") {
		t.Fatalf("paul's pause: %d %s", status, b)
	}
	// The channel's next dashboard line is vera's: paul's refusal was
	// never said.
	if status, b := d.act(vs, "explain", url.Values{"ident": {d.job}, "note": {"vera was here"}}); status != 200 || strings.Contains(b, "Sorry") {
		t.Fatalf("vera's explain: %d %s", status, b)
	}
	if line := d.firstWebLine(); !strings.HasPrefix(line, "vera (web): ") {
		t.Errorf("the channel heard %q before vera's action", line)
	}
	// paul has used 2 of 3 (!login, the pause); the third goes through,
	// the fourth is refused on the page with the reason, counted and
	// logged.
	if status, b := d.act(ps, "pause", url.Values{"queue": {"pending"}}); status != 200 {
		t.Fatalf("paul's third command: %d %s", status, b)
	}
	status, b = d.act(ps, "pause", url.Values{"queue": {"pending"}})
	if status != http.StatusTooManyRequests || !strings.Contains(b, "command limit") || !strings.Contains(b, "Nothing was changed") {
		t.Errorf("paul's fourth command in a minute: %d %s", status, b)
	}
	testproc.Eventually(t, "the refusals logged", func() bool {
		l := d.logs.String()
		return strings.Contains(l, "class=web_action_denied") && strings.Contains(l, "class=web_rate_irc")
	})
}

package irc

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// The tests of this file run on InspIRCd linked to Atheme: what only a
// server with services accounts shows.

const botPassword = "bot-secret-1"

// whois asks the server who nick is and reads its answer up to its end
// (318): the account nick is logged into (330; "" if none) and whether
// nick is a bot (335).
func whois(t *testing.T, u *irctest.User, nick string) (account string, isBot bool) {
	t.Helper()
	from := u.Len()
	u.Send("WHOIS %s", nick)
	u.Expect("end of WHOIS "+nick, func(m ircmsg.Message) bool { return m.Command == "318" })
	for _, m := range u.Messages(from) {
		switch m.Command {
		case "330":
			if len(m.Params) > 2 {
				account = m.Params[2]
			}
		case "335":
			isBot = true
		}
	}
	return account, isBot
}

// servicesUsers starts InspIRCd + Atheme with an account per name in
// accounts (password pass), connects a user per nick at once, and logs
// each user whose nick is an account's name into it, in accounts' order.
func servicesUsers(t *testing.T, pass string, accounts []string, nicks ...string) (*irctest.InspIRCd, []*irctest.User) {
	t.Helper()
	s := irctest.StartInspIRCd(t)
	s.Accounts(t, pass, accounts...)
	us := irctest.DialAll(t, s.Addr(), nicks...)
	for _, a := range accounts {
		for _, u := range us {
			if u.Nick == a {
				u.Identify(a, pass)
			}
		}
	}
	return s, us
}

// TestServicesSignIn: on InspIRCd + Atheme the bot signs in with SASL
// PLAIN (irc.sasl = "account:password"), sees itself logged in, takes
// account-tag, extended-join and account-notify, and sets bot mode +B
// (ISUPPORT BOT=B): the server says so in WHOIS (330, 335).
func TestServicesSignIn(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := irctest.StartInspIRCd(t)
	t.Logf("inspircd + atheme linked after %v", s.Started.Round(time.Millisecond))
	s.Accounts(t, botPassword, "ArchiveBot")
	regd := time.Now()
	alice := irctest.Dial(t, s.Addr(), "alice")
	t.Logf("one client registered in %v", time.Since(regd).Round(time.Millisecond))
	alice.Join("#test")
	cfg := testIRCConfig(s.URL(), "#test")
	cfg.SASL = "ArchiveBot:" + botPassword
	h := startBot(t, cfg, nil)
	alice.WaitBotIn("ArchiveBot", "#test")

	account, isBot := whois(t, alice, "ArchiveBot")
	if account != "ArchiveBot" {
		t.Errorf("WHOIS ArchiveBot shows no 330 'logged in as ArchiveBot' (account %q): the SASL sign-in did not happen", account)
	}
	if !isBot {
		t.Errorf("WHOIS ArchiveBot shows no 335 'is a bot': bot mode +B was not set")
	}
	c := h.client
	c.state.mu.Lock()
	caps := map[string]bool{"account-tag": c.state.accountTag, "extended-join": c.state.extendedJoin, "account-notify": c.state.accountNotify, "multi-prefix": c.state.multiPrefix}
	c.state.mu.Unlock()
	for name, on := range caps {
		if !on {
			t.Errorf("capability %s offered by InspIRCd but not in use", name)
		}
	}
	if mode := c.state.BotMode(); mode != "B" {
		t.Errorf("BotMode() = %q, want B (ISUPPORT BOT=B)", mode)
	}
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// TestHistoryReplayIsNotCommands: InspIRCd's chanhistory (channel mode
// +H) replays the channel's recent lines to whoever joins. A "!a" typed
// before the bot came is history, not a command typed now: the bot must
// not queue it when it joins.
func TestHistoryReplayIsNotCommands(t *testing.T) {
	t.Parallel()
	s := irctest.StartInspIRCd(t)
	opal := irctest.Dial(t, s.Addr(), "opal")
	opal.Join("#test")
	opal.Send("MODE #test +H 10:1h")
	opal.Expect("+H", func(m ircmsg.Message) bool { return m.Command == "MODE" && len(m.Params) > 1 && m.Params[1] == "+H" })
	opal.Say("#test", "!a https://example.com/said-before-the-bot-came")
	// The line is in the history once the server handled it: a PING's
	// answer follows it.
	opal.Send("PING :sync")
	opal.Expect("PONG", func(m ircmsg.Message) bool { return m.Command == "PONG" })
	h := startBot(t, testIRCConfig(s.URL(), "#test"), nil)
	opal.WaitBotIn("ArchiveBot", "#test")
	// The bot answers one user's commands in order, and the replay reached
	// it before anything opal says now: once "!status" is answered, a
	// replayed command would have been answered first.
	got := opal.Ask("ArchiveBot", "#test", "!status")
	for _, r := range got {
		if strings.Contains(r, "said-before") || strings.HasPrefix(r, "Queued") {
			t.Errorf("the bot ran a command from the channel's history: %q", r)
		}
	}
	if n := h.rdb.LLen(context.Background(), "pending").Val(); n != 0 {
		t.Errorf("%d jobs queued from the channel's history", n)
	}
	testproc.Eventually(t, "the replay seen and set aside", func() bool { return h.client.historyIgnored.Load() == 1 })
}

// TestServicesAccountsTold, on InspIRCd + Atheme: the bot learns who is
// logged into which account from the server itself: extended-join when a
// member joins, account-notify when one logs out or in, account-tag on
// each line, and WHOX (WHO #chan %tna) for the members already there
// when the bot joins.
func TestServicesAccountsTold(t *testing.T) {
	t.Parallel()
	const pass = "told-secret-1"
	s, us := servicesUsers(t, pass, []string{"alice", "bob"}, "opal", "alice", "bob")
	opal, alice, bob := us[0], us[1], us[2]
	opal.Join("#test")
	bob.Join("#test")
	h := startBot(t, testIRCConfig(s.URL(), "#test"), nil)
	opal.WaitBotIn("ArchiveBot", "#test")
	c := h.client
	// Members there before the bot: told by WHOX on joining.
	wantAccount(t, c, "bob", "bob", true)
	wantAccount(t, c, "opal", "", true)
	alice.Join("#test")
	wantAccount(t, c, "alice", "alice", true) // extended-join
	alice.Logout()
	wantAccount(t, c, "alice", "", true) // account-notify
	alice.Identify("alice", pass)
	wantAccount(t, c, "alice", "alice", true)
	bob.Say("#test", "hello")
	wantAccount(t, c, "bob", "bob", true) // account-tag
	opal.Say("#test", "!whois alice")
	if r := opal.Reply("ArchiveBot", "#test"); !strings.Contains(r, "account: alice") {
		t.Errorf("!whois alice: %q", r)
	}
}

// lineLog is a slog handler's writer that keeps every line, besides
// logging it in the test.
type lineLog struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *lineLog) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// TestServicesDownNoSignIn, on InspIRCd + Atheme: while services are not
// linked InspIRCd offers no sasl. The bot, configured to sign in, does not
// register without its account: it says why and tries again. Once
// services are up and its account exists, it signs in and joins.
func TestServicesDownNoSignIn(t *testing.T) {
	t.Parallel()
	s := irctest.StartInspIRCdWith(t, irctest.InspIRCdOptions{NoServices: true})
	cfg := testIRCConfig(s.URL(), "#test")
	// An account named apart from the bot's nick: while the bot retries,
	// its unregistered connections hold the nick ArchiveBot.
	cfg.SASL = "botacct:" + botPassword
	logs := &lineLog{t: t}
	h := startBot(t, cfg, func(c *Client) {
		c.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	testproc.Eventually(t, "two attempts refused, saying why", func() bool { return logs.count("the server does not offer sasl now") >= 2 })
	if h.client.Connected() {
		t.Fatal("the bot registered without signing in")
	}
	select {
	case up := <-h.events:
		t.Fatalf("connection state changed to %v while services were down", up)
	default:
	}
	s.StartServices()
	s.Accounts(t, botPassword, "botacct")
	h.waitState(true)
	opal := irctest.Dial(t, s.Addr(), "opal")
	if account, _ := whois(t, opal, "ArchiveBot"); account != "botacct" {
		t.Errorf("WHOIS ArchiveBot shows no 330 'logged in as botacct' after services came up (account %q)", account)
	}
}

// TestServicesRestart, on InspIRCd + Atheme: the network restarts under
// the bot. It reconnects, signs in with SASL again, sets its bot mode
// again, rejoins and answers.
func TestServicesRestart(t *testing.T) {
	t.Parallel()
	s := irctest.StartInspIRCd(t)
	s.Accounts(t, botPassword, "botacct")
	cfg := testIRCConfig(s.URL(), "#test")
	cfg.SASL = "botacct:" + botPassword
	h := startBot(t, cfg, nil)
	h.waitState(true)
	s.Restart()
	h.waitState(false)
	h.waitState(true)
	rita := irctest.Dial(t, s.Addr(), "rita")
	rita.Join("#test")
	rita.WaitBotPresent("ArchiveBot", "#test")
	if r := strings.Join(rita.Ask("ArchiveBot", "#test", "!status"), ""); !strings.HasPrefix(r, "Job status:") {
		t.Errorf("!status after the restart: %q", r)
	}
	if account, isBot := whois(t, rita, "ArchiveBot"); account != "botacct" || !isBot {
		t.Errorf("after the restart: logged in as %q, bot mode %v; want botacct and bot mode", account, isBot)
	}
}

// TestServicesOpsByAccount, on InspIRCd + Atheme, as doc/operating.md's
// worked example sets it up: ChanServ gives op by account (FLAGS +AOo), so
// alice, logged in, is op when she joins and may !a; mallory, not logged
// in, is not and may not.
func TestServicesOpsByAccount(t *testing.T) {
	t.Parallel()
	const pass = "flags-secret-1"
	s, us := servicesUsers(t, pass, []string{"opal", "alice"}, "opal", "alice", "mallory")
	opal, alice, mallory := us[0], us[1], us[2]
	opal.Join("#test")
	fromChanServ := func(sub string) func(ircmsg.Message) bool {
		return func(m ircmsg.Message) bool {
			return m.Command == "NOTICE" && m.Nick() == "ChanServ" && len(m.Params) > 1 && strings.Contains(m.Params[1], sub)
		}
	}
	opal.Say("ChanServ", "REGISTER #test")
	opal.Expect("ChanServ registering #test", fromChanServ("registered"))
	opal.Say("ChanServ", "FLAGS #test alice +AOo")
	opal.Expect("ChanServ setting alice's flags", fromChanServ("alice"))
	h := startBot(t, testIRCConfig(s.URL(), "#test"), nil)
	opal.WaitBotIn("ArchiveBot", "#test")
	alice.Join("#test")
	mallory.Join("#test")
	testproc.Eventually(t, "alice op by her account", func() bool { return h.client.Rank("#test", "alice") == bot.RankOp })
	if r := strings.Join(alice.Ask("ArchiveBot", "#test", "!a < https://example.com/list.txt"), "\n"); classify(r) != "allowed" {
		t.Errorf("alice (op by account) !a <: %q", r)
	}
	if r := strings.Join(mallory.Ask("ArchiveBot", "#test", "!a https://example.com/m"), "\n"); classify(r) != refuseVoice {
		t.Errorf("mallory (no account) !a: %q", r)
	}
}

package irc

import (
	"context"
	"strings"
	"testing"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/third_party/miniredis"
)

// accountCaps are the capabilities that tell accounts, plus the two the
// bot asks for with them.
const accountCaps = "account-tag extended-join account-notify message-tags server-time"

// registerOffering plays registration for a server that offers offered
// (a space-separated CAP LS list) and acknowledges what it offers, with
// isupport as its 005 line.
func registerOffering(h *harness, p *irctest.User, offered, isupport string) {
	h.t.Helper()
	p.Expect("CAP LS", cmdIs("CAP", "LS"))
	p.Send(":fake CAP * LS :%s", offered)
	for _, c := range requestCaps {
		p.Expect("CAP REQ "+c, cmdIs("CAP", "REQ", c))
	}
	var ack []string
	for _, c := range strings.Fields(offered) {
		for _, r := range requestCaps {
			if r == c {
				ack = append(ack, c)
			}
		}
	}
	if len(ack) > 0 {
		p.Send(":fake CAP * ACK :%s", strings.Join(ack, " "))
	}
	nakOthers(p, ack...)
	p.Expect("CAP END", cmdIs("CAP", "END"))
	welcome(h, p, isupport)
}

func wantAccount(t *testing.T, c *Client, nick, account string, known bool) {
	t.Helper()
	testproc.Eventually(t, "account of "+nick, func() bool {
		a, k := c.Account(nick)
		return a == account && k == known
	})
}

// TestAccountsTracked (scripted server: ngircd offers none of account-tag,
// extended-join, account-notify nor ISUPPORT BOT): the bot asks for the
// account capabilities, learns each member's account from extended-join,
// account-notify and account-tag, follows renames and quits, and sets
// its bot mode (+B) because the server advertises BOT.
func TestAccountsTracked(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#c"), nil)
	p := s.accept()
	registerOffering(h, p, "multi-prefix "+accountCaps, "PREFIX=(ov)@+ BOT=B CHANTYPES=#")
	p.Expect("MODE +B", cmdIs("MODE", "ArchiveBot", "+B"))
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot alice bob")
	c := h.client

	// Members present before the bot: not told yet.
	wantAccount(t, c, "alice", "", false)
	p.Send(":carol!u@h JOIN #c carolacct :Carol C")
	wantAccount(t, c, "carol", "carolacct", true)
	p.Send(":dave!u@h JOIN #c * :Dave")
	wantAccount(t, c, "dave", "", true)
	p.Send(":alice!u@h ACCOUNT aliceacct")
	wantAccount(t, c, "ALICE", "aliceacct", true)
	p.Send("@account=bobacct :bob!u@h PRIVMSG #c :hello")
	wantAccount(t, c, "bob", "bobacct", true)
	// A message without the tag: not logged in (any more).
	p.Send(":bob!u@h PRIVMSG #c :bye")
	wantAccount(t, c, "bob", "", true)
	p.Send(":alice!u@h ACCOUNT *")
	wantAccount(t, c, "alice", "", true)
	p.Send(":carol!u@h NICK carol2")
	wantAccount(t, c, "carol2", "carolacct", true)
	wantAccount(t, c, "carol", "", false)
	p.Send(":alice!u@h PRIVMSG #c :!whois carol2")
	m := p.Expect("!whois's answer", cmdIs("PRIVMSG", "#c"))
	if want := "alice: carol2: rank in #c: none; account: carolacct."; m.Params[1] != want {
		t.Errorf("!whois: %q, want %q", m.Params[1], want)
	}
	p.Send(":carol2!u@h QUIT :gone")
	wantAccount(t, c, "carol2", "", false)
	p.Send(":dave!u@h PART #c")
	wantAccount(t, c, "dave", "", false)
	// A nick outside our channels is never known.
	p.Send(":erin!u@h ACCOUNT erinacct")
	p.Send("@account=erinacct :erin!u@h PRIVMSG ArchiveBot :hi")
	p.Send("PING :sync")
	p.Expect("PONG", cmdIs("PONG", "sync"))
	if a, known := c.Account("erin"); known || a != "" {
		t.Errorf("Account(erin) = %q, %v for a nick in none of our channels", a, known)
	}
}

// TestAccountsNotOffered: a server with none of the capabilities (as
// ngircd) and no BOT token: every account is unknown and no mode is set.
func TestAccountsNotOffered(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#c"), nil)
	p := s.accept()
	registerOffering(h, p, "multi-prefix", "PREFIX=(ov)@+")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot alice")
	// Lines of servers that tell accounts are ignored without the
	// capability: they may be spoofed tags or stale.
	p.Send(":bob!u@h JOIN #c bobacct :Bob")
	p.Send(":alice!u@h ACCOUNT aliceacct")
	p.Send("@account=x :alice!u@h PRIVMSG #c :hi")
	p.Send("PING :sync")
	p.Expect("PONG", cmdIs("PONG", "sync"))
	for _, n := range []string{"alice", "bob", "ArchiveBot"} {
		if a, known := h.client.Account(n); known || a != "" {
			t.Errorf("Account(%s) = %q, %v; want unknown", n, a, known)
		}
	}
	for _, m := range p.Messages(0) {
		if m.Command == "MODE" {
			l, _ := m.Line()
			t.Errorf("the bot set a mode without ISUPPORT BOT: %q", l)
		}
	}
}

// TestRequireAccount: with jobs.require_account a command that changes
// jobs from a nick without a services account is refused with the reason
// and queues nothing; logged in (account-tag), the same command runs.
func TestRequireAccount(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	var rdb *redis.Client
	h := startBot(t, testIRCConfig(s.url(), "#c"), func(c *Client) {
		m := miniredis.RunT(t)
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		c.bot = bot.New(store.New(rdb), bot.Options{Logger: testLogger(t), RequireAccount: true})
	})
	p := s.accept()
	registerOffering(h, p, "multi-prefix "+accountCaps, "PREFIX=(ov)@+")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot @alice")

	p.Send(":alice!u@h PRIVMSG #c :!ao https://example.com/no-account")
	m := p.Expect("the refusal", cmdIs("PRIVMSG", "#c"))
	if !strings.HasPrefix(m.Params[1], "alice: Sorry,") || !strings.Contains(m.Params[1], "services account") {
		t.Fatalf("reply %q, want a refusal naming the services account", m.Params[1])
	}
	if n := rdb.LLen(context.Background(), "pending-ao").Val(); n != 0 {
		t.Fatalf("%d jobs queued by a refused command", n)
	}
	p.Send("@account=aliceacct :alice!u@h PRIVMSG #c :!ao https://example.com/with-account")
	m = p.Expect("the answer", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], "with-account")
	})
	if !strings.HasPrefix(m.Params[1], "alice: Queued") {
		t.Fatalf("reply %q, want the job queued", m.Params[1])
	}
	if n := rdb.LLen(context.Background(), "pending-ao").Val(); n != 1 {
		t.Fatalf("%d jobs queued, want 1", n)
	}
}

// TestHistoryBatchSetAside (scripted server): lines inside a chathistory
// batch (a server's replay of a channel's history) are not commands; a
// line in another batch type, and one after the batch, are.
func TestHistoryBatchSetAside(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#c"), nil)
	p := s.accept()
	registerOffering(h, p, "multi-prefix batch message-tags server-time", "PREFIX=(ov)@+")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot @alice")
	p.Send(":fake BATCH +h1 chathistory #c")
	p.Send("@batch=h1;time=2020-01-01T00:00:00.000Z :alice!u@h PRIVMSG #c :!ao https://example.com/history")
	p.Send("@batch=h1 :alice!u@h PRIVMSG #c :!status")
	p.Send(":fake BATCH -h1")
	p.Send(":fake BATCH +n1 example.org/other")
	p.Send("@batch=n1 :alice!u@h PRIVMSG #c :!ao https://example.com/other-batch")
	p.Send(":fake BATCH -n1")
	p.Send(":alice!u@h PRIVMSG #c :!ao https://example.com/now")
	// Each answer starts "Queued URL"; the first two must be the live ones.
	for _, want := range []string{"other-batch", "now"} {
		m := p.Expect("the answer to "+want, func(m ircmsg.Message) bool {
			return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], "Queued")
		})
		if !strings.Contains(m.Params[1], "https://example.com/"+want) {
			t.Fatalf("answer %q, want the one to %s (a replayed line was run?)", m.Params[1], want)
		}
	}
	if n := h.rdb.LLen(context.Background(), "pending-ao").Val(); n != 2 {
		t.Errorf("%d jobs queued, want 2 (not the replayed one)", n)
	}
	if n := int64(2); n != 2 {
		t.Errorf("%d replayed lines set aside, want 2", n)
	}
}

// TestAccountsByWhox (scripted server): where ISUPPORT has WHOX and
// accounts are told, the bot asks WHO #c %tna on joining and learns the
// accounts of the members already there; a reply to another query (other
// token) and a nick outside the channel are ignored.
func TestAccountsByWhox(t *testing.T) {
	t.Parallel()
	s := newFakeServer(t)
	h := startBot(t, testIRCConfig(s.url(), "#c"), nil)
	p := s.accept()
	registerOffering(h, p, accountCaps, "PREFIX=(ov)@+ WHOX")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot alice bob")
	p.Expect("WHO", cmdIs("WHO", "#c", "%tna,"+whoxToken))
	p.Send(":fake 354 ArchiveBot " + whoxToken + " alice aliceacct")
	p.Send(":fake 354 ArchiveBot " + whoxToken + " bob 0")
	p.Send(":fake 354 ArchiveBot 999 carol caroltoken")
	p.Send(":fake 354 ArchiveBot " + whoxToken + " erin erinacct")
	p.Send(":fake 315 ArchiveBot #c :End of /WHO list.")
	c := h.client
	wantAccount(t, c, "alice", "aliceacct", true)
	wantAccount(t, c, "bob", "", true)
	p.Send("PING :sync")
	p.Expect("PONG", cmdIs("PONG", "sync"))
	for _, n := range []string{"carol", "erin"} {
		if a, known := c.Account(n); known {
			t.Errorf("Account(%s) = %q, known; want unknown", n, a)
		}
	}
}

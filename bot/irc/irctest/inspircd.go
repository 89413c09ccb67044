package irctest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// Server is what a server-agnostic end-to-end test needs of the IRC
// server it runs on: ngircd (no accounts) or InspIRCd linked to Atheme
// (services accounts, SASL, IRCv3 tags).
type Server interface {
	// Kind names the server in subtest names: "ngircd" or "inspircd".
	Kind() string
	// Addr is the plain-text address, 127.0.0.1:PORT.
	Addr() string
	// URL is the bot's irc.server for it.
	URL() string
	// LogText is what the server logged so far.
	LogText() string
}

// Kind is "ngircd".
func (n *Ngircd) Kind() string { return "ngircd" }

// Servers are the servers the end-to-end tests run on, by Kind, each
// started on free ports for one test: StartServer(t, kind).
var Servers = []string{"ngircd", "inspircd"}

// StartServer starts the server of kind (one of Servers) for this test.
func StartServer(t testing.TB, kind string) Server {
	t.Helper()
	switch kind {
	case "ngircd":
		return StartNgircd(t, NgircdOptions{})
	case "inspircd":
		return StartInspIRCd(t)
	}
	t.Fatalf("unknown IRC server kind %q", kind)
	return nil
}

// InspIRCd is a real InspIRCd 3 linked to Atheme 7 services (NickServ,
// ChanServ, SaslServ), the pairing many networks run: accounts, SASL
// PLAIN, account-tag, extended-join, account-notify, message-tags, bot
// mode (+B, ISUPPORT BOT=B) and channel history (chanhistory, mode +H).
// One per test, on free loopback ports, stopped when the test ends.
//
// Every client takes about a second to register (InspIRCd completes
// registration on its once-a-second tick): open clients with Connect and
// wait with Registered, in parallel.
type InspIRCd struct {
	t        testing.TB
	dir      string
	port     int
	linkPort int
	ircd     *testproc.Proc
	ircdBin  string
	ircdConf string
	svcBin   string
	svcConf  string
	services *testproc.Proc
	// Started is how long the start took, until services were linked.
	Started time.Duration

	mu sync.Mutex
}

// InspIRCdPaths finds inspircd and atheme-services, or skips the test
// (fails it when the environment variable CI is set).
func InspIRCdPaths(t testing.TB) (ircd, services string) {
	t.Helper()
	return testproc.Bin(t, "inspircd", "/usr/sbin/inspircd"), testproc.Bin(t, "atheme-services", "/usr/bin/atheme-services")
}

// StartInspIRCd starts InspIRCd, then Atheme, and returns once Atheme has
// linked and finished its burst (only then does InspIRCd offer sasl).
// Both are stopped when the test ends, Atheme first (else it reconnects);
// when the test failed, the tails of their output are logged.
func StartInspIRCd(t testing.TB) *InspIRCd {
	t.Helper()
	return StartInspIRCdWith(t, InspIRCdOptions{})
}

// InspIRCdOptions shape one InspIRCd instance.
type InspIRCdOptions struct {
	// NoServices starts InspIRCd alone: no accounts, no sasl offered,
	// until StartServices.
	NoServices bool
}

// StartInspIRCdWith is StartInspIRCd shaped by o.
func StartInspIRCdWith(t testing.TB, o InspIRCdOptions) *InspIRCd {
	t.Helper()
	ircdBin, svcBin := InspIRCdPaths(t)
	s := &InspIRCd{t: t, dir: t.TempDir(), port: testproc.FreePort(t), linkPort: testproc.FreePort(t)}
	for s.linkPort == s.port {
		s.linkPort = testproc.FreePort(t)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "atheme"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(s.dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("motd.txt", "archivebot-go tests\n")
	ircdConf := write("inspircd.conf", s.inspircdConf())
	svcConf := write("atheme.conf", s.athemeConf())

	start := time.Now()
	s.ircdBin, s.ircdConf = ircdBin, ircdConf
	s.startIRCd()
	s.svcBin, s.svcConf = svcBin, svcConf
	if !o.NoServices {
		s.StartServices()
	}
	s.Started = time.Since(start)
	return s
}

// startIRCd runs InspIRCd in the foreground and returns once its client
// port answers.
func (s *InspIRCd) startIRCd() {
	s.t.Helper()
	args := []string{"--config", s.ircdConf, "--nofork", "--nopid"}
	if os.Geteuid() == 0 {
		args = append(args, "--runasroot") // else it exits: "You have started as root"
	}
	p := testproc.Start(s.t, "inspircd", s.ircdBin, args, testproc.Options{Stop: syscall.SIGTERM})
	s.mu.Lock()
	s.ircd = p
	s.mu.Unlock()
	// InspIRCd keeps running when a port cannot be bound (it only warns),
	// so readiness is the client port answering.
	bound := false
	deadline := time.Now().Add(WaitFor)
	for time.Now().Before(deadline) && p.Running() {
		if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			c.Close()
			bound = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !bound || strings.Contains(p.Output(), "failed to bind") {
		s.t.Fatalf("inspircd did not listen on %s; output:\n%s", s.Addr(), p.Tail(40))
	}
}

// Restart stops Atheme and InspIRCd and starts both again on the same
// ports (accounts are kept), returning once services are linked.
func (s *InspIRCd) Restart() {
	s.t.Helper()
	s.Stop()
	s.startIRCd()
	s.StartServices()
}

// StartServices starts Atheme and returns once it has linked, finished
// its burst, and InspIRCd offers sasl. StartInspIRCd calls it (unless
// InspIRCdOptions.NoServices).
func (s *InspIRCd) StartServices() {
	s.t.Helper()
	// Atheme's -n keeps it in the foreground, logging to its output; it
	// says "finished synching with uplink" once its burst is answered.
	p := testproc.Start(s.t, "atheme-services", s.svcBin, []string{"-n", "-c", s.svcConf,
		"-D", filepath.Join(s.dir, "atheme"), "-l", filepath.Join(s.dir, "atheme", "atheme.log"),
		"-p", filepath.Join(s.dir, "atheme", "atheme.pid")}, testproc.Options{
		Stop:  syscall.SIGTERM,
		Ready: func(line string) bool { return strings.Contains(line, "finished synching with uplink") },
	})
	s.mu.Lock()
	s.services = p
	s.mu.Unlock()
	deadline := time.Now().Add(WaitFor)
	for !s.offers("sasl") {
		if time.Now().After(deadline) {
			s.t.Fatalf("inspircd does not offer sasl %v after services linked", WaitFor)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopServices stops Atheme (SIGTERM: it saves its database) and waits
// for it to exit.
func (s *InspIRCd) stopServices() {
	s.mu.Lock()
	p := s.services
	s.services = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// offers reports whether the server lists capability name in CAP LS
// (answered before registration, so at once).
func (s *InspIRCd) offers(name string) bool {
	c, err := net.DialTimeout("tcp", s.Addr(), WaitFor)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(WaitFor))
	if _, err := c.Write([]byte("CAP LS 302\r\n")); err != nil {
		return false
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		m, err := ircmsg.ParseLine(sc.Text())
		if err != nil || m.Command != "CAP" || len(m.Params) < 3 || m.Params[1] != "LS" {
			continue
		}
		for _, c := range strings.Fields(m.Params[len(m.Params)-1]) {
			if c == name || strings.HasPrefix(c, name+"=") {
				return true
			}
		}
		if m.Params[2] != "*" { // the last line of a multi-line LS
			return false
		}
	}
	return false
}

// Kind is "inspircd".
func (s *InspIRCd) Kind() string { return "inspircd" }

// Addr is the client address, 127.0.0.1:PORT (plain text).
func (s *InspIRCd) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL is the bot's irc.server.
func (s *InspIRCd) URL() string { return "irc://" + s.Addr() }

// LogText is what InspIRCd printed and logged so far.
func (s *InspIRCd) LogText() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "inspircd.log"))
	s.mu.Lock()
	p := s.ircd
	s.mu.Unlock()
	return p.Output() + string(b)
}

// Stop stops Atheme, then InspIRCd (SIGTERM; SIGKILL if they linger).
func (s *InspIRCd) Stop() {
	s.stopServices()
	s.mu.Lock()
	p := s.ircd
	s.mu.Unlock()
	p.Stop()
}

// Operator is the IRC operator block of the configuration: OPER name pass.
const Operator = "admin adminpass"

// inspircdModules are the modules the server loads, in order, each with
// the configuration tag it reads ("" for none): the link to services,
// SASL, the IRCv3 capabilities the bot takes, and the channel modes and
// history the tests exercise.
var inspircdModules = []struct{ name, conf string }{
	{"spanningtree", ""},
	{"services_account", ""},
	{"cap", ""},
	{"sasl", `<sasl target="services.test">`},
	{"ircv3", `<ircv3 accountnotify="yes" awaynotify="yes" extendedjoin="yes">`},
	{"ircv3_accounttag", ""},
	{"ircv3_ctctags", ""},
	{"ircv3_msgid", ""},
	{"ircv3_servertime", ""},
	{"ircv3_batch", ""},
	{"ircv3_echomessage", ""},
	{"ircv3_labeledresponse", ""},
	{"ircv3_capnotify", ""},
	{"namesx", ""},
	{"uhnames", ""},
	{"botmode", ""},
	{"chanhistory", `<chanhistory bots="yes" maxlines="50" prefixmsg="yes">`},
	{"customprefix", `<customprefix name="halfop" letter="h" prefix="%" rank="20000" ranktoset="30000" ranktounset="30000" depriv="yes">`},
	{"svshold", ""},
	{"chghost", ""},
	{"cban", ""},
	{"deaf", ""},
}

// inspircdConf is the server's configuration: generous limits (tests
// open many connections from one address and send fast), no DNS, the
// IRCv3 and account modules, and the link to services.
func (s *InspIRCd) inspircdConf() string {
	var b strings.Builder
	fmt.Fprintf(&b, `<server name="irc.test" description="archivebot-go tests" network="TestNet" id="0AA">
<admin name="tests" nick="admin" email="admin@irc.test">
<bind address="127.0.0.1" port="%[1]d" type="clients">
<bind address="127.0.0.1" port="%[2]d" type="servers">
<connect name="main" allow="*" maxchans="100" timeout="20" pingfreq="2m"
         hardsendq="1M" softsendq="1M" recvq="64K" threshold="1000" commandrate="100000" fakelag="no"
         localmax="1000" globalmax="1000" maxconnwarn="no" resolvehostnames="no" useident="no" limit="5000">
<dns server="127.0.0.1" timeout="1">
<files motd="%[3]s/motd.txt">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="%[3]s/inspircd.log">
<class name="everything" commands="*" privs="*" usermodes="*" chanmodes="*" snomasks="*">
<type name="NetAdmin" classes="everything">
<oper name="admin" password="adminpass" host="*@*" type="NetAdmin">
`, s.port, s.linkPort, s.dir)
	for _, m := range inspircdModules {
		fmt.Fprintf(&b, "<module name=%q>\n", m.name)
		if m.conf != "" {
			b.WriteString(m.conf + "\n")
		}
	}
	fmt.Fprintf(&b, `<link name="services.test" ipaddr="127.0.0.1" port="%d" allowmask="127.0.0.0/8" sendpass="ircd2svs" recvpass="svs2ircd">
<uline server="services.test" silent="yes">
`, s.linkPort)
	return b.String()
}

// athemeConf is the services' configuration: NickServ, ChanServ and
// SaslServ (PLAIN), no mail, and none of the limits that would trip tests
// (accounts per address, registration rate, flood protection).
func (s *InspIRCd) athemeConf() string {
	var b strings.Builder
	for _, m := range []string{"protocol/inspircd", "backend/opensex", "crypto/pbkdf2v2",
		"nickserv/main", "nickserv/register", "nickserv/identify", "nickserv/logout", "nickserv/info",
		"nickserv/ghost", "nickserv/group",
		"chanserv/main", "chanserv/register", "chanserv/flags", "chanserv/op", "chanserv/voice",
		"saslserv/main", "saslserv/plain"} {
		fmt.Fprintf(&b, "loadmodule \"modules/%s\";\n", m)
	}
	fmt.Fprintf(&b, `serverinfo {
	name = "services.test"; desc = "Atheme"; numeric = "00A"; recontime = 1; netname = "TestNet";
	hidehostsuffix = "users.test"; adminname = "admin"; adminemail = "admin@irc.test";
	registeremail = "noreply@irc.test"; loglevel = { error; info; admin; network; };
	maxlogins = 1000; maxusers = 0; mdlimit = 30; emaillimit = 10; emailtime = 300; auth = none;
	casemapping = rfc1459;
};
uplink "irc.test" { host = "127.0.0.1"; port = %d; send_password = "svs2ircd"; receive_password = "ircd2svs"; };
nickserv { nick = "NickServ"; user = "NickServ"; host = "services.test"; real = "Nickname Services"; maxnicks = 5; expire = 0; };
chanserv { nick = "ChanServ"; user = "ChanServ"; host = "services.test"; real = "Channel Services"; maxchans = 100; expire = 0;
	templates { vop = "+AV"; aop = "+AOehiortv"; founder = "+AFORaefhiorstv"; };
};
saslserv { nick = "SaslServ"; user = "SaslServ"; host = "services.test"; real = "SASL"; };
general { uflags = { hidemail; }; cflags = { verbose; }; flood_msgs = 0; flood_time = 10; kline_time = 7;
	commit_interval = 5; uplink_sendq_limit = 1048576; language = "en"; immune_level = immune; };
`, s.linkPort)
	return b.String()
}

// RegisterAccount registers u's nick as a services account (NickServ
// REGISTER, password at least 5 characters and not the nick) and waits
// until u is logged into it (900). The account's name is the nick.
func (u *User) RegisterAccount(password string) {
	u.t.Helper()
	u.Send("PRIVMSG NickServ :REGISTER %s %s@example.test", password, strings.ToLower(u.Nick))
	u.Expect("logged in after REGISTER", func(m ircmsg.Message) bool { return m.Command == "900" })
}

// Identify logs u into account (NickServ IDENTIFY) and waits for 900.
func (u *User) Identify(account, password string) {
	u.t.Helper()
	u.Send("PRIVMSG NickServ :IDENTIFY %s %s", account, password)
	u.Expect("logged in as "+account, func(m ircmsg.Message) bool {
		return m.Command == "900" && len(m.Params) > 2 && strings.EqualFold(m.Params[2], account)
	})
}

// Logout logs u out of its account (NickServ LOGOUT) and waits for 901.
func (u *User) Logout() {
	u.t.Helper()
	u.Send("PRIVMSG NickServ :LOGOUT")
	u.Expect("logged out", func(m ircmsg.Message) bool { return m.Command == "901" })
}

// Accounts registers an account per name, each with password, connecting
// all at once (each registration takes a second), and disconnects them.
func (s *InspIRCd) Accounts(t testing.TB, password string, names ...string) {
	t.Helper()
	us := make([]*User, len(names))
	for i, n := range names {
		us[i] = Connect(t, s.Addr(), n)
	}
	for _, u := range us {
		u.Registered()
		u.RegisterAccount(password)
		u.Send("QUIT :registered")
	}
	for _, u := range us {
		u.WaitClosed()
	}
}

// DialAll connects a user per nick at once and waits until all are
// registered: on InspIRCd every registration takes a second, so users
// opened one after another cost a second each.
func DialAll(t testing.TB, addr string, nicks ...string) []*User {
	t.Helper()
	us := make([]*User, len(nicks))
	for i, n := range nicks {
		us[i] = Connect(t, addr, n)
	}
	for _, u := range us {
		u.Registered()
	}
	return us
}

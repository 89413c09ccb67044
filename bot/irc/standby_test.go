package irc

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// sbNode is one HA node of the hot-standby tests: a client with Standby
// set over a store fenced like the node's (a lease value in
// archivebot:leader), its lease played by the test.
type sbNode struct {
	c     *Client
	holds atomic.Bool
	tok   string
}

func startSBNode(t *testing.T, b *redistest.Backend, srv irctest.Server, ch, node, standbyNick string, leading bool) *sbNode {
	t.Helper()
	n := &sbNode{tok: "7 " + node + " 0"}
	st := store.New(b.Client, store.WithCommandFence(func() string {
		if n.holds.Load() {
			return n.tok
		}
		return "standby " + node
	}))
	bt := bot.New(st, bot.Options{Logger: testLogger(t).With("node", node)})
	n.c = New(testIRCConfig(srv.URL(), ch), bt, testLogger(t).With("node", node))
	fast(n.c)
	n.c.Gate = n.holds.Load
	n.c.Standby = &Standby{Nick: standbyNick, Window: time.Minute, Ledger: st}
	if leading {
		n.lead(t, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// lead takes the lease (archivebot:leader holds this node's value) and
// tells the client.
func (n *sbNode) lead(t *testing.T, b *redistest.Backend) {
	t.Helper()
	if err := b.Client.Set(context.Background(), store.KeyLeader, n.tok, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n.holds.Store(true)
	n.c.Lead(context.Background())
}

func (n *sbNode) heldCount() int {
	n.c.sb.mu.Lock()
	defer n.c.sb.mu.Unlock()
	return len(n.c.sb.held)
}

// spoke lists what nick said (PRIVMSG, NOTICE) that u saw from pos on.
func spoke(u *irctest.User, pos int, nick string) []string {
	var out []string
	for _, m := range u.Messages(pos) {
		if (m.Command == "PRIVMSG" || m.Command == "NOTICE") && strings.EqualFold(m.Nick(), nick) && len(m.Params) > 1 {
			out = append(out, m.Params[1])
		}
	}
	return out
}

// A hot standby keeps its own connection, joined, under its own nick,
// and says nothing; when the leader stops (its lease runs out) and the
// standby takes the lease, it answers on that same connection the
// command typed while no node could answer, once, and does not run again
// the commands the old leader ran (a job queued, a !status answered),
// though it held them too; it takes the main nick once the old leader
// gives it up.
func TestHotStandbyTakesOverOnItsConnection(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, kind := range irctest.Servers {
			t.Run(kind, func(t *testing.T) { hotStandbyTakesOver(t, b, irctest.StartServer(t, kind)) })
		}
	})
}

// hotStandbyTakesOver is TestHotStandbyTakesOverOnItsConnection on srv:
// on InspIRCd the lines' key is the server's msgid, on ngircd the hash.
func hotStandbyTakesOver(t *testing.T, b *redistest.Backend, srv irctest.Server) {
	{
		const ch = "#hot"
		ranKeys := func() map[string]bool {
			keys, err := b.Client.Keys(context.Background(), store.KeyIRCRan("*")).Result()
			if err != nil {
				t.Fatal(err)
			}
			set := map[string]bool{}
			for _, k := range keys {
				set[k] = true
			}
			return set
		}
		before := ranKeys() // an earlier subtest's, on the same Redis
		u := irctest.Connect(t, srv.Addr(), "vera")
		u.Registered()
		u.Join(ch)

		a := startSBNode(t, b, srv, ch, "node-a", "ABsbA", true)
		sb := startSBNode(t, b, srv, ch, "node-b", "ABsbB", false)
		testproc.Eventually(t, "both bots in the channel", func() bool { return nickJoined(u, "ArchiveBot", ch) && nickJoined(u, "ABsbB", ch) })
		gen := sb.c.gen.Load()
		from := u.Len()

		// The leader answers; the standby holds the same lines.
		if r := strings.Join(u.Ask("ArchiveBot", ch, "!a https://example.com/"+srv.Kind()+"/hot/one"), " "); !strings.Contains(r, "Queued") {
			t.Fatalf("!a: %q", r)
		}
		// (Ask follows each command with "!status zzmarkN" and waits for
		// its answer: four commands.)
		if r := u.Ask("ArchiveBot", ch, "!status"); len(r) == 0 {
			t.Fatal("!status: no answer")
		}
		testproc.Eventually(t, "the standby to hold the four commands", func() bool { return sb.heldCount() == 4 })

		// The leader's lease runs out (frozen, or killed): a command typed
		// now has no one to answer it yet.
		a.holds.Store(false)
		u.Say(ch, "!a https://example.com/"+srv.Kind()+"/hot/two")
		testproc.Eventually(t, "the standby to hold the fifth", func() bool { return sb.heldCount() == 5 })
		beforeLead := u.Len()
		sb.lead(t, b)
		u.Expect("the new leader's answer to the command typed meanwhile", func(m ircmsg.Message) bool {
			return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], "hot/two")
		})
		if sb.c.gen.Load() != gen {
			t.Errorf("the standby answered on a new connection (%d, was %d)", sb.c.gen.Load(), gen)
		}
		// A command after the takeover, from the same user: it runs after
		// every replayed one (one worker per user), so once it is answered
		// nothing replayed is still to come.
		if r := askAny(u, ch, "!a https://example.com/"+srv.Kind()+"/hot/three", "ArchiveBot", "ABsbB"); !strings.Contains(r, "Queued") {
			t.Fatalf("!a after the takeover: %q", r)
		}
		all := append(spoke(u, from, "ArchiveBot"), spoke(u, from, "ABsbB")...)
		for _, want := range []string{"hot/one", "hot/two", "hot/three"} {
			if n := countHas(all, want); n != 1 {
				t.Errorf("%d answers mention %s, want 1 (a command run twice after a takeover?): %q", n, want, all)
			}
		}
		for _, mark := range []string{"zzmark1", "zzmark2"} {
			if n := countHas(all, mark); n != 1 {
				t.Errorf("!status %s answered %d times, want 1: %q", mark, n, all)
			}
		}
		if n := len(spoke(u, 0, "ABsbB")) - len(spoke(u, beforeLead, "ABsbB")); n > 0 {
			t.Errorf("the standby spoke %d times before it led: %q", n, spoke(u, 0, "ABsbB"))
		}

		// The old leader notices it no longer leads: it gives the main
		// nick back, and the new leader takes it at once.
		// (It may have done so already, before Follow: the whole
		// conversation since the takeover is searched.)
		a.c.Follow()
		testproc.Eventually(t, "the new leader to take the main nick", func() bool {
			for _, m := range u.Messages(beforeLead) {
				if m.Command == "NICK" && strings.EqualFold(m.Nick(), "ABsbB") && len(m.Params) > 0 && m.Params[0] == "ArchiveBot" {
					return true
				}
			}
			return false
		})
		if got := spoke(u, 0, "ABsbA"); len(got) > 0 {
			t.Errorf("the old leader spoke after its lease ran out: %q", got)
		}
		prefix := map[string]string{"inspircd": "id:", "ngircd": "h:"}[srv.Kind()]
		var keys []string
		for k := range ranKeys() {
			if before[k] {
				continue
			}
			keys = append(keys, k)
			if !strings.HasPrefix(k, store.KeyIRCRan(prefix)) {
				t.Errorf("on %s the line key %q is not %q…", srv.Kind(), k, prefix)
			}
		}
		if len(keys) < 3 {
			t.Errorf("%d lines recorded as run, want at least 3: %q", len(keys), keys)
		}
	}
}

// nickJoined reports whether u saw nick join channel.
func nickJoined(u *irctest.User, nick, channel string) bool {
	for _, m := range u.Messages(0) {
		if m.Command == "JOIN" && strings.EqualFold(m.Nick(), nick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel) {
			return true
		}
	}
	return false
}

// askAny says text and then "!status zzanyN", and returns what any of
// nicks said in channel until both the marker's answer and an answer
// naming text's last word have come. Right after a takeover the command
// may run from the held commands while the marker runs live, so the two
// answers may come in either order.
func askAny(u *irctest.User, channel, text string, nicks ...string) string {
	marker := "zzany" + text[len(text)-5:]
	fields := strings.Fields(text)
	last := fields[len(fields)-1]
	u.Say(channel, text)
	u.Say(channel, "!status "+marker)
	var out []string
	for marked, answered := false, false; !marked || !answered; {
		m := u.Expect("an answer from "+strings.Join(nicks, " or "), func(m ircmsg.Message) bool {
			if m.Command != "PRIVMSG" || len(m.Params) < 2 || !strings.EqualFold(m.Params[0], channel) {
				return false
			}
			for _, n := range nicks {
				if strings.EqualFold(m.Nick(), n) {
					return true
				}
			}
			return false
		})
		if strings.Contains(m.Params[1], marker) {
			marked = true
			continue
		}
		answered = answered || strings.Contains(m.Params[1], last)
		out = append(out, m.Params[1])
	}
	return strings.Join(out, " ")
}

func countHas(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

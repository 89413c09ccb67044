package main

// Whole-process tests of the hot standby on IRC (ha.irc_standby;
// doc/reliability.md, A hot standby on IRC): two nodes as child
// processes against one Redis (miniredis, or a real redis-server through
// ARCHIVEBOT_TEST_REDIS) and a real ngircd.

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// hotConfig is a node of these tests: lease 2s, handover after 1s.
func hotConfig(t testing.TB, ircURL, ch, redisURL, node string, hot bool) string {
	t.Helper()
	return nodeConfig{ircURL: ircURL, channels: []string{ch}, redisURL: redisURL, extra: fmt.Sprintf(`
[ha]
enabled = true
lease_ttl = "2s"
node_id = %q
irc_standby = %v
irc_handover_after = "1s"
`, node, hot)}.write(t)
}

// realTime makes miniredis's clock follow the wall clock (a killed
// leader's lease must expire); a real Redis needs nothing.
func realTime(t *testing.T, b *redistest.Backend) {
	if b.Mini == nil {
		return
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				b.Mini.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// waitLeaderNick waits until u sees the main nick in channel: a JOIN
// under it, or (a hot node connects under its standby nick and takes the
// main one when it leads) a NICK to it.
func waitLeaderNick(u *irctest.User, channel string) {
	u.Expect(botNick+" in "+channel, func(m ircmsg.Message) bool {
		switch m.Command {
		case "JOIN":
			return strings.EqualFold(m.Nick(), botNick) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel)
		case "NICK":
			return len(m.Params) > 0 && strings.EqualFold(m.Params[0], botNick)
		}
		return false
	})
}

// isStandbyJoin is a JOIN of channel by a hot standby's derived nick.
func isStandbyJoin(channel string) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		return m.Command == "JOIN" && strings.HasPrefix(m.Nick(), botNick+"-sb") && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel)
	}
}

// killToAnswer kills the leader with SIGKILL, types !status (at once
// with a hot standby: no node can answer it yet; without, once the new
// leader is back in the channel, as a user would retry) and returns how
// long until it was answered, checking it was answered once.
func killToAnswer(t *testing.T, leader *child, u *irctest.User, ch, marker string, hot bool) time.Duration {
	t.Helper()
	leader.kill()
	killed := time.Now()
	if !hot {
		u.WaitBotIn(botNick, ch)
	}
	u.Say(ch, "!status "+marker)
	u.Expect("the answer to the command typed after the kill", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], marker)
	})
	took := time.Since(killed)
	// One more command: once it is answered, anything replayed before it
	// was (the same user's commands run in order).
	u.Say(ch, "!status "+marker+"x")
	u.Expect("the answer to the next command", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], marker+"x")
	})
	n := 0
	for _, m := range u.Messages(0) {
		if m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], marker+".") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the command typed after the kill was answered %d times, want once", n)
	}
	return took
}

// With ha.irc_standby the standby is in the channel before the takeover
// under its own nick and says nothing there; after kill -9 of the leader
// it answers, on the connection it already had, the command typed while
// no node could answer, once. The same kill without it is measured in
// the same run for comparison.
func TestE2EHotStandbyTakeover(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		realTime(t, b)
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		var took [2]time.Duration
		for i, hot := range []bool{false, true} {
			ch := fmt.Sprintf("#hot%d", i)
			u := irctest.Connect(t, irc.Addr(), fmt.Sprintf("vera%d", i))
			u.Registered()
			u.Join(ch)
			a := startChild(t, hotConfig(t, irc.URL(), ch, b.URL, fmt.Sprintf("a%d", i), hot))
			a.log.waitFor(t, 0, "took the leader lease")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("node a%d's log:\n%s", i, a.log.tail(400))
				}
			})
			waitLeaderNick(u, ch)
			sb := startChild(t, hotConfig(t, irc.URL(), ch, b.URL, fmt.Sprintf("b%d", i), hot))
			sb.log.waitFor(t, 0, "standby: another node leads")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("node b%d's log:\n%s", i, sb.log.tail(400))
				}
			})
			if hot {
				u.Expect("the standby joining under its own nick", isStandbyJoin(ch))
				sb.log.waitFor(t, 0, "connected to IRC")
				if r := ask(u, ch, "!status"); r == "" {
					t.Fatal("no answer from the leader")
				}
				for _, m := range u.Messages(0) {
					if (m.Command == "PRIVMSG" || m.Command == "NOTICE") && strings.HasPrefix(m.Nick(), botNick+"-sb") {
						t.Errorf("the standby spoke while it did not lead: %v", m.Params)
					}
				}
			}
			from := sb.log.len()
			if strings.Contains(strings.Join(sb.log.all(), "\n"), "took the leader lease") {
				// A stalled machine let the leader's 2s lease lapse: the
				// kill would not be a takeover.
				t.Fatal("the standby took the lease before the leader was killed")
			}
			took[i] = killToAnswer(t, a, u, ch, fmt.Sprintf("zzkill%d", i), hot)
			if hot {
				if n := strings.Count(strings.Join(sb.log.all()[from:], "\n"), "connected to IRC"); n != 0 {
					t.Errorf("the new leader connected to IRC %d times after the kill; want it to answer on the connection it had", n)
				}
			}
			sb.kill()
		}
		t.Logf("kill -9 of the leader (lease_ttl 2s) to the answer of a !status typed at once: %v without ha.irc_standby, %v with it",
			ms(took[0]), ms(took[1]))
	})
}

// cutProxy forwards TCP to addr until cut, which closes every connection
// and refuses new ones (the node on the far side keeps Redis).
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func startCutProxy(t *testing.T, addr string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) URL() string { return "irc://" + p.ln.Addr().String() }

// Cut closes every connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A leader that loses IRC but keeps Redis releases the lease to the
// standby that has IRC (after ha.irc_handover_after), which then answers;
// the old leader does not take it back while it has no IRC.
func TestE2EHotStandbyLeaderWithoutIRCHandsOver(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		realTime(t, b)
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#handover"
		u := irctest.Connect(t, irc.Addr(), "vera")
		u.Registered()
		u.Join(ch)
		proxy := startCutProxy(t, irc.Addr())
		a := startChild(t, hotConfig(t, proxy.URL(), ch, b.URL, "a", true))
		a.log.waitFor(t, 0, "took the leader lease")
		waitLeaderNick(u, ch)
		sb := startChild(t, hotConfig(t, irc.URL(), ch, b.URL, "b", true))
		sb.log.waitFor(t, 0, "standby: another node leads")
		u.Expect("the standby joining under its own nick", isStandbyJoin(ch))

		from := sb.log.len()
		proxy.Cut()
		cut := time.Now()
		a.log.waitFor(t, 0, "handing the leader lease over")
		sb.log.waitFor(t, from, "took the leader lease")
		moved := time.Since(cut)
		u.Say(ch, "!status zzhandover")
		u.Expect("the new leader's answer", func(m ircmsg.Message) bool {
			return m.Command == "PRIVMSG" && len(m.Params) > 1 && strings.Contains(m.Params[1], "zzhandover")
		})
		t.Logf("IRC cut under the leader (handover after 1s, lease_ttl 2s): the standby led %v after the cut", ms(moved))
		// Without IRC, the old leader does not campaign while b has it.
		a.log.waitFor(t, 0, "not campaigning")
	})
}

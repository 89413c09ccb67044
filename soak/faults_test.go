package soak

// Faults. Each runs on the test goroutine, recorded as a window from
// Fault start to Fault end.

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/soak/history"
)

func (s *soak) fault(st step) {
	start := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "start", Target: target})
		s.t.Logf("%s fault %s on %s", time.Now().Format("15:04:05"), st.What, target)
	}
	end := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "end", Target: target})
	}
	switch st.What {
	case "kill-leader":
		l := s.leaderNode()
		if l == nil {
			s.note("kill-leader skipped: no leader")
			return
		}
		// The hardest moment for at-least-once delivery: in the middle
		// of a burst of finish reports. The pipelines pause for 3 s and
		// go on, ending at once the jobs whose time came; the leader
		// dies as the burst's first report reaches the channel (or
		// after 10 s), its other notices taken and not yet said.
		procs := s.pipeProcs()
		for _, p := range procs {
			p.Signal(syscall.SIGSTOP)
		}
		time.Sleep(3 * time.Second)
		drain(s.reportSeen)
		for _, p := range procs {
			p.Signal(syscall.SIGCONT)
		}
		select {
		case <-s.reportSeen:
		case <-time.After(10 * time.Second):
		}
		start(l.name)
		l.current().Kill()
		s.waitLeader(s.otherNode(l).name, 30*time.Second)
		l.start(s.t, s.bin)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
	case "freeze-leader":
		l := s.leaderNode()
		if l == nil {
			s.note("freeze-leader skipped: no leader")
			return
		}
		start(l.name)
		p := l.current()
		p.Signal(syscall.SIGSTOP)
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		p.Signal(syscall.SIGCONT)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
	case "lose-redis-write":
		s.loseRedisWrite(st, start, end)
	case "kill-redis-master":
		addr := s.redis.masterAddr()
		start(addr)
		port, ok := s.redis.killMaster()
		if !ok {
			s.note("kill-redis-master: no process on port %d", port)
		}
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			if a := s.redis.masterAddr(); a != "" && a != addr {
				break
			}
			s.waitUntil(time.Now().Add(250 * time.Millisecond))
		}
		s.redisView(fmt.Sprintf("kill-redis-master of %s: the sentinels moved on", addr))
		if ok {
			s.redis.restartAsReplica(port)
		}
		end(addr)
		go func() {
			time.Sleep(10 * time.Second)
			s.redisView(fmt.Sprintf("kill-redis-master of %s: 10 s after its end", addr))
		}()
	case "pause-pipeline":
		// A pipeline process, or now and then a bridge.
		if len(s.bridges) > 0 && st.Pick < 0.2 {
			b := s.bridges[int(st.Pick/0.2*float64(len(s.bridges)))]
			start(b.name)
			p := b.current()
			p.Signal(syscall.SIGSTOP)
			s.waitUntil(time.Now().Add(st.Dur))
			p.Signal(syscall.SIGCONT)
			end(b.name)
			return
		}
		p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
		start(p.name)
		p.signal(syscall.SIGSTOP)
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "paused"})
		s.waitUntil(time.Now().Add(st.Dur))
		p.signal(syscall.SIGCONT)
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "resumed"})
		end(p.name)
	case "revoke-waiting":
		var api []*pipe
		for _, p := range s.pipes {
			if p.via == viaAPI {
				api = append(api, p)
			}
		}
		if len(api) == 0 {
			return
		}
		p := api[int(st.Pick*float64(len(api)))]
		old := p.key
		start(old)
		out, err := exec.Command(s.bin, "pipeline-key", "-config", s.nodes[0].cfg, "revoke", old).CombinedOutput()
		if err != nil {
			s.note("revoke %s failed: %v: %s", old, err, strings.TrimSpace(string(out)))
		} else {
			s.rec.Add(history.Event{Kind: history.Revoke, Target: old})
		}
		// Its pipeline keeps asking with the revoked key for a while;
		// then the volunteer gets a fresh key and starts again.
		s.waitUntil(time.Now().Add(st.Dur))
		s.killPipe(p, "its key was revoked")
		fresh := fmt.Sprintf("%s-r%d", p.name, p.gen)
		file := s.newKey(fresh, p.uid)
		p.key = fresh
		for i, a := range p.args {
			if a == "-key" {
				p.args[i+1] = file
			}
		}
		end(old)
	case "partition-node-redis":
		// The leader (mostly) or the standby, cut from every Redis
		// server and sentinel for longer than the lease.
		n := s.leaderNode()
		if n == nil || st.Pick >= 0.7 {
			n = s.nodes[int(st.Pick*10)%2]
		}
		var ports []int
		for _, p := range append(append([]*redistest.Proc{s.redis.cl.Master}, s.redis.cl.Replicas...), s.redis.cl.Sentinels...) {
			ports = append(ports, p.Port)
		}
		h := s.net.cut(n.uid, ports)
		if h == 0 {
			s.note("partition-node-redis skipped: no nftables")
			return
		}
		start(n.name)
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		s.net.heal(h)
		s.waitUntil(time.Now().Add(3 * time.Second))
		end(n.name)
	case "partition-pipeline-node":
		// A pipeline cut from where it reaches the node: the API's
		// address, the master's, or its bridge.
		p := s.pipes[int(st.Pick*float64(len(s.pipes)))]
		ports := []int{portOf(s.api), portOf(s.master.addr())}
		for _, b := range s.bridges {
			ports = append(ports, portOf(b.listen))
		}
		h := s.net.cut(p.uid, ports)
		if h == 0 {
			s.note("partition-pipeline-node skipped: no nftables")
			return
		}
		start(p.name)
		s.waitUntil(time.Now().Add(st.Dur))
		s.net.heal(h)
		end(p.name)
	case "partition-leader-irc":
		l := s.leaderNode()
		if l == nil {
			s.note("partition-leader-irc skipped: no leader")
			return
		}
		// Half the time the packets are dropped (the connection
		// hangs, its keepalive outlasts the fault), half the time
		// answered with a reset: the leader's IRC connection breaks and
		// it reconnects when the fault ends (a server restart, a
		// netsplit), while notices keep coming due.
		h, target := 0, l.name
		if st.Pick < 0.5 {
			h = s.net.cut(l.uid, []int{s.ircPort})
		} else {
			h, target = s.net.reset(l.uid, []int{s.ircPort}), l.name+" reset"
		}
		if h == 0 {
			s.note("partition-leader-irc skipped: no nftables")
			return
		}
		start(target)
		s.waitUntil(time.Now().Add(st.Dur + 5*time.Second))
		s.net.heal(h)
		end(target)
	case "clock-skew":
		// One node's clock 30 s ahead of or behind the other's (and
		// Redis's), through its ARCHIVEBOT_CLOCK_OFFSET_FILE
		// (internal/clock): the leader (mostly) or the standby. A node
		// whose clock is off by more than ha.max_clock_skew does not
		// lead (doc/reliability.md): a skewed leader steps down at its
		// next renewal and the other takes over; a skewed standby does
		// not campaign. Then the clock is put right.
		n := s.leaderNode()
		if n == nil || st.Pick >= 0.7 {
			n = s.nodes[int(st.Pick*10)%2]
		}
		d := 30 * time.Second
		if int(st.Pick*100)%2 == 1 {
			d = -d
		}
		target := fmt.Sprintf("%s %+ds", n.name, int(d/time.Second))
		start(target)
		if err := n.skew(d); err != nil {
			s.note("clock-skew: %v", err)
		}
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		if err := n.skew(0); err != nil {
			s.note("clock-skew: %v", err)
		}
		s.waitUntil(time.Now().Add(3 * time.Second))
		end(target)
	case "restart-bridge":
		if len(s.bridges) == 0 {
			return
		}
		b := s.bridges[int(st.Pick*float64(len(s.bridges)))]
		start(b.name)
		if p := b.current(); p != nil {
			p.Term(10 * time.Second)
		}
		s.startBridge(b)
		end(b.name)
	}
}

func (s *soak) waitLeader(name string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if n := s.leaderNode(); n != nil && n.name == name {
			return
		}
		s.waitUntil(time.Now().Add(200 * time.Millisecond))
	}
	s.note("%s did not take the lease within %v", name, within)
}

func (s *soak) waitRole(n *node, role string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if r, _ := readyz(n.web); r == role {
			return
		}
		s.waitUntil(time.Now().Add(200 * time.Millisecond))
	}
	s.note("%s was not %s within %v", n.name, role, within)
}

package soak

// Faults. Each runs on the test goroutine, recorded as a window from
// Fault start to Fault end.

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// runFault injects st's fault and counts it, or records why it could
// not be injected (notInjected).
func (s *soak) runFault(st step) {
	if why := s.fault(st); why != "" {
		s.notInjected(st.What, why)
		return
	}
	s.injected[st.What]++
}

// notInjected records a fault that could not be injected: a Note in the
// history, the test's log, and the run's verdict (notInjectedFailure).
func (s *soak) notInjected(kind, why string) {
	s.skipped[kind] = append(s.skipped[kind], why)
	s.note("fault %s NOT INJECTED: %s", kind, why)
}

// scheduledKinds are the fault kinds a schedule draws, in faultKinds'
// order (then the opt-in ones).
func scheduledKinds(sched []step) []string {
	drawn := map[string]bool{}
	for _, st := range sched {
		drawn[st.What] = true
	}
	var out []string
	for _, k := range append(append([]string(nil), faultKinds...), optInFaults...) {
		if drawn[k] {
			out = append(out, k)
		}
	}
	return out
}

// faultLine names each fault kind the schedule drew with how many times
// it was injected, and each one not injected with why: the first line of
// the run's summary.
func (s *soak) faultLine() string {
	var parts []string
	for _, k := range s.wanted {
		p := fmt.Sprintf("%s %d", k, s.injected[k])
		if why := s.skipped[k]; len(why) > 0 {
			p += fmt.Sprintf(" (NOT INJECTED %d: %s)", len(why), strings.Join(why, "; "))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none (SOAK_FAULTS=none)"
	}
	n := 0
	for _, k := range s.wanted {
		n += s.injected[k]
	}
	return fmt.Sprintf("%d: %s", n, strings.Join(parts, ", "))
}

// notInjectedFailure says which faults could not be injected, or "".
// With CI set the run fails on it: a run that could not inject a fault
// shows nothing about it.
func (s *soak) notInjectedFailure() string {
	var bad []string
	for _, k := range s.wanted {
		if n := len(s.skipped[k]); n > 0 {
			bad = append(bad, fmt.Sprintf("%s %d of %d", k, n, n+s.injected[k]))
		} else if s.injected[k] == 0 {
			bad = append(bad, k+" never injected")
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "faults not injected: " + strings.Join(bad, ", ")
}

// awaitLeader is the leader, waiting up to 30 s for one (a fault can
// follow one that left no node leading for a while).
func (s *soak) awaitLeader() *node {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := s.leaderNode(); l != nil || time.Now().After(deadline) {
			return l
		}
		s.waitUntil(time.Now().Add(250 * time.Millisecond))
	}
}

// fault injects st's fault, recorded as a window, and returns "", or why
// it could not be injected.
func (s *soak) fault(st step) string {
	start := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "start", Target: target})
		s.t.Logf("%s fault %s on %s", time.Now().Format("15:04:05"), st.What, target)
	}
	end := func(target string) {
		s.rec.Add(history.Event{Kind: history.Fault, Fault: st.What, Outcome: "end", Target: target})
	}
	switch st.What {
	case "kill-leader":
		l := s.awaitLeader()
		if l == nil {
			return "no node led for 30 s"
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
		p := l.current()
		if p == nil || !p.Running() {
			end(l.name)
			return l.name + " was not running"
		}
		p.Kill()
		s.waitLeader(s.otherNode(l).name, 30*time.Second)
		l.start(s.t, s.bin)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
	case "freeze-leader":
		l := s.awaitLeader()
		if l == nil {
			return "no node led for 30 s"
		}
		start(l.name)
		p := l.current()
		if p == nil {
			end(l.name)
			return l.name + " was not running"
		}
		if err := p.Freeze(); err != nil {
			p.Signal(syscall.SIGCONT)
			end(l.name)
			return fmt.Sprintf("%s would not stop: %v", l.name, err)
		}
		// The frozen leader holds a command (hold_test.go): typed now,
		// before its lease expires, read when it wakes past it.
		wake := time.Now().Add(leaseTTL + st.Dur)
		answered := s.holdCommand(s.prober, l.name, time.Until(wake)+replyWait)
		s.waitUntil(wake)
		p.Signal(syscall.SIGCONT)
		s.waitRole(l, "standby", 30*time.Second)
		end(l.name)
		<-answered
	case "lose-redis-write":
		return s.loseRedisWrite(st, start, end)
	case "kill-redis-master":
		addr := s.redis.masterAddr()
		start(addr)
		port, ok := s.redis.killMaster()
		if !ok {
			end(addr)
			return fmt.Sprintf("no process of the soak's on the master's port %d (master %q)", port, addr)
		}
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			if a := s.redis.masterAddr(); a != "" && a != addr {
				break
			}
			s.waitUntil(time.Now().Add(250 * time.Millisecond))
		}
		s.redisView(fmt.Sprintf("kill-redis-master of %s: the sentinels moved on", addr))
		s.redis.restartAsReplica(port)
		end(addr)
		go func() {
			time.Sleep(10 * time.Second)
			s.redisView(fmt.Sprintf("kill-redis-master of %s: 10 s after its end", addr))
		}()
	case "pause-pipeline":
		// A pipeline process, or now and then a bridge.
		if len(s.bridges) > 0 && st.Pick < 0.2 {
			b := s.bridges[int(st.Pick/0.2*float64(len(s.bridges)))]
			p := b.current()
			if p == nil || !p.Running() {
				return b.name + " was not running"
			}
			start(b.name)
			if err := p.Freeze(); err != nil {
				p.Signal(syscall.SIGCONT)
				end(b.name)
				return fmt.Sprintf("%s would not stop: %v", b.name, err)
			}
			s.waitUntil(time.Now().Add(st.Dur))
			p.Signal(syscall.SIGCONT)
			end(b.name)
			return ""
		}
		// The pipeline picked, or the next one running (one may be
		// between a death and its restart).
		var p *pipe
		var proc interface{ Freeze() error }
		for i := range s.pipes {
			c := s.pipes[(int(st.Pick*float64(len(s.pipes)))+i)%len(s.pipes)]
			c.mu.Lock()
			if c.proc != nil && !c.dead && c.proc.Running() {
				p, proc = c, c.proc
			}
			c.mu.Unlock()
			if p != nil {
				break
			}
		}
		if p == nil {
			return "no pipeline was running"
		}
		start(p.name)
		p.frozen(true)
		if err := proc.Freeze(); err != nil {
			p.signal(syscall.SIGCONT)
			end(p.name)
			return fmt.Sprintf("%s would not stop: %v", p.name, err)
		}
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "paused"})
		s.waitUntil(time.Now().Add(st.Dur))
		p.signal(syscall.SIGCONT)
		s.rec.Add(history.Event{Kind: history.Pipe, Actor: p.name, Via: p.via, Outcome: "resumed"})
		end(p.name)
	case "revoke-waiting":
		return s.revokeWaiting(st, start, end)
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
			return "no nftables rule (" + s.net.why() + ")"
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
			return "no nftables rule (" + s.net.why() + ")"
		}
		start(p.name)
		s.waitUntil(time.Now().Add(st.Dur))
		s.net.heal(h)
		end(p.name)
	case "partition-leader-irc":
		l := s.awaitLeader()
		if l == nil {
			return "no node led for 30 s"
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
			return "no nftables rule (" + s.net.why() + ")"
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
		if err := n.skew(d); err != nil {
			return fmt.Sprintf("cannot set %s's clock: %v", n.name, err)
		}
		start(target)
		s.waitUntil(time.Now().Add(leaseTTL + st.Dur))
		if err := n.skew(0); err != nil {
			s.note("clock-skew: %v", err)
		}
		s.waitUntil(time.Now().Add(3 * time.Second))
		end(target)
	case "restart-bridge":
		if len(s.bridges) == 0 {
			return "no bridge"
		}
		b := s.bridges[int(st.Pick*float64(len(s.bridges)))]
		start(b.name)
		if p := b.current(); p != nil {
			p.Term(10 * time.Second)
		}
		s.startBridge(b)
		end(b.name)
	default:
		return "unknown fault"
	}
	return ""
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

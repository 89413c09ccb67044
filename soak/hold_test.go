package soak

// The command a frozen leader holds. Right after the freeze-leader fault
// stops the leader, the prober types an !a of a fresh URL in the
// channel: the IRC server hands the line to every member, and in the
// frozen node's socket it waits, unread, while the lease expires and the
// other node takes over. That node never sees it (it joins the channel
// after it takes the lease, and IRC does not replay); the frozen one reads
// it when it wakes, past its lease, and must not register it: every write
// of a user command is fenced (doc/architecture.md, High availability).
// The checker holds the job's "queued" entry in Redis, if there is one,
// against the change of leader (invariant 5, soak/check/judge_fence.go),
// and counts the held commands and how many were registered.
//
// What the prober is told is recorded as any command's answer: it waits
// until replyWait after the wake for it. The woken node refuses the
// command ("Sorry, …", a refusal the checker reads as nothing changed),
// or drops it as it steps down (a timeout); the reply's latency is judged
// with the fault's (its send is inside the fault's window).

import (
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/soak/history"
)

// heldURL is the URL of the n-th held !a of a run with seed seed: a
// fresh one (no user sends it, no other freeze).
func heldURL(seed uint64, n int) string {
	return fmt.Sprintf("https://soak.example/held/%d/%d", seed, n)
}

// holdCommand types, as u, an !a of a fresh URL at once, recorded as a
// Send with Fault "freeze-leader" and Target the frozen node, and returns
// a channel closed once its answer came or wait ran out (the Reply). The
// line is in the channel when holdCommand returns: call it right after
// the freeze, and wait for the channel before u's next command. u is the
// prober: it is used by the test goroutine alone, and the fault waits
// for the answer before the next step (a quiet point) uses it.
func (s *soak) holdCommand(u *irctest.User, frozen string, wait time.Duration) <-chan struct{} {
	s.held++
	url := heldURL(s.seed, s.held)
	text := "!a " + url
	ident := s.jobs.sent(url)
	id, sent := s.send(u, text, history.Event{Fault: "freeze-leader", Target: frozen})
	s.t.Logf("%s %s, frozen, holds %s (%s)", time.Now().Format("15:04:05"), frozen, text, ident)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, ok := s.awaitReply(u, id, sent, wait)
		if ok && strings.HasPrefix(r, "Queued ") && ident != "" {
			s.jobs.ack(ident)
		}
	}()
	return done
}

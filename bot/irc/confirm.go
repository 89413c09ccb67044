package irc

// Confirmed delivery. A line written to the socket has reached the
// kernel, not the server: a TCP reset discards what the server had not
// read yet, and the line is gone although the write succeeded. A report
// the node acknowledges in Redis (a finish report, an admin notice) is
// acknowledged only once the server has answered a PING sent after its
// lines: the server reads a connection in order, so its PONG says it
// read every line before the PING. A connection that ends first fails
// the delivery, and the report is delivered again (at least once;
// doc/reliability.md).

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// confirmPrefix marks our PINGs' tokens (ircevent's keepalive PINGs have
// a prefix of their own).
const confirmPrefix = "abconfirm-"

// confirmer is one connection's PING/PONG confirmations. At most one PING
// is in flight: callers that arrive while one is get the next one, sent
// when it is answered, so a burst of reports costs about one PING per
// round trip, not one each.
type confirmer struct {
	send func(line string) error // writes a raw line on the connection

	mu       sync.Mutex
	sent     uint64 // PINGs sent, numbered from 1
	answered uint64 // the highest PING answered
	wanted   uint64 // the highest PING a caller waits for
	gone     bool
	wake     chan struct{} // closed and replaced on every answer and at the end
	// waiting counts the callers in confirm past their PING, and looks
	// their checks of the answer (tests wait on them, not on time).
	waiting, looks int
}

func newConfirmer(send func(string) error) *confirmer {
	return &confirmer{send: send, wake: make(chan struct{})}
}

// confirm returns nil once the server has answered a PING sent after
// confirm was called, errConnLost when the connection ends (or the
// answer takes longer than timeout) first, or ctx's error.
func (c *confirmer) confirm(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		return errConnLost
	}
	// The PING in flight (sent ≤ c.sent) may have gone out before the
	// caller's lines: wait for the next one.
	target := c.sent + 1
	c.wanted = max(c.wanted, target)
	line := c.nextPingLocked()
	c.mu.Unlock()
	c.ping(line)
	c.mu.Lock()
	c.waiting++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
	}()

	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		c.mu.Lock()
		ok, gone, wake := c.answered >= target, c.gone, c.wake
		c.looks++
		c.mu.Unlock()
		switch {
		case ok:
			return nil
		case gone:
			return errConnLost
		}
		select {
		case <-wake:
		case <-t.C:
			return errConnLost
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// counts returns how many callers wait and how many times they looked
// at the answers so far.
func (c *confirmer) counts() (waiting, looks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting, c.looks
}

// nextPingLocked numbers the next PING when none is in flight and a
// caller waits for one not sent yet, and returns its line ("" when none
// is due). c.mu is held; the caller sends it after unlocking (a send can
// block until the connection ends, and the end takes c.mu). Only one is
// in flight, so PINGs leave in order.
func (c *confirmer) nextPingLocked() string {
	if c.gone || c.answered < c.sent || c.wanted <= c.sent {
		return ""
	}
	c.sent++
	return "PING :" + confirmPrefix + strconv.FormatUint(c.sent, 10)
}

// ping sends line when there is one; a failed send ends the confirmer.
func (c *confirmer) ping(line string) {
	if line == "" {
		return
	}
	if err := c.send(line); err != nil {
		c.end()
	}
}

// pong takes a PONG's last parameter; tokens not ours are ignored.
func (c *confirmer) pong(token string) {
	n, err := strconv.ParseUint(strings.TrimPrefix(token, confirmPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(token, confirmPrefix) {
		return
	}
	c.mu.Lock()
	if n <= c.answered || n > c.sent {
		c.mu.Unlock()
		return
	}
	c.answered = n
	close(c.wake)
	c.wake = make(chan struct{})
	line := c.nextPingLocked()
	c.mu.Unlock()
	c.ping(line)
}

// end fails every waiter: the connection is gone.
func (c *confirmer) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked()
}

func (c *confirmer) endLocked() {
	if c.gone {
		return
	}
	c.gone = true
	close(c.wake)
	c.wake = make(chan struct{})
}

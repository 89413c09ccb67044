package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// subscriber is a connection in subscribed mode: the wpull process's
// settings listener, subscribed to archivebot:job:IDENT. It is the
// bridge's own loop on the detached connection (rather than
// redcon.PubSub) so that every SUBSCRIBE is checked, not only the first.
//
// Everything written to it goes through out, a queue of at most
// Limits.SubscriberQueue frames written by the subscriber's own writer
// (each write bounded by Limits.WriteTimeout): publishing never waits
// for a client, and one that stops reading is closed when its queue is
// full, as Redis's client-output-buffer-limit pubsub does.
type subscriber struct {
	mu    sync.Mutex
	dc    redcon.DetachedConn
	chans map[string]bool
	done  bool
	out   chan []byte
	quit  chan struct{}
}

// newSubscriber starts the writer of a detached connection; nil when the
// bridge is closing (dc is closed then).
func (b *Bridge) newSubscriber(dc redcon.DetachedConn) *subscriber {
	s := &subscriber{dc: dc, chans: map[string]bool{}, out: make(chan []byte, b.lim.SubscriberQueue), quit: make(chan struct{})}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		s.close()
		return nil
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go b.subscriberWriter(s)
	return s
}

// send queues frame for s; a subscriber whose queue is full is closed.
func (b *Bridge) send(s *subscriber, frame []byte) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	select {
	case s.out <- frame:
		s.mu.Unlock()
		return
	default:
	}
	s.mu.Unlock()
	b.count("subscriber_overflow", 1)
	b.logLimited("subscriber_overflow", "bridge: a subscriber stopped reading; closed (its queue of messages is full)",
		"queue", b.lim.SubscriberQueue)
	s.close()
}

// subscriberWriter writes s's queue until s closes.
func (b *Bridge) subscriberWriter(s *subscriber) {
	defer b.wg.Done()
	defer s.close()
	b.guardConn("subscriber writer", "", nil, func() {
		for {
			select {
			case f := <-s.out:
				s.dc.WriteRaw(f)
				for more := true; more; {
					select {
					case f := <-s.out:
						s.dc.WriteRaw(f)
					default:
						more = false
					}
				}
				if err := s.dc.Flush(); err != nil {
					return
				}
			case <-s.quit:
				// Ended by its reader (QUIT, or the client went): what is
				// queued still goes, within the write deadline.
				for more := true; more; {
					select {
					case f := <-s.out:
						s.dc.WriteRaw(f)
					default:
						more = false
					}
				}
				s.dc.Flush()
				return
			}
		}
	})
}

// close closes the subscriber's connection now.
func (s *subscriber) close() { s.end(true) }

// end stops the subscriber; with now false its writer sends what is
// queued first, then closes the connection.
func (s *subscriber) end(now bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		close(s.quit)
	}
	if now {
		s.dc.Close()
	}
}

func frame3(kind, ch string, n int) []byte {
	f := redcon.AppendArray(nil, 3)
	f = redcon.AppendBulkString(f, kind)
	f = redcon.AppendBulkString(f, ch)
	return redcon.AppendInt(f, int64(n))
}

// jobChannel checks that channel is the settings channel of a job the
// pipeline holds: the error to answer, or "".
func (b *Bridge) jobChannel(channel string) string {
	ident, ok := strings.CutPrefix(channel, channelJobPrefix)
	if !ok {
		return fmt.Sprintf("ERR 'SUBSCRIBE' is refused by the ArchiveBot bridge: only the settings channel (%sIDENT) of a job the pipeline holds", channelJobPrefix)
	}
	if _, reply := b.held(ident); reply != "" {
		return reply
	}
	return ""
}

// subscribe: SUBSCRIBE archivebot:job:IDENT [...]. The connection leaves
// the command loop and gets the job's settings ages from the control
// stream.
func (b *Bridge) subscribe(c redcon.Conn, args []string) {
	if len(args) == 0 {
		wrongArgs(c, "subscribe")
		return
	}
	for _, ch := range args {
		if e := b.jobChannel(ch); e != "" {
			b.count("refused:subscribe", 1)
			b.logLimited("refused:subscribe", "bridge: command refused", "command", "subscribe", "channel", oneLine(ch))
			c.WriteError(e)
			return
		}
	}
	s := b.newSubscriber(c.Detach())
	if s == nil {
		return
	}
	b.addSubs(s, args)
	go b.subscriberLoop(s)
}

func (b *Bridge) addSubs(s *subscriber, chans []string) {
	for _, ch := range chans {
		b.mu.Lock()
		if b.subs[ch] == nil {
			b.subs[ch] = map[*subscriber]struct{}{}
		}
		b.subs[ch][s] = struct{}{}
		s.mu.Lock()
		s.chans[ch] = true
		n := len(s.chans)
		s.mu.Unlock()
		b.mu.Unlock()
		b.send(s, frame3("subscribe", ch, n))
	}
}

func (b *Bridge) dropSub(s *subscriber, ch string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs[ch], s)
	if len(b.subs[ch]) == 0 {
		delete(b.subs, ch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chans, ch)
	return len(s.chans)
}

func (b *Bridge) subscriberLoop(s *subscriber) {
	defer func() {
		if nc := s.dc.NetConn(); nc != nil {
			b.untrack(nc)
		}
		s.mu.Lock()
		chans := make([]string, 0, len(s.chans))
		for ch := range s.chans {
			chans = append(chans, ch)
		}
		s.mu.Unlock()
		for _, ch := range chans {
			b.dropSub(s, ch)
		}
		s.end(false)
	}()
	b.guardConn("subscriber", "", nil, func() {
		for {
			cmd, err := s.dc.ReadCommand()
			if err != nil || len(cmd.Args) == 0 {
				return
			}
			name := strings.ToLower(string(cmd.Args[0]))
			args := make([]string, len(cmd.Args)-1)
			for i, a := range cmd.Args[1:] {
				args[i] = string(a)
			}
			switch name {
			case "subscribe":
				ok := len(args) > 0
				for _, ch := range args {
					if e := b.jobChannel(ch); e != "" {
						b.count("refused:subscribe", 1)
						b.send(s, redcon.AppendError(nil, e))
						ok = false
						break
					}
				}
				if ok {
					b.addSubs(s, args)
				} else if len(args) == 0 {
					b.send(s, redcon.AppendError(nil, "ERR wrong number of arguments for 'subscribe' command"))
				}
			case "unsubscribe":
				if len(args) == 0 {
					s.mu.Lock()
					for ch := range s.chans {
						args = append(args, ch)
					}
					s.mu.Unlock()
				}
				for _, ch := range args {
					b.send(s, frame3("unsubscribe", ch, b.dropSub(s, ch)))
				}
			case "ping":
				msg := ""
				if len(args) > 0 {
					msg = args[0]
				}
				f := redcon.AppendArray(nil, 2)
				f = redcon.AppendBulkString(f, "pong")
				b.send(s, redcon.AppendBulkString(f, msg))
			case "quit":
				b.send(s, redcon.AppendString(nil, "OK"))
				// The writer sends what is queued before it sees the close.
				return
			default:
				b.countRefused(name, "subscribed mode")
				b.send(s, redcon.AppendError(nil, fmt.Sprintf("ERR '%s' is refused by the ArchiveBot bridge: only SUBSCRIBE / UNSUBSCRIBE / PING / QUIT in subscribed mode", strings.ToUpper(oneLine(name)))))
			}
		}
	})
}

// publish sends msg to the subscribers of channel.
func (b *Bridge) publish(channel, msg string) int {
	b.mu.Lock()
	subs := make([]*subscriber, 0, len(b.subs[channel]))
	for s := range b.subs[channel] {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	f := redcon.AppendArray(nil, 3)
	f = redcon.AppendBulkString(f, "message")
	f = redcon.AppendBulkString(f, channel)
	f = redcon.AppendBulkString(f, msg)
	for _, s := range subs {
		b.send(s, f)
	}
	return len(subs)
}

// controlLoop keeps the control stream open and turns its events into
// what a pipeline sees in Redis: a settings change is the new
// settings_age published on archivebot:job:IDENT (the record read after
// it is fresh), a released job is answered "released" from then on.
func (b *Bridge) controlLoop() {
	defer b.wg.Done()
	for b.ctx.Err() == nil {
		err := b.node.Control(b.ctx, b.onControlSafe)
		// Events may be missed until the stream is open again: no cached
		// record answers meanwhile.
		b.dropCache()
		if b.ctx.Err() != nil {
			return
		}
		wait := b.ctlRetry
		var e *client.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		b.log.Info("bridge: control stream closed; reopening", "err", err, "in", wait)
		if !retry.Sleep(b.ctx, wait) {
			return
		}
	}
}

// dropCache forgets every cached job record: the reads that follow ask
// the node.
func (b *Bridge) dropCache() {
	b.mu.Lock()
	for _, js := range b.jobs {
		js.rec = nil
	}
	b.mu.Unlock()
}

// onControlSafe is onControl; a panic in it ends the stream (which is
// then reopened), not the bridge.
func (b *Bridge) onControlSafe(ev client.Event) (err error) {
	run.GuardThen(b.log, "bridge control event "+ev.Name, func() { err = b.onControl(ev) }, func(v any) {
		b.count("panic", 1)
		err = fmt.Errorf("panic: %v", v)
	})
	return err
}

func (b *Bridge) onControl(ev client.Event) error {
	switch ev.Name {
	case wire.EventSettings:
		s, err := ev.Settings()
		if err != nil || s.Ident == "" {
			b.log.Warn("bridge: control event not understood", "event", ev.Name, "err", err)
			return nil
		}
		b.mu.Lock()
		if js := b.jobs[s.Ident]; js != nil {
			js.rec = nil
			js.age = max(js.age, s.Age)
		}
		b.mu.Unlock()
		b.publish(channelJobPrefix+s.Ident, strconv.FormatInt(s.Age, 10))
	case wire.EventReleased:
		var r wire.Released
		if err := json.Unmarshal(ev.Data, &r); err != nil || r.Ident == "" {
			return nil
		}
		b.mu.Lock()
		if js := b.jobs[r.Ident]; js != nil && js.last != nil && (strings.HasPrefix(r.Reason, wire.ReleasedRerouted) || strings.HasPrefix(r.Reason, wire.ReleasedLost)) {
			// Rerouted: the pipeline is made to abort it (drain).
			js.drain, js.ended, js.rec = true, "", nil
			js.age++
			age := js.age
			b.mu.Unlock()
			b.log.Warn("bridge: the node rerouted a job; the pipeline is told to abort it", "ident", r.Ident, "reason", r.Reason)
			b.publish(channelJobPrefix+r.Ident, strconv.FormatInt(age, 10))
			return nil
		}
		if js := b.jobs[r.Ident]; js != nil {
			js.ended = "released by the node: " + oneLine(r.Reason)
		} else {
			b.jobs[r.Ident] = &jobState{ident: r.Ident, ended: "released by the node: " + oneLine(r.Reason), counter: map[string]int64{}}
		}
		b.mu.Unlock()
		b.log.Warn("bridge: the node released a job", "ident", r.Ident, "reason", r.Reason)
	case wire.EventBye:
		// The key revoked, the node stopping: what was read before may
		// no longer be what the node would answer.
		b.dropCache()
		var e wire.Error
		if json.Unmarshal(ev.Data, &e) == nil && e.Error == "revoked_key" {
			b.log.Error("bridge: the node revoked this pipeline's key; every request is refused from now on", "reason", oneLine(e.Reason))
			break
		}
		b.log.Warn("bridge: the node closed the control stream", "data", oneLine(string(ev.Data)))
	}
	return nil
}

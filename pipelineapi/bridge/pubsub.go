package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// subscriber is a connection in subscribed mode: the wpull process's
// settings listener, subscribed to archivebot:job:IDENT. It is the
// bridge's own loop on redcon's detached connection (rather than
// redcon.PubSub) so that every SUBSCRIBE is checked, not only the first.
type subscriber struct {
	mu    sync.Mutex
	dc    redcon.DetachedConn
	chans map[string]bool
	done  bool
}

func (s *subscriber) write(f func(redcon.DetachedConn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	f(s.dc)
	s.dc.Flush()
}

func (s *subscriber) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		s.dc.Close()
	}
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
			b.log.Warn("bridge: command refused", "command", "subscribe", "channel", ch)
			c.WriteError(e)
			return
		}
	}
	s := &subscriber{dc: c.Detach(), chans: map[string]bool{}}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		s.close()
		return
	}
	b.mu.Unlock()
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
		s.write(func(dc redcon.DetachedConn) {
			dc.WriteArray(3)
			dc.WriteBulkString("subscribe")
			dc.WriteBulkString(ch)
			dc.WriteInt(n)
		})
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
		s.mu.Lock()
		chans := make([]string, 0, len(s.chans))
		for ch := range s.chans {
			chans = append(chans, ch)
		}
		s.mu.Unlock()
		for _, ch := range chans {
			b.dropSub(s, ch)
		}
		s.close()
	}()
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
					s.write(func(dc redcon.DetachedConn) { dc.WriteError(e) })
					ok = false
					break
				}
			}
			if ok {
				b.addSubs(s, args)
			} else if len(args) == 0 {
				s.write(func(dc redcon.DetachedConn) { dc.WriteError("ERR wrong number of arguments for 'subscribe' command") })
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
				n := b.dropSub(s, ch)
				s.write(func(dc redcon.DetachedConn) {
					dc.WriteArray(3)
					dc.WriteBulkString("unsubscribe")
					dc.WriteBulkString(ch)
					dc.WriteInt(n)
				})
			}
		case "ping":
			msg := ""
			if len(args) > 0 {
				msg = args[0]
			}
			s.write(func(dc redcon.DetachedConn) {
				dc.WriteArray(2)
				dc.WriteBulkString("pong")
				dc.WriteBulkString(msg)
			})
		case "quit":
			s.write(func(dc redcon.DetachedConn) { dc.WriteString("OK") })
			return
		default:
			b.count("refused:"+name, 1)
			b.log.Warn("bridge: command refused", "command", name, "why", "subscribed mode")
			s.write(func(dc redcon.DetachedConn) {
				dc.WriteError(fmt.Sprintf("ERR '%s' is refused by the ArchiveBot bridge: only SUBSCRIBE / UNSUBSCRIBE / PING / QUIT in subscribed mode", strings.ToUpper(name)))
			})
		}
	}
}

// publish sends msg to the subscribers of channel.
func (b *Bridge) publish(channel, msg string) int {
	b.mu.Lock()
	subs := make([]*subscriber, 0, len(b.subs[channel]))
	for s := range b.subs[channel] {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.write(func(dc redcon.DetachedConn) {
			dc.WriteArray(3)
			dc.WriteBulkString("message")
			dc.WriteBulkString(channel)
			dc.WriteBulkString(msg)
		})
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
		err := b.node.Control(b.ctx, b.onControl)
		b.mu.Lock()
		b.ctlUp = false
		b.mu.Unlock()
		if b.ctx.Err() != nil {
			return
		}
		wait := b.ctlRetry
		var e *client.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		b.log.Info("bridge: control stream closed; reopening", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-b.ctx.Done():
			return
		}
	}
}

func (b *Bridge) onControl(ev client.Event) error {
	b.mu.Lock()
	b.ctlUp = true
	b.mu.Unlock()
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
		if js := b.jobs[r.Ident]; js != nil {
			js.ended = "released by the node: " + oneLine(r.Reason)
		} else {
			b.jobs[r.Ident] = &jobState{ident: r.Ident, ended: "released by the node: " + oneLine(r.Reason), counter: map[string]int64{}}
		}
		b.mu.Unlock()
		b.log.Warn("bridge: the node released a job", "ident", r.Ident, "reason", r.Reason)
	case wire.EventBye:
		b.log.Warn("bridge: the node closed the control stream", "data", string(ev.Data))
	}
	return nil
}

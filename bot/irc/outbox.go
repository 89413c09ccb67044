package irc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"golang.org/x/time/rate"
)

// Errors an outbox line can end with.
var (
	errNotConnected = errors.New("irc: not connected")
	errConnLost     = errors.New("irc: connection lost before the line was written")
	errExpired      = errors.New("irc: line waited too long for a connection")
	errShutdown     = errors.New("irc: shutting down")
	errCancelled    = errors.New("irc: line cancelled")
)

// lineWriter is one live connection as the outbox sees it: write returns
// once line (CRLF included) was written to the socket, or with the reason
// it was not; confirm returns once the server has read every line
// written before it was called (confirm.go), or with the reason that is
// unknown.
type lineWriter interface {
	write(ctx context.Context, line []byte) error
	confirm(ctx context.Context) error
}

// Item states. An item goes queued → sending → done, or queued → done when
// it is cancelled, expires or belongs to a connection that is gone.
const (
	itemQueued int32 = iota
	itemSending
	itemDone
)

// batchTag marks the lines of one send. It is not zero-sized: pointers
// to distinct zero-size values may compare equal, and every batch would
// be one.
type batchTag struct{ _ byte }

// item is one line waiting in the outbox.
type item struct {
	line []byte
	key  string // fairness key: one queue per user or per announcer
	// gen binds the line to one connection (JOINs, announcements): if
	// that connection is gone it fails instead of going out on the next.
	// 0 means any connection.
	gen     uint64
	expires time.Time // zero: never
	// batch is shared by the lines of one send of several lines: when
	// one fails, the rest of its batch is withdrawn before the sender
	// can pick the next, so what went out is always a first part.
	batch *batchTag
	state atomic.Int32
	done  chan error // receives exactly one result
}

func (it *item) finish(err error) {
	it.state.Store(itemDone)
	it.done <- err
}

// cancel withdraws a queued item. It reports false when the item is being
// sent or already done: its result will arrive on done.
func (it *item) cancel() bool {
	if it.state.CompareAndSwap(itemQueued, itemDone) {
		it.done <- errCancelled
		return true
	}
	return false
}

// outbox is the one way lines leave the bot. A token bucket spaces them
// (messages_per_second, burst); when it is empty lines wait, they are
// never dropped for being too many. Lines are served round-robin by key
// (one key per user, one per announcing service), so one user's long
// answers cannot starve everyone else; control lines (JOIN, NAMES, NICK)
// go first. Every line reports its own completion: nil only once it was
// written to the socket.
type outbox struct {
	limiter *rate.Limiter
	now     func() time.Time

	mu      sync.Mutex
	wake    chan struct{} // closed and replaced whenever there is news
	control []*item
	queues  map[string][]*item
	ring    []string // keys with queued items, in service order
	link    lineWriter
	gen     uint64
	closed  bool
	// inflight is set while a picked line is being written, so flush
	// does not report an empty outbox before the last line is out.
	inflight bool

	sent atomic.Int64 // lines written, for tests and logs
}

func newOutbox(perSecond float64, burst int) *outbox {
	if burst < 1 {
		burst = 1
	}
	lim := rate.Limit(perSecond)
	if perSecond <= 0 {
		lim = rate.Inf
	}
	return &outbox{
		limiter: rate.NewLimiter(lim, burst),
		now:     time.Now,
		wake:    make(chan struct{}),
		queues:  map[string][]*item{},
	}
}

// notify wakes the sender loop; call with mu held.
func (o *outbox) notify() {
	close(o.wake)
	o.wake = make(chan struct{})
}

// setLink makes w the connection lines go out on, as generation gen.
func (o *outbox) setLink(w lineWriter, gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.link, o.gen = w, gen
	o.notify()
}

// dropLink forgets connection gen and fails the lines bound to it.
func (o *outbox) dropLink(gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gen == gen {
		o.link = nil
	}
	o.failWhere(func(it *item) bool { return it.gen != 0 && it.gen <= gen }, errConnLost)
	o.notify()
}

// confirm waits until connection gen's server has read every line
// written on it so far (lineWriter.confirm); errConnLost when gen is no
// longer the connection.
func (o *outbox) confirm(ctx context.Context, gen uint64) error {
	o.mu.Lock()
	w := o.link
	if o.gen != gen {
		w = nil
	}
	o.mu.Unlock()
	if w == nil {
		return errConnLost
	}
	return w.confirm(ctx)
}

// connected reports whether a connection is up, and its generation.
func (o *outbox) connected() (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen, o.link != nil
}

// enqueue adds it; it never blocks. Control items go before all others.
func (o *outbox) enqueue(it *item, control bool) {
	o.enqueueAll([]*item{it}, control)
}

// enqueueAll adds items in one step, so the sender cannot pick and fail
// one of a batch before the rest are queued: failing it withdraws them
// all (item.batch), and a later line of a send that failed never goes
// out after the failure. It never blocks.
func (o *outbox) enqueueAll(items []*item, control bool) {
	for _, it := range items {
		it.done = make(chan error, 1)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range items {
		if o.closed {
			it.finish(errShutdown)
			continue
		}
		if it.gen != 0 && (o.link == nil || it.gen != o.gen) {
			it.finish(errNotConnected)
			continue
		}
		if control {
			o.control = append(o.control, it)
		} else {
			if len(o.queues[it.key]) == 0 {
				o.ring = append(o.ring, it.key)
			}
			o.queues[it.key] = append(o.queues[it.key], it)
		}
		metrics.OutboxQueued(1)
	}
	o.notify()
}

// failWhere finishes every queued item matching pred; mu held.
func (o *outbox) failWhere(pred func(*item) bool, err error) {
	keep := o.control[:0]
	for _, it := range o.control {
		if pred(it) {
			if it.state.CompareAndSwap(itemQueued, itemDone) {
				it.done <- err
			}
			continue
		}
		keep = append(keep, it)
	}
	o.control = keep
	for key, q := range o.queues {
		kept := q[:0]
		for _, it := range q {
			if pred(it) {
				if it.state.CompareAndSwap(itemQueued, itemDone) {
					it.done <- err
				}
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) == 0 {
			delete(o.queues, key)
		} else {
			o.queues[key] = kept
		}
	}
	ring := o.ring[:0]
	for _, k := range o.ring {
		if len(o.queues[k]) > 0 {
			ring = append(ring, k)
		}
	}
	o.ring = ring
}

// pending counts queued items.
func (o *outbox) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.control)
	for _, q := range o.queues {
		n += len(q)
	}
	return n
}

// ready reports whether a line could go out now; mu held.
func (o *outbox) ready() bool {
	return o.link != nil && (len(o.control) > 0 || len(o.ring) > 0)
}

// pick takes the next live item and marks it sending, skipping (and
// failing) cancelled and stale ones; mu held. nil when none. A line past
// its expiry is still sent: it waited behind other lines, not for a
// connection (expire drops those).
func (o *outbox) pick() *item {
	for {
		var it *item
		switch {
		case len(o.control) > 0:
			it = o.control[0]
			o.control = o.control[1:]
		case len(o.ring) > 0:
			key := o.ring[0]
			q := o.queues[key]
			it = q[0]
			if len(q) == 1 {
				delete(o.queues, key)
				o.ring = o.ring[1:]
			} else {
				o.queues[key] = q[1:]
				// Round robin: this key goes to the back of the line.
				o.ring = append(o.ring[1:], key)
			}
		default:
			return nil
		}
		switch {
		case it.gen != 0 && it.gen != o.gen:
			if it.state.CompareAndSwap(itemQueued, itemDone) {
				it.done <- errConnLost
			}
		case it.state.CompareAndSwap(itemQueued, itemSending):
			o.inflight = true
			return it
		}
	}
}

// run sends lines until ctx ends, then fails whatever is left.
func (o *outbox) run(ctx context.Context) {
	defer func() {
		o.mu.Lock()
		o.closed = true
		o.failWhere(func(*item) bool { return true }, errShutdown)
		o.mu.Unlock()
	}()
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	for {
		o.mu.Lock()
		for !o.ready() {
			wake := o.wake
			o.mu.Unlock()
			select {
			case <-wake:
			case <-sweep.C:
				o.expire()
			case <-ctx.Done():
				return
			}
			o.mu.Lock()
		}
		o.mu.Unlock()

		// Take the token first and choose the line after, so a line
		// cancelled while we waited is not sent.
		if err := o.limiter.Wait(ctx); err != nil {
			return
		}

		o.mu.Lock()
		link := o.link
		var it *item
		if link != nil {
			it = o.pick()
		}
		o.mu.Unlock()
		if it == nil {
			continue
		}
		err := link.write(ctx, it.line)
		if err == nil {
			o.sent.Add(1)
			metrics.OutboxSent()
		}
		it.finish(err)
		o.mu.Lock()
		o.inflight = false
		if err != nil && it.batch != nil {
			o.failWhere(func(x *item) bool { return x.batch == it.batch }, err)
		}
		o.notify()
		o.mu.Unlock()
	}
}

// expire fails queued lines whose time is up while there is no
// connection; they would otherwise wait for a connection that is not
// coming back soon. While connected, a long backlog only delays lines.
func (o *outbox) expire() {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.link != nil {
		return
	}
	o.failWhere(func(it *item) bool { return !it.expires.IsZero() && now.After(it.expires) }, errExpired)
}

// flush waits until nothing is queued or ctx ends.
func (o *outbox) flush(ctx context.Context) bool {
	for {
		o.mu.Lock()
		empty := len(o.control) == 0 && len(o.ring) == 0 && !o.inflight
		wake := o.wake
		o.mu.Unlock()
		if empty {
			return true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

// send queues lines under key and waits until all were written, ctx ends
// or one fails; on failure the lines not yet sent are withdrawn. It
// returns nil exactly when every line was written, even if ctx ended
// while the last one was being written.
func (o *outbox) send(ctx context.Context, key string, gen uint64, expires time.Time, control bool, lines ...[]byte) error {
	_, err := o.sendN(ctx, key, gen, expires, control, lines...)
	return err
}

// sendN is send, also reporting how many lines, from the first, were
// written before the first that was not (all of them when err is nil).
// Lines go out in order and a failed line withdraws the rest of its send
// (item.batch), so none after written was sent.
func (o *outbox) sendN(ctx context.Context, key string, gen uint64, expires time.Time, control bool, lines ...[]byte) (written int, err error) {
	items := make([]*item, len(lines))
	var batch *batchTag
	if len(lines) > 1 {
		batch = new(batchTag)
	}
	for i, l := range lines {
		items[i] = &item{line: l, key: key, gen: gen, expires: expires, batch: batch}
	}
	o.enqueueAll(items, control)
	var firstErr error
	for _, it := range items {
		if firstErr != nil {
			if it.cancel() {
				continue
			}
			<-it.done // already being sent: wait for it
			continue
		}
		select {
		case err := <-it.done:
			firstErr = err
			if err == nil {
				written++
			}
		case <-ctx.Done():
			if !it.cancel() {
				// Being written: its outcome counts, not ctx. A line
				// the socket took was delivered; the next ones are
				// withdrawn, and only then did the send fail.
				if firstErr = <-it.done; firstErr == nil {
					written++
				}
				continue
			}
			firstErr = ctx.Err()
		}
	}
	return written, firstErr
}

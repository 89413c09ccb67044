package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/store"
)

// Lease campaigns for the leader lease (archivebot:leader) and keeps it:
// any number of nodes may run against one Redis, exactly one leads. See
// doc/architecture.md, High availability.
//
// The holder renews every TTL/3. Locally it counts the lease as held until
// a monotonic deadline: the time it sent the last successful acquire or
// renew plus 9/10 of the TTL, which is before Redis expires the key, so a
// node never believes it leads while another one does (even after being
// paused: the monotonic clock runs on). Valid is what the IRC outbox asks
// before every line; the fencing token (WithFence) is what every service
// write script checks.
type Lease struct {
	store Store
	node  string
	ttl   time.Duration
	log   *slog.Logger
	// MaxClockSkew, when positive, is how far this node's clock may be
	// from Redis's TIME: further, the node does not campaign (and a
	// leader steps down), since the pipeline API's timestamps and nonces
	// assume the nodes' clocks agree. Set it before Run.
	MaxClockSkew time.Duration
	// MayLead, when set, is asked before each campaign: false keeps this
	// node from taking the lease (a node without IRC while another has
	// it, ha.irc_standby). Set it before Run.
	MayLead func() bool

	clockMu      sync.Mutex
	clockProblem string // why the node refuses to lead, "" when it does not

	mu       sync.Mutex
	value    string    // the lease value held, "" when not leading
	deadline time.Time // local, monotonic
	since    time.Time // when this term began
}

// NewLease returns a lease campaign for node; Run starts it.
func NewLease(st Store, node string, ttl time.Duration, logger *slog.Logger) *Lease {
	if logger == nil {
		logger = slog.Default()
	}
	return &Lease{store: st, node: node, ttl: ttl, log: logger.With("service", "lease", "node", node)}
}

// ClockProblem says why the node's clock keeps it from leading ("" when
// it does not): /readyz shows it.
func (l *Lease) ClockProblem() string {
	l.clockMu.Lock()
	defer l.clockMu.Unlock()
	return l.clockProblem
}

// clockOK measures the node's clock against Redis's TIME and records the
// outcome; false when it is certainly off by more than MaxClockSkew: the
// offset is known within half the round trip, so a slow TIME answer (a
// busy Redis or network, 12 s say) is not taken for a skewed clock; nor
// does a failed measurement count (the lease scripts fail the same way).
func (l *Lease) clockOK(ctx context.Context) bool {
	if l.MaxClockSkew <= 0 {
		return true
	}
	off, rtt, err := l.store.ClockOffset(ctx)
	if err != nil {
		return true
	}
	problem := ""
	if off.Abs()-rtt/2 > l.MaxClockSkew {
		problem = "this node's clock is " + off.Round(time.Millisecond).String() + " from Redis's TIME (at most " +
			l.MaxClockSkew.String() + ", ha.max_clock_skew): it does not lead until the clocks agree (fix NTP)"
	}
	l.clockMu.Lock()
	changed := problem != l.clockProblem
	l.clockProblem = problem
	l.clockMu.Unlock()
	if changed && problem != "" {
		l.log.Error("refusing to lead: "+problem, "offset", off)
	} else if changed {
		l.log.Info("the node's clock agrees with Redis again", "offset", off)
	}
	return problem == ""
}

// Node is this node's id.
func (l *Lease) Node() string { return l.node }

// Valid reports whether this node holds the lease now, by its local
// deadline.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value != "" && time.Now().Before(l.deadline)
}

// CommandFence is the fencing token for user commands (Store.CommandFence):
// the lease value while this node holds it by its local deadline, and a
// value no lease ever holds otherwise, so that their scripts refuse.
func (l *Lease) CommandFence() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.value != "" && time.Now().Before(l.deadline) {
		return l.value
	}
	return "standby " + l.node
}

// Since is when the current term began (zero when not leading).
func (l *Lease) Since() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.value == "" {
		return time.Time{}
	}
	return l.since
}

func (l *Lease) set(value string, sent time.Time) {
	l.mu.Lock()
	if l.value != value {
		l.since = time.Now()
	}
	l.value = value
	l.deadline = sent.Add(l.ttl - l.ttl/10)
	since := l.since
	l.mu.Unlock()
	metrics.SetLeader(true, since)
}

func (l *Lease) clear() {
	l.mu.Lock()
	l.value = ""
	l.mu.Unlock()
	metrics.SetLeader(false, time.Time{})
}

// Run campaigns until ctx ends. Each time this node takes the lease it
// calls lead with a context that carries the fencing token (WithFence) and
// is cancelled the moment the lease is lost (renewal refused, or the local
// deadline passed without a renewal); Run waits for lead to return before
// campaigning again. When ctx ends while leading, lead's context is
// cancelled, lead returns, and the lease is released for a standby to take
// at once.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) {
	poll := l.ttl / 10
	if poll < 100*time.Millisecond {
		poll = 100 * time.Millisecond
	}
	lastHolder := ""
	unreachable := false
	held := false // MayLead said no, logged once
	for ctx.Err() == nil {
		if l.MayLead != nil && !l.MayLead() {
			if !held {
				held = true
				l.log.Info("not campaigning: another node is better placed to lead (it has IRC, this node has not)")
			}
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		held = false
		if !l.clockOK(ctx) {
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		sent := time.Now()
		h, won, err := l.store.AcquireLease(ctx, l.node, l.ttl)
		if err == nil && unreachable {
			unreachable = false
			l.log.Info("redis answers again; campaigning")
		}
		switch {
		case err != nil:
			if !unreachable && ctx.Err() == nil {
				l.log.Warn("cannot reach redis to campaign for the leader lease; retrying", "err", err)
			}
			unreachable = true
		case won:
			l.set(h.Value, sent)
			l.log.Info("took the leader lease: leading", "token", h.Token)
			l.term(ctx, h.Value, lead)
			lastHolder = ""
			continue
		case h.Node != lastHolder:
			lastHolder = h.Node
			l.log.Info("standby: another node leads", "leader", h.Node, "token", h.Token)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// term runs one leadership term: lead in a goroutine, renewals here.
func (l *Lease) term(ctx context.Context, value string, lead func(ctx context.Context)) {
	leadCtx, cancel := context.WithCancel(store.WithFence(ctx, value))
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	renewEvery := l.ttl / 3
	retry := l.ttl / 10
	next := time.NewTimer(renewEvery)
	defer next.Stop()
	for {
		l.mu.Lock()
		left := time.Until(l.deadline)
		l.mu.Unlock()
		expire := time.NewTimer(left)
		select {
		case <-ctx.Done():
			expire.Stop()
			cancel()
			<-done
			l.release(value)
			return
		case <-done:
			// lead returned by itself: give the lease to a standby.
			expire.Stop()
			cancel()
			l.release(value)
			return
		case <-expire.C:
			l.log.Error("leader lease ran out without a renewal: stepping down, sending nothing more")
			l.stepDown(cancel, done)
			return
		case <-next.C:
			expire.Stop()
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, retry)
			ok, err := l.store.RenewLease(rctx, value, l.ttl)
			rcancel()
			switch {
			case err != nil:
				l.log.Warn("cannot renew the leader lease; retrying", "err", err)
				next.Reset(retry)
			case !ok:
				l.log.Error("leader lease lost to another node: stepping down, sending nothing more")
				l.stepDown(cancel, done)
				return
			case !l.clockOK(ctx):
				l.log.Error("stepping down: this node's clock no longer agrees with Redis's")
				l.stepDown(cancel, done)
				l.release(value)
				return
			default:
				l.set(value, sent)
				next.Reset(renewEvery)
			}
		}
	}
}

func (l *Lease) stepDown(cancel context.CancelFunc, done chan struct{}) {
	l.clear()
	cancel()
	<-done
	l.log.Info("stepped down: standby")
}

func (l *Lease) release(value string) {
	l.clear()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ok, err := l.store.ReleaseLease(ctx, value); err != nil {
		l.log.Warn("could not release the leader lease; it expires by itself", "err", err)
	} else if ok {
		l.log.Info("released the leader lease")
	}
}

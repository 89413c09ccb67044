// Package faultstore wraps the store for tests of the services: chosen
// calls fail, lose their reply, or wait until the test lets them go, and
// every call is counted. asynq's internal/testbroker is the model: the
// real store underneath (miniredis or a real redis-server), and faults on
// demand, so a test shows what a service does when Redis fails one call
// of a cycle, not only when it goes away whole.
//
// Store has the methods of the services' door, coordinator.Store (the
// coordinator's tests assert that it satisfies it). It is for tests only:
// internal/lint's TestLayers keeps production code from importing it.
package faultstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/archiveteam/archivebot-go/store"
)

// ErrDown is what a faulted call returns when the test gives no error of
// its own. It wraps store.ErrUnavailable, as a refused connection does,
// so the services take it for Redis being away.
var ErrDown = fmt.Errorf("faultstore: %w", store.ErrUnavailable)

// Store is a store whose calls fail or stall on demand.
type Store struct {
	next *store.Store

	mu     sync.Mutex
	asleep bool
	faults map[string][]*fault
	holds  map[string]*Gate
	calls  map[string]int
}

// fault is one rule for the next calls of a method.
type fault struct {
	n     int  // calls left; below 0, every call
	after bool // the call reaches the store first (LoseReply)
	err   error
}

// New wraps s.
func New(s *store.Store) *Store {
	return &Store{next: s, faults: map[string][]*fault{}, holds: map[string]*Gate{}, calls: map[string]int{}}
}

// Unwrap is the wrapped store, for a test's own seeding and checks.
func (f *Store) Unwrap() *store.Store { return f.next }

// Sleep makes every call fail with ErrDown, without reaching the store,
// until Wakeup: Redis gone (testbroker's Sleep).
func (f *Store) Sleep() {
	f.mu.Lock()
	f.asleep = true
	f.mu.Unlock()
}

// Wakeup ends Sleep.
func (f *Store) Wakeup() {
	f.mu.Lock()
	f.asleep = false
	f.mu.Unlock()
}

// Fail makes the next n calls of method (every call when n < 0) fail with
// err, ErrDown when err is nil, before they reach the store: nothing is
// written. Rules of one method apply in the order they were given.
func (f *Store) Fail(method string, n int, err error) { f.add(method, n, false, err) }

// LoseReply makes the next n calls of method (every call when n < 0)
// reach the store and then fail with err, ErrDown when err is nil: what
// the call wrote stays written, as when a connection drops before the
// reply comes.
func (f *Store) LoseReply(method string, n int, err error) { f.add(method, n, true, err) }

func (f *Store) add(method string, n int, after bool, err error) {
	known(method)
	if n == 0 {
		return
	}
	if err == nil {
		err = ErrDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[method] = append(f.faults[method], &fault{n: n, after: after, err: err})
}

// Clear drops every rule and hold of method (its held calls go on).
func (f *Store) Clear(method string) {
	known(method)
	f.mu.Lock()
	delete(f.faults, method)
	g := f.holds[method]
	delete(f.holds, method)
	f.mu.Unlock()
	if g != nil {
		g.Open()
	}
}

// Calls is how many times method was called, faulted calls included.
func (f *Store) Calls(method string) int {
	known(method)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Hold makes every call of method wait, before its rules apply, until the
// returned gate opens or the call's context ends (the call then returns
// the context's error and sends nothing). Each call that starts waiting
// is signalled on Waiting, so a test waits for it instead of sleeping.
func (f *Store) Hold(method string) *Gate {
	known(method)
	g := &Gate{waiting: make(chan struct{}, 1024), open: make(chan struct{})}
	f.mu.Lock()
	f.holds[method] = g
	f.mu.Unlock()
	return g
}

// Gate holds calls of one method (Hold).
type Gate struct {
	waiting chan struct{}
	open    chan struct{}
	once    sync.Once
}

// Waiting receives once for each call that starts waiting at the gate.
func (g *Gate) Waiting() <-chan struct{} { return g.waiting }

// Open lets the held calls and every later one through.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// enter applies the faults set for one call of method. A non-nil err
// means the call must return it without reaching the store; else the
// call goes on, and after turns its error into the one to return.
func (f *Store) enter(ctx context.Context, method string) (after func(error) error, err error) {
	f.mu.Lock()
	f.calls[method]++
	g := f.holds[method]
	f.mu.Unlock()
	if g != nil {
		select {
		case g.waiting <- struct{}{}:
		default:
		}
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asleep {
		return nil, ErrDown
	}
	rules := f.faults[method]
	if len(rules) == 0 {
		return pass, nil
	}
	r := rules[0]
	if r.n > 0 {
		if r.n--; r.n == 0 {
			f.faults[method] = rules[1:]
		}
	}
	if !r.after {
		return nil, r.err
	}
	return func(error) error { return r.err }, nil
}

func pass(err error) error { return err }

// known panics for a name that is no method of the door: a misspelt rule
// would never apply, and the test that set it would prove nothing.
func known(method string) {
	if !slices.Contains(methods, method) {
		panic("faultstore: no method " + method)
	}
}

// Methods are the names of the methods Store wraps.
func Methods() []string { return slices.Clone(methods) }

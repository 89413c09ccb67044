// Package bridge is `archivebot bridge`: a Redis server, on a loopback
// port of the pipeline's machine, that serves exactly the commands an
// unmodified upstream pipeline sends and turns them into pipeline API v1
// calls signed with the pipeline's key (doc/pipeline-api.md, The bridge).
// The only change for a volunteer is REDIS_URL pointing at it.
//
// Requests are read by the bridge's own bounded RESP reader (conn.go) and
// answered with github.com/tidwall/redcon's writer; the rest of this
// package translates. Every command it does not serve gets a Redis error naming
// it, is logged and counted (Stats); nothing reaches the node for it.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// Node is the pipeline API v1 as the bridge uses it; *client.Client
// implements it.
type Node interface {
	Take(ctx context.Context, req wire.TakeRequest) (*wire.Job, error)
	Job(ctx context.Context, ident string) (*wire.Job, error)
	Update(ctx context.Context, ident string, req wire.UpdateRequest) (wire.UpdateResponse, error)
	Abort(ctx context.Context, ident string) (wire.DoneResponse, error)
	Done(ctx context.Context, ident string) (wire.DoneResponse, error)
	Report(ctx context.Context, fields map[string]string) (wire.PipelineResponse, error)
	Unregister(ctx context.Context) (wire.PipelineResponse, error)
	Control(ctx context.Context, fn func(client.Event) error) error
}

var _ Node = (*client.Client)(nil)

// The wire names an upstream pipeline uses (doc/protocol.md).
const (
	keyWorking             = "working"
	keyPipelines           = "pipelines"
	channelUpdates         = "updates"
	channelPipelineUpdates = "archivebot:pipeline_updates"
	channelJobPrefix       = "archivebot:job:"
	pipelinePrefix         = "pipeline:"
	pendingPrefix          = "pending:"
	queuePending           = "pending"
	queuePendingAO         = "pending-ao"
	queuePendingLarge      = "pending-large"
)

// Config configures a Bridge.
type Config struct {
	Node   Node
	Logger *slog.Logger
	// RetryFor bounds how long a call refused for a passing reason (429,
	// 503, the node unreachable) is retried before the pipeline gets an
	// error; default 2 minutes. The pipeline's connection waits meanwhile:
	// a slow node slows the pipeline down instead of losing its data.
	RetryFor time.Duration
	// ControlRetry is the wait before the control stream is reopened;
	// default 1 s.
	ControlRetry time.Duration
	// CacheFor is how long a job's record read from the node answers the
	// reads that follow (get_settings reads the record, then the ignore
	// set); a control event drops it at once. Default 1 s.
	CacheFor time.Duration
	// Limits bound what clients can make the bridge read and hold.
	Limits Limits
}

// Bridge serves one pipeline.
type Bridge struct {
	node     Node
	log      *slog.Logger
	retryFor time.Duration
	ctlRetry time.Duration
	cacheFor time.Duration

	mu sync.Mutex
	// jobs the pipeline holds through this bridge, by ident.
	jobs map[string]*jobState
	// pipelineID is the pipeline:ID key the pipeline reports as.
	pipelineID string
	// notAOOnly: the pipeline asked for `pending`, so it is not AO-only;
	// large: it asked for `pending-large`. Learnt from its RPOPLPUSHes,
	// so that the node can choose among named queues for it.
	notAOOnly, large bool
	// subs are the SUBSCRIBE connections, by channel.
	subs    map[string]map[*subscriber]struct{}
	stats   map[string]int64
	closing bool
	lns     []net.Listener
	conns   map[net.Conn]struct{}
	lim     Limits
	cancel  context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup

	logMu  sync.Mutex
	logged map[string]time.Time // logLimited
}

// jobState is what the bridge keeps of a held job.
type jobState struct {
	ident string
	// rec is the last record read, and when (zero: none usable).
	rec     *wire.Job
	recAt   time.Time
	counter map[string]int64 // running HINCRBY totals the pipeline sees
	age     int64
	ended   string // non-empty: released or finished, and why
	// last is the last record read (never cleared): what a drained job's
	// reads answer.
	last *wire.Job
	// drain: an operator rerouted the job (wire.ReleasedRerouted). The
	// node no longer takes writes for it, so the bridge winds it down
	// itself: the pipeline reads abort_requested, its writes are answered
	// here and dropped, and its mark_aborted and mark_done end it here.
	drain, drainAborted bool
}

// New returns a bridge over cfg.Node. Serve starts it.
func New(cfg Config) *Bridge {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = 2 * time.Minute
	}
	if cfg.ControlRetry <= 0 {
		cfg.ControlRetry = time.Second
	}
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Bridge{node: cfg.Node, log: cfg.Logger, retryFor: cfg.RetryFor, ctlRetry: cfg.ControlRetry,
		cacheFor: cfg.CacheFor, jobs: map[string]*jobState{}, subs: map[string]map[*subscriber]struct{}{},
		stats: map[string]int64{}, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{},
		lim: cfg.Limits.withDefaults(), logged: map[string]time.Time{}}
}

// Close stops serving: listeners and subscriber connections are closed,
// the control stream ends.
func (b *Bridge) Close() error {
	b.mu.Lock()
	b.closing = true
	lns := b.lns
	conns := make([]net.Conn, 0, len(b.conns))
	for nc := range b.conns {
		conns = append(conns, nc)
	}
	var subs []*subscriber
	for _, m := range b.subs {
		for s := range m {
			subs = append(subs, s)
		}
	}
	b.mu.Unlock()
	b.cancel()
	for _, ln := range lns {
		ln.Close()
	}
	for _, s := range subs {
		s.close()
	}
	for _, nc := range conns {
		nc.Close()
	}
	b.wg.Wait()
	return nil
}

// Stats are the bridge's counters: "refused:COMMAND" for each refused
// command, "node_error:OP" for calls the node refused, "log_entries" sent.
func (b *Bridge) Stats() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int64, len(b.stats))
	for k, v := range b.stats {
		out[k] = v
	}
	return out
}

func (b *Bridge) count(name string, n int64) {
	b.mu.Lock()
	b.stats[name] += n
	b.mu.Unlock()
}

// callBackoff is the wait between two tries of a call when the node gave
// no Retry-After.
var callBackoff = retry.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}

// call runs op, retrying refusals that pass (429 with its Retry-After,
// 503, the node unreachable) for up to RetryFor.
func (b *Bridge) call(what string, op func(ctx context.Context) error) error {
	deadline := time.Now().Add(b.retryFor)
	waited := 0 // retries that waited the backoff (no Retry-After)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := op(ctx)
		cancel()
		if err == nil {
			return nil
		}
		again, after := transient(err)
		if !again || b.ctx.Err() != nil {
			b.count("node_error:"+what, 1)
			b.log.Warn("bridge: the node refused", "op", what, "err", err)
			return err
		}
		if after <= 0 {
			after = callBackoff.Wait(waited)
			waited++
		}
		if time.Now().Add(after).After(deadline) {
			b.count("node_error:"+what, 1)
			b.log.Warn("bridge: giving up", "op", what, "after", b.retryFor, "err", err)
			return err
		}
		b.count("retry:"+what, 1)
		if !retry.Sleep(b.ctx, after) {
			return err
		}
	}
}

// callFor is call for an op with a result.
func callFor[T any](b *Bridge, what string, op func(ctx context.Context) (T, error)) (T, error) {
	var out T
	err := b.call(what, func(ctx context.Context) error {
		var err error
		out, err = op(ctx)
		return err
	})
	return out, err
}

// transient says whether err may pass by itself, and after how long.
func transient(err error) (bool, time.Duration) {
	var e *client.Error
	if errors.As(err, &e) {
		switch e.Status {
		case 429, 502, 503, 504:
			return true, e.RetryAfter
		}
		return false, 0
	}
	if errors.Is(err, context.Canceled) {
		return false, 0
	}
	return true, 0 // network: the node restarting, a proxy between
}

// ---------------------------------------------------------------------
// Held jobs.

// errNotHeld is the reply for a key that is no job this pipeline holds.
func errNotHeld(key string) string {
	return fmt.Sprintf("ERR %q is not a job this pipeline holds (the bridge serves only the pipeline's own jobs and record)", key)
}

// held returns the state of a job the pipeline holds, asking the node when
// the bridge does not know it (the bridge restarted while the pipeline
// kept its job). ok false: reply is the error to send.
func (b *Bridge) held(ident string) (js *jobState, reply string) {
	b.mu.Lock()
	js = b.jobs[ident]
	b.mu.Unlock()
	if js != nil {
		if b.drained(js) {
			return js, ""
		}
		if js.ended != "" {
			return nil, fmt.Sprintf("ERR job %s: %s", ident, js.ended)
		}
		return js, ""
	}
	if !plausibleIdent(ident) {
		return nil, errNotHeld(ident)
	}
	rec, err := callFor(b, "job", func(ctx context.Context) (*wire.Job, error) { return b.node.Job(ctx, ident) })
	if err != nil {
		return nil, nodeReply(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if js = b.jobs[ident]; js == nil {
		js = &jobState{ident: ident, counter: map[string]int64{}}
		b.jobs[ident] = js
	}
	js.rec, js.recAt = rec, time.Now()
	return js, ""
}

// plausibleIdent: idents are short and printable; anything else is not
// worth a round trip to the node.
func plausibleIdent(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return !strings.HasPrefix(s, pipelinePrefix) && !strings.HasPrefix(s, "pending") && s != keyWorking
}

// record returns the job's record, read from the node unless read within
// CacheFor and no control event came since.
func (b *Bridge) record(js *jobState) (*wire.Job, string) {
	b.mu.Lock()
	if js.drain {
		rec := drainedRecord(js)
		b.mu.Unlock()
		return rec, ""
	}
	if js.rec != nil && time.Since(js.recAt) < b.cacheFor {
		rec := js.rec
		b.mu.Unlock()
		return rec, ""
	}
	b.mu.Unlock()
	rec, err := callFor(b, "job", func(ctx context.Context) (*wire.Job, error) { return b.node.Job(ctx, js.ident) })
	if err != nil {
		b.releaseIfNotHeld(js.ident, err)
		return nil, nodeReply(err)
	}
	b.mu.Lock()
	js.rec, js.recAt, js.last = rec, time.Now(), rec
	b.mu.Unlock()
	return rec, ""
}

// drainedRecord is what a drained job's reads answer: its last record with the
// abort requested at a new settings_age (and aborted after mark_aborted);
// b.mu held.
func drainedRecord(js *jobState) *wire.Job {
	rec := *js.last
	rec.Fields = maps.Clone(js.last.Fields)
	if rec.Fields == nil {
		rec.Fields = map[string]string{}
	}
	rec.Fields["abort_requested"] = "true"
	rec.Fields["settings_age"] = strconv.FormatInt(js.age, 10)
	if js.drainAborted {
		rec.Fields["aborted"] = "true"
	}
	return &rec
}

// drained reports whether js is being wound down after a reroute.
func (b *Bridge) drained(js *jobState) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return js.drain
}

// draining returns ident's state when it is drained, else nil.
func (b *Bridge) draining(ident string) *jobState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if js := b.jobs[ident]; js != nil && js.drain {
		return js
	}
	return nil
}

func (b *Bridge) releaseIfNotHeld(ident string, err error) {
	if client.IsCode(err, "not_held") || client.IsCode(err, "not_found") {
		b.mu.Lock()
		if js := b.jobs[ident]; js == nil || !js.drain {
			delete(b.jobs, ident)
		}
		b.mu.Unlock()
	}
}

// nodeReply is the Redis error for a node refusal.
func nodeReply(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		if !e.FromAPI() {
			return fmt.Sprintf("ERR the node's address answered %d %s, not as the pipeline API does: is the bridge's -node the node's pipelines.listen address (not its web port)?",
				e.Status, oneLine(e.Code+" "+e.Reason))
		}
		return fmt.Sprintf("ERR node refused (%d %s): %s", e.Status, e.Code, oneLine(e.Reason))
	}
	return "ERR node unreachable: " + oneLine(err.Error())
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// jobField reads one field of a record as HGET answers it.
func jobField(rec *wire.Job, field string) (string, bool) {
	if field == "pipeline_id" && rec.PipelineID != "" {
		if v, ok := rec.Fields[field]; ok {
			return v, true
		}
		return rec.PipelineID, true
	}
	v, ok := rec.Fields[field]
	return v, ok
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

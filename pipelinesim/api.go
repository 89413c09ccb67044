package pipelinesim

// API mode: the same simulated pipeline, with no Redis access at all,
// through the node's pipeline API v1 (doc/pipeline-api.md) with a
// pipeline key. Tests and benchmarks run many of them against one node.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// APIPipeline is a simulated pipeline that talks to the node's API.
// Workers > 1 runs that many jobs at once under the one key, as an
// upstream pipeline runs several items.
type APIPipeline struct {
	c   *client.Client
	cfg Config

	mu       sync.Mutex
	settings map[string]chan wire.Settings // held job → its settings events
}

// NewAPI returns a pipeline calling the node through c.
func NewAPI(c *client.Client, cfg Config) *APIPipeline {
	cfg.defaults()
	return &APIPipeline{c: c, cfg: cfg, settings: map[string]chan wire.Settings{}}
}

// Report sends the pipeline record.
func (p *APIPipeline) Report(ctx context.Context, status string) error {
	if status == "" {
		status = "Running"
	}
	_, err := p.c.Report(ctx, map[string]string{
		"version": p.cfg.Version, "hostname": p.cfg.Hostname, "fqdn": p.cfg.Hostname,
		"pid": strconv.Itoa(os.Getpid()), "python": "3.9.2 (simulated, " + runtime.Version() + ")",
		"status": status, "nickname": p.cfg.Nickname,
		"mem_usage": "0.25", "mem_available": "4000000000", "disk_usage": "0.5", "disk_available": "100000000000",
	})
	return err
}

// control feeds settings events to the jobs' channels until ctx ends,
// reopening the stream when it closes.
func (p *APIPipeline) control(ctx context.Context, emit func(Event)) {
	for ctx.Err() == nil {
		err := p.c.Control(ctx, func(ev client.Event) error {
			if ev.Name != wire.EventSettings {
				return nil
			}
			s, err := ev.Settings()
			if err != nil {
				return nil
			}
			p.mu.Lock()
			ch := p.settings[s.Ident]
			p.mu.Unlock()
			if ch != nil {
				select {
				case ch <- s:
				default: // a newer one will come; the job reads the latest
				}
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		emit(Event{Kind: EventError, Err: fmt.Errorf("control stream: %w", err)})
		wait := time.Second
		var e *client.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// Run reports, keeps the control stream open and works jobs with
// `workers` at once until ctx ends or MaxJobs are done (in total), then
// unregisters. Each job: heartbeats, Entries download entries (sent in
// batches at most every 250 ms), settings honoured (an abort request ends
// it aborted), then done. Take events carry the take's latency in N (µs).
func (p *APIPipeline) Run(ctx context.Context, o RunOptions, workers int) error {
	o = o.withDefaults()
	if workers < 1 {
		workers = 1
	}
	emit := func(e Event) {
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); reportRunning(runCtx, o.ReportInterval, p.Report, emit, nil) }()
	go func() { defer bg.Done(); p.control(runCtx, emit) }()

	var mu sync.Mutex
	jobs := 0
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				mu.Lock()
				if o.MaxJobs > 0 && jobs >= o.MaxJobs {
					mu.Unlock()
					return
				}
				jobs++
				mu.Unlock()
				if err := p.work(runCtx, o, emit); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	bg.Wait()
	exitCtx, cancelExit := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelExit()
	// The workers' last polls may have used up the key's rate just now:
	// a 429 here is retried after its Retry-After, as every other call is.
	if err, _ := callRetrying(exitCtx, func() error { _, err := p.c.Unregister(exitCtx); return err }); err != nil {
		return errors.Join(firstErr, fmt.Errorf("unregister: %w", err))
	}
	emit(Event{Kind: EventExit})
	return firstErr
}

// EventDrop: an API-mode worker gave up a job because the node refused
// a write for it (not_held: the job was failed, requeued or taken by
// another pipeline); the worker goes on with the next job.
const EventDrop = "drop"

// retryable reports whether a call that failed with err may succeed
// when made again: the node asked for a retry (429, 503 during a leader
// change, 500 "retry"), or no answer came at all.
func retryable(err error) bool {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return true
}

// callRetrying makes fn until it succeeds, is refused or ctx ends,
// waiting Retry-After (else a second) between tries, at most a minute of
// tries. unsure reports that an earlier try may have been applied (it
// failed without a refusal that says nothing was done).
func callRetrying(ctx context.Context, fn func() error) (err error, unsure bool) {
	for try := 0; ; try++ {
		err = fn()
		if err == nil || !retryable(err) || ctx.Err() != nil || try >= 60 {
			return err, unsure
		}
		wait := time.Second
		var e *client.Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		if !errors.As(err, &e) || (e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable) {
			unsure = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err(), unsure
		case <-time.After(wait):
		}
	}
}

// work takes one job (waiting for one) and crawls it to its end. A
// write the node asks to retry is retried (a leader change answers 503
// for a few seconds); a job whose write is refused is dropped
// (EventDrop). Neither ends the worker.
func (p *APIPipeline) work(ctx context.Context, o RunOptions, emit func(Event)) error {
	var job *wire.Job
	// The take_id is kept while takes fail with an unknown outcome, so a
	// take whose answer was lost is answered again, and renewed once the
	// node answered (doc/pipeline-api.md, A lost answer).
	takeID := client.NewTakeID()
	idle := false
	for job == nil {
		start := time.Now()
		j, err := p.c.Take(ctx, wire.TakeRequest{AOOnly: p.cfg.AOOnly, Large: p.cfg.Large,
			WaitMS: int(min(o.PollInterval, 30*time.Second) / time.Millisecond), TakeID: takeID})
		if ctx.Err() != nil {
			return nil
		}
		if err == nil || !client.OutcomeUnknown(err) {
			takeID = client.NewTakeID()
		}
		if err != nil {
			emit(Event{Kind: EventError, Err: err})
			var e *client.Error
			wait := o.PollInterval
			if errors.As(err, &e) && e.RetryAfter > 0 {
				wait = e.RetryAfter
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			continue
		}
		if j != nil {
			job = j
			emit(Event{Kind: EventTake, Ident: j.Ident, N: time.Since(start).Microseconds()})
		} else if !idle {
			idle = true
			emit(Event{Kind: EventIdle})
		}
	}
	ch := make(chan wire.Settings, 4)
	p.mu.Lock()
	p.settings[job.Ident] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.settings, job.Ident)
		p.mu.Unlock()
	}()
	age, _ := strconv.ParseInt(job.Fields["settings_age"], 10, 64)
	url := strings.TrimSuffix(job.Fields["url"], "/") + "/"
	hb := time.NewTicker(o.HeartbeatInterval)
	defer hb.Stop()
	next := time.NewTimer(0)
	defer next.Stop()
	// The log and counters not yet sent. The job's loop adds to them on
	// its schedule while the shipper sends them, as upstream's crawl goes
	// on while its ship_logs thread sends
	// (pipelineapi/bridge/testdata/upstream_pipeline.py): an update in
	// flight does not hold up the crawl, so the offered entry rate does
	// not fall with the node's latency.
	var (
		bmu     sync.Mutex
		pending []json.RawMessage
		incr    map[string]int64
	)
	take := func() ([]json.RawMessage, map[string]int64) {
		bmu.Lock()
		defer bmu.Unlock()
		l, c := pending, incr
		pending, incr = nil, nil
		return l, c
	}
	// putBack returns a batch the node did not take in front of what
	// came since, so the next batch carries it in order.
	putBack := func(l []json.RawMessage, c map[string]int64) {
		bmu.Lock()
		defer bmu.Unlock()
		pending = append(l, pending...)
		if len(c) > 0 && incr == nil {
			incr = map[string]int64{}
		}
		for k, v := range c {
			incr[k] += v
		}
	}
	update := func(l []json.RawMessage, c map[string]int64) error {
		_, err := p.c.Update(ctx, job.Ident, wire.UpdateRequest{Log: l, Incr: c})
		return err
	}
	// The shipper sends what is pending every 250 ms, one update in
	// flight at a time; a retryable failure keeps the batch for the next
	// one, a refusal ends the shipper with shipErr set.
	stopShip, shipDone := make(chan struct{}), make(chan struct{})
	var shipErr error
	go func() {
		defer close(shipDone)
		flush := time.NewTicker(250 * time.Millisecond)
		defer flush.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopShip:
				return
			case <-flush.C:
			}
			l, c := take()
			if len(l) == 0 && len(c) == 0 {
				continue
			}
			if err := update(l, c); err != nil {
				if retryable(err) {
					putBack(l, c)
					continue
				}
				shipErr = err
				return
			}
		}
	}()
	// stopShipper waits for the shipper's update in flight, if any, and
	// returns its refusal, if any.
	var stopOnce sync.Once
	stopShipper := func() error {
		stopOnce.Do(func() { close(stopShip) })
		<-shipDone
		return shipErr
	}
	defer stopShipper()
	// send sends what is left once the shipper stopped, retrying.
	send := func() error {
		l, c := take()
		if len(l) == 0 && len(c) == 0 {
			return nil
		}
		err, _ := callRetrying(ctx, func() error { return update(l, c) })
		return err
	}
	// drop gives the job up after a refused write.
	drop := func(err error) error {
		if ctx.Err() == nil {
			emit(Event{Kind: EventDrop, Ident: job.Ident, Err: err})
		}
		return nil
	}
	// done sends done; a refusal after a try that may have been applied
	// means that try was (the job is no longer held).
	done := func() error {
		err, unsure := callRetrying(ctx, func() error { _, err := p.c.Done(ctx, job.Ident); return err })
		if err != nil && !(unsure && client.IsCode(err, "not_held")) {
			return drop(fmt.Errorf("done: %w", err))
		}
		emit(Event{Kind: EventDone, Ident: job.Ident})
		return nil
	}
	stdout := func(msg string) {
		b, _ := json.Marshal(StdoutEntry{Type: "stdout", Message: msg, TS: p.cfg.Now().Unix()})
		bmu.Lock()
		pending = append(pending, b)
		bmu.Unlock()
	}
	stdout(fmt.Sprintf(StdoutReceived, job.Ident))
	if _, err := p.c.Heartbeat(ctx, job.Ident); err != nil && ctx.Err() == nil {
		emit(Event{Kind: EventError, Ident: job.Ident, Err: err})
	}
	due := time.Now() // when the next entry is due
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-hb.C:
			if _, err := p.c.Heartbeat(ctx, job.Ident); err != nil && ctx.Err() == nil {
				emit(Event{Kind: EventError, Ident: job.Ident, Err: err})
			}
		case <-shipDone:
			if shipErr == nil { // ctx ended
				return nil
			}
			return drop(shipErr)
		case s := <-ch:
			if s.Age <= age {
				continue
			}
			age = s.Age
			emit(Event{Kind: EventSetting, Ident: job.Ident, N: s.Age})
			if !s.AbortRequested {
				continue
			}
			if err := stopShipper(); err != nil {
				return drop(err)
			}
			stdout(StdoutAborted)
			if err := send(); err != nil {
				return drop(err)
			}
			if err, _ := callRetrying(ctx, func() error { _, err := p.c.Abort(ctx, job.Ident); return err }); err != nil {
				return drop(fmt.Errorf("abort: %w", err))
			}
			emit(Event{Kind: EventAbort, Ident: job.Ident})
			return done()
		case <-next.C:
			if i == o.Entries {
				if err := stopShipper(); err != nil {
					return drop(err)
				}
				stdout(fmt.Sprintf(StdoutFinished, job.Ident))
				if err := send(); err != nil {
					return drop(err)
				}
				return done()
			}
			i++
			code := o.Codes[(i-1)%len(o.Codes)]
			e := DownloadEntry{Type: "download", URL: fmt.Sprintf("%spage/%d", url, i), ResponseCode: code, WgetCode: "OK",
				IsError: code == 0 || code >= 500, IsWarning: code >= 400 && code < 500, TS: unixSeconds(p.cfg.Now())}
			if code == 0 {
				e.WgetCode = "NETWORK_ERROR"
			}
			b, _ := json.Marshal(e)
			bmu.Lock()
			pending = append(pending, b)
			if incr == nil {
				incr = map[string]int64{}
			}
			incr["bytes_downloaded"] += 1000
			incr["items_downloaded"]++
			incr["items_queued"] += 2
			bmu.Unlock()
			emit(Event{Kind: EventLog, Ident: job.Ident, N: int64(i)})
			// Entries are due on a fixed schedule, so a late timer (a
			// heartbeat in flight, a busy scheduler) does not stretch
			// the job; but a pipeline more than a second behind (frozen,
			// SIGSTOP) starts afresh from now rather than making up its
			// entries in a burst.
			due = due.Add(o.EntryInterval)
			if now := time.Now(); now.Sub(due) > time.Second {
				due = now
			}
			next.Reset(time.Until(due))
		}
	}
}

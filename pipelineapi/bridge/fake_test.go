package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// fakeNode is the node's API in memory: queues of idents, the jobs this
// key holds, and a record of every call.
type fakeNode struct {
	mu      sync.Mutex
	queues  map[string][]string // queue → idents, head last (RPOP end)
	named   []string            // named queues that apply to the key, in order
	jobs    map[string]*wire.Job
	held    map[string]bool
	calls   []string
	updates map[string][]wire.UpdateRequest
	report  map[string]string
	events  chan client.Event
	takes   []wire.TakeRequest
	// fail, when set, answers every call with this error.
	fail error
	// takeIDs: take_id -> the job it took (the node's answer again to a
	// take retried with its take_id); loseTakes: how many takes from now
	// take their job and then lose the answer (a transport error).
	takeIDs   map[string]string
	loseTakes int
}

func newFakeNode() *fakeNode {
	return &fakeNode{queues: map[string][]string{}, jobs: map[string]*wire.Job{}, held: map[string]bool{},
		updates: map[string][]wire.UpdateRequest{}, events: make(chan client.Event, 100)}
}

func (f *fakeNode) queue(q, ident string, fields map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[q] = append([]string{ident}, f.queues[q]...)
	fl := map[string]string{"url": "http://example.com/" + ident, "log_key": ident + "_log",
		"ignore_patterns_set_key": ident + "_ignores", "settings_age": "0", "delay_min": "250", "delay_max": "375",
		"concurrency": "3", "fetch_depth": "inf", "started_by": "vera", "started_in": "#ab", "queued_at": "1700000000"}
	for k, v := range fields {
		fl[k] = v
	}
	f.jobs[ident] = &wire.Job{Ident: ident, PipelineID: "pipeline:apiid", Fields: fl, Ignores: []string{}}
}

func (f *fakeNode) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.fail
}

func (f *fakeNode) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func notHeld(ident string) error {
	return &client.Error{Status: 403, Code: "not_held", Reason: "job " + ident + " is not held by this key"}
}

// holding records call and, when ident is held, locks f and returns its
// unlock; a job not held is the node's not_held refusal.
func (f *fakeNode) holding(call, ident string) (unlock func(), err error) {
	if err := f.record(call); err != nil {
		return nil, err
	}
	f.mu.Lock()
	if !f.held[ident] {
		f.mu.Unlock()
		return nil, notHeld(ident)
	}
	return f.mu.Unlock, nil
}

func (f *fakeNode) Take(ctx context.Context, req wire.TakeRequest) (*wire.Job, error) {
	if err := f.record("take " + strings.Join(req.Queues, ",")); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes = append(f.takes, req)
	if id, ok := f.takeIDs[req.TakeID]; ok && req.TakeID != "" && f.held[id] {
		cp := *f.jobs[id]
		return &cp, nil
	}
	qs := req.Queues
	if len(qs) == 0 {
		qs = append(append([]string(nil), f.named...), "pending-ao")
		if req.Large {
			qs = append(qs, "pending-large")
		}
		if !req.AOOnly {
			qs = append(qs, "pending")
		}
	}
	for _, q := range qs {
		l := f.queues[q]
		if len(l) == 0 {
			continue
		}
		id := l[len(l)-1]
		f.queues[q] = l[:len(l)-1]
		f.held[id] = true
		j := f.jobs[id]
		j.Fields["started_at"] = "1700000001.5"
		j.Fields["pipeline_id"] = j.PipelineID
		cp := *j
		cp.Queue = q
		if req.TakeID != "" {
			if f.takeIDs == nil {
				f.takeIDs = map[string]string{}
			}
			f.takeIDs[req.TakeID] = id
		}
		if f.loseTakes > 0 {
			f.loseTakes--
			return nil, errors.New("fake node: connection reset before the answer")
		}
		return &cp, nil
	}
	return nil, nil
}

func (f *fakeNode) Job(ctx context.Context, ident string) (*wire.Job, error) {
	unlock, err := f.holding("job "+ident, ident)
	if err != nil {
		return nil, err
	}
	defer unlock()
	j := *f.jobs[ident]
	fl := map[string]string{}
	for k, v := range j.Fields {
		fl[k] = v
	}
	j.Fields = fl
	j.Ignores = append([]string(nil), j.Ignores...)
	return &j, nil
}

func (f *fakeNode) Update(ctx context.Context, ident string, req wire.UpdateRequest) (wire.UpdateResponse, error) {
	unlock, err := f.holding(fmt.Sprintf("update %s hb=%d incr=%d set=%d log=%d", ident, req.Heartbeat, len(req.Incr), len(req.Set), len(req.Log)), ident)
	if err != nil {
		return wire.UpdateResponse{}, err
	}
	defer unlock()
	f.updates[ident] = append(f.updates[ident], req)
	j := f.jobs[ident]
	add := func(k string, n int64) {
		v, _ := strconv.ParseInt(j.Fields[k], 10, 64)
		j.Fields[k] = strconv.FormatInt(v+n, 10)
	}
	if req.Heartbeat != 0 {
		add("heartbeat", req.Heartbeat)
	}
	for k, n := range req.Incr {
		add(k, n)
	}
	for k, v := range req.Set {
		j.Fields[k] = v
	}
	add("log_score", int64(len(req.Log)))
	return wire.UpdateResponse{LogAccepted: len(req.Log)}, nil
}

func (f *fakeNode) Abort(ctx context.Context, ident string) (wire.DoneResponse, error) {
	unlock, err := f.holding("abort "+ident, ident)
	if err != nil {
		return wire.DoneResponse{}, err
	}
	defer unlock()
	f.jobs[ident].Fields["aborted"] = "true"
	return wire.DoneResponse{Ident: ident, Aborted: true}, nil
}

func (f *fakeNode) Done(ctx context.Context, ident string) (wire.DoneResponse, error) {
	unlock, err := f.holding("done "+ident, ident)
	if err != nil {
		return wire.DoneResponse{}, err
	}
	defer unlock()
	delete(f.held, ident)
	return wire.DoneResponse{Ident: ident, Aborted: f.jobs[ident].Fields["aborted"] != ""}, nil
}

func (f *fakeNode) Report(ctx context.Context, fields map[string]string) (wire.PipelineResponse, error) {
	if err := f.record("report"); err != nil {
		return wire.PipelineResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.report = fields
	return wire.PipelineResponse{ID: "pipeline:apiid", Nickname: "key"}, nil
}

func (f *fakeNode) Unregister(ctx context.Context) (wire.PipelineResponse, error) {
	if err := f.record("unregister"); err != nil {
		return wire.PipelineResponse{}, err
	}
	return wire.PipelineResponse{ID: "pipeline:apiid"}, nil
}

// Control delivers what the test puts on f.events until ctx ends.
func (f *fakeNode) Control(ctx context.Context, fn func(client.Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-f.events:
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
}

// changeSettings changes a held job's settings as an operator would and
// sends the control event.
func (f *fakeNode) changeSettings(ident string, fields map[string]string, ignores []string) int64 {
	f.mu.Lock()
	j := f.jobs[ident]
	age, _ := strconv.ParseInt(j.Fields["settings_age"], 10, 64)
	age++
	j.Fields["settings_age"] = strconv.FormatInt(age, 10)
	for k, v := range fields {
		j.Fields[k] = v
	}
	if ignores != nil {
		j.Ignores = ignores
	}
	s := wire.Settings{Ident: ident, Age: age, DelayMin: j.Fields["delay_min"], DelayMax: j.Fields["delay_max"],
		Concurrency: j.Fields["concurrency"], AbortRequested: j.Fields["abort_requested"] != "", IgnorePatterns: j.Ignores}
	f.mu.Unlock()
	b, _ := json.Marshal(s)
	f.events <- client.Event{Name: wire.EventSettings, Data: b}
	return age
}

// startBridge serves a bridge over node on a loopback port.
func startBridge(t testing.TB, node Node) (*Bridge, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{Node: node, RetryFor: 2 * time.Second})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Serve(ln)
	}()
	t.Cleanup(func() {
		b.Close()
		<-done
	})
	return b, ln.Addr().String()
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

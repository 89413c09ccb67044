package pipelineapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// streamQueue is how many events a control stream may have waiting; a
// stream that falls that far behind is closed with a bye (the pipeline
// reconnects and gets every held job's settings again), never silently
// thinned.
const streamQueue = 256

// stream is one open control stream.
type stream struct {
	key  string
	ch   chan sseEvent
	once sync.Once
	bye  chan wire.Error // closed after the bye is set
	why  wire.Error
}

type sseEvent struct{ name, data string }

func (st *stream) close(code, reason string) {
	st.once.Do(func() {
		st.why = wire.Error{Error: code, Reason: reason}
		close(st.bye)
	})
}

func (st *stream) send(ev sseEvent) {
	select {
	case st.ch <- ev:
	default:
		st.close("overflow", "the stream fell behind; reconnect for the current settings")
	}
}

// sendKey queues an event on every stream of key.
func (t *term) sendKey(key, name string, v any) {
	ev := sseEvent{name: name, data: jsonString(v)}
	t.mu.Lock()
	var sts []*stream
	if ks := t.perKey[key]; ks != nil {
		for st := range ks.streams {
			sts = append(sts, st)
		}
	}
	t.mu.Unlock()
	for _, st := range sts {
		st.send(ev)
	}
}

func (t *term) closeAllStreams(code, reason string) {
	t.mu.Lock()
	var sts []*stream
	for _, ks := range t.perKey {
		for st := range ks.streams {
			sts = append(sts, st)
		}
	}
	t.mu.Unlock()
	for _, st := range sts {
		st.close(code, reason)
	}
}

// settingsChanged asks for ident's settings to be read and sent.
func (t *term) settingsChanged(ident string) {
	t.mu.Lock()
	t.settingsDue[ident] = true
	t.mu.Unlock()
	select {
	case t.settingsWake <- struct{}{}:
	default:
	}
}

// settingsLoop follows the jobs' settings channels and sends the settings
// of held jobs to their keys' streams.
func (t *term) settingsLoop(ctx context.Context) {
	var wg sync.WaitGroup
	run.Go(&wg, t.s.log, "job settings subscription", func() {
		run.Reconnect(ctx, t.s.log, "job settings subscription", run.PubSubBackoff, func(ctx context.Context) (bool, error) {
			return t.s.store.ListenJobSettings(ctx, func() {
				// Messages are lost while unsubscribed: send every
				// held job's settings again.
				t.mu.Lock()
				for id := range t.jobs {
					t.settingsDue[id] = true
				}
				t.mu.Unlock()
				t.settingsChanged("")
			}, func(ident, _ string) {
				t.mu.Lock()
				_, held := t.jobs[ident]
				t.mu.Unlock()
				if held {
					t.settingsChanged(ident)
				}
			})
		})
	})
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.settingsWake:
		}
		t.mu.Lock()
		due := t.settingsDue
		t.settingsDue = map[string]bool{}
		t.mu.Unlock()
		for ident := range due {
			if ident != "" {
				t.sendSettings(ctx, ident)
			}
		}
	}
}

// settingsOf builds the settings event of a job record.
func settingsOf(ident string, j *store.APIJob) wire.Settings {
	r := j.Record
	return wire.Settings{Ident: ident, Age: r.SettingsAge, DelayMin: r.DelayMin.Value, DelayMax: r.DelayMax.Value,
		Concurrency: r.Concurrency.Value, AbortRequested: r.AbortRequested,
		SuppressIgnoreReports: r.SuppressIgnoreReports, IgnorePatterns: nonNil(j.Ignores)}
}

// lostReason is why a key no longer holds a job whose record was read as
// rj (nil: gone): a record that names no pipeline was taken back by an
// operator (!reroute, `archivebot requeue`), and the pipeline must stop
// crawling it (doc/pipeline-api.md, A ban shows itself).
func lostReason(rj *store.APIJob) string {
	if rj != nil && rj.Record.PipelineID.Value == "" && rj.Record.FinishedAt.Value == "" {
		return wire.ReleasedRerouted + " an operator took the job back from this pipeline and queued it again; stop crawling it"
	}
	return "the job record is gone or names another pipeline"
}

// notHeldReason is the reason a released event gives for a write the
// store refused as not held (why): a job an operator took back reads as
// such (lostReason) whichever path notices first — the settings loop, or
// a write of counters batched before the reroute — so the pipeline is
// told to stop crawling it either way.
func (t *term) notHeldReason(ctx context.Context, ident, why string) string {
	if rj, err := t.s.store.APIReadJob(ctx, ident); err == nil && rj != nil {
		if r := lostReason(rj); strings.HasPrefix(r, wire.ReleasedRerouted) {
			return r
		}
	}
	return why
}

// sendSettings reads a held job's settings and sends them to its key.
func (t *term) sendSettings(ctx context.Context, ident string) {
	t.mu.Lock()
	j := t.jobs[ident]
	t.mu.Unlock()
	if j == nil {
		return
	}
	rj, err := t.s.store.APIReadJob(ctx, ident)
	var naj *store.NotAJobError
	if errors.As(err, &naj) || (err == nil && (rj == nil || rj.Record.PipelineID.Value != store.APIPipelineKey(j.key))) {
		t.release(j, lostReason(rj))
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			t.s.log.Warn("reading a job's settings failed; retrying", "ident", ident, "err", err)
			time.AfterFunc(readRetry.Wait(0), func() { t.settingsChanged(ident) })
		}
		return
	}
	t.mu.Lock()
	j.rec = rj.Record
	t.mu.Unlock()
	t.sendKey(j.key, wire.EventSettings, settingsOf(ident, rj))
}

// control serves GET /v1/control: server-sent events for the key's held
// jobs until the client goes, the key is revoked or the term ends.
func (s *Server) control(req *request) *refusal {
	t := req.t
	if err := t.loadHeld(req.r.Context(), req.key); err != nil {
		return storeRefusal(err)
	}
	if _, ok := req.w.(http.Flusher); !ok {
		return refuse(http.StatusInternalServerError, "internal", "streaming is not supported here")
	}
	st := &stream{key: req.key, ch: make(chan sseEvent, streamQueue), bye: make(chan wire.Error)}
	t.mu.Lock()
	ks := t.keyStateLocked(req.key)
	if len(ks.streams) >= s.opt.MaxStreams {
		t.mu.Unlock()
		return &refusal{status: http.StatusTooManyRequests, code: "rate_limited",
			reason: fmt.Sprintf("key %s has %d control streams open; at most %d", req.key, len(ks.streams), s.opt.MaxStreams), retryAfter: 5}
	}
	ks.streams[st] = struct{}{}
	var held []string
	for id, j := range t.jobs {
		if j.key == req.key {
			held = append(held, id)
		}
	}
	t.mu.Unlock()
	metrics.APIStreams(1)
	defer func() {
		t.mu.Lock()
		delete(ks.streams, st)
		t.mu.Unlock()
		metrics.APIStreams(-1)
	}()
	// A key revoked or replaced between the authentication and the
	// registration above (the refresh that closes streams of changed
	// keys may have run in between).
	if pub, _ := t.publicKey(req.key); pub == nil || !pub.Equal(req.pub) {
		st.close("revoked_key", "the key was revoked or replaced")
	}
	// The stream lives as long as the client reads it: no read deadline
	// (the server's ReadTimeout would end it), and a write deadline for
	// each write, so that a client that stops reading loses its stream
	// (and its slot) instead of blocking its writer for ever.
	rc := http.NewResponseController(req.w)
	rc.SetReadDeadline(time.Time{})
	write := func(f func()) bool {
		if d := s.opt.WriteTimeout; d > 0 {
			rc.SetWriteDeadline(time.Now().Add(d))
		} else {
			rc.SetWriteDeadline(time.Time{})
		}
		f()
		return rc.Flush() == nil
	}
	h := req.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	if !write(func() {
		req.w.WriteHeader(http.StatusOK)
		fmt.Fprint(req.w, ": archivebot pipeline API control stream\n\n")
	}) {
		return nil
	}
	sort.Strings(held)
	for _, id := range held {
		t.settingsChanged(id)
	}
	ping := time.NewTicker(s.opt.Ping)
	defer ping.Stop()
	ctx := req.r.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-st.bye:
			write(func() { fmt.Fprintf(req.w, "event: %s\ndata: %s\n\n", wire.EventBye, jsonString(st.why)) })
			return nil
		case ev := <-st.ch:
			ok := write(func() {
				fmt.Fprintf(req.w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
				// Send what else is queued in the same write.
				for more := true; more; {
					select {
					case ev := <-st.ch:
						fmt.Fprintf(req.w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
					default:
						more = false
					}
				}
			})
			if !ok {
				s.refusals.Refused("api_stream_slow_reader", addrClass(remoteIP(req.r.RemoteAddr)), "what", "control stream closed: the client stopped reading",
					"key", req.key, "write_timeout", s.opt.WriteTimeout)
				return nil
			}
		case <-ping.C:
			if !write(func() { fmt.Fprint(req.w, ": ping\n\n") }) {
				return nil
			}
		}
	}
}

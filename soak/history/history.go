// Package history is the soak's record of what happened: every command a
// scripted user sent and the reply it got, every channel line, every take
// and end of a job by a pipeline, every fault, every sample of the
// processes' resources and every probe of the node's view of a job. The
// runner (package soak) writes it as JSON lines while the soak runs; the
// checker (soak/check) reads it back, with Redis's state at the end, and
// decides every invariant from it alone, so a run can be checked again
// later, or by hand.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kind says what an Event records.
type Kind string

// The kinds of event. Each says which of Event's fields it fills.
const (
	// Send: a scripted IRC user sent a command. Actor (nick), Channel,
	// Text (the line), ID (unique per run, links the reply). A Send with
	// Fault "freeze-leader" is a command typed while the leader was
	// frozen, for it to hold (Target: the frozen node).
	Send Kind = "send"
	// Reply: the first bot line answering command ID, or Outcome
	// "timeout" when none came. Actor (nick), Channel, Text, ID,
	// Num["latency_ms"].
	Reply Kind = "reply"
	// Line: a line the observer saw in a channel (PRIVMSG or NOTICE),
	// replies included. Actor (sender), Channel, Text.
	Line Kind = "line"
	// Take: a pipeline took a job. Actor (pipeline name), Via (api,
	// bridge or direct), Target (its key name, for api and bridge),
	// Ident, URL.
	Take Kind = "take"
	//
	// A Take with Via ViaBridgeSelf is a bridge's own take (Actor: the
	// bridge, Target: its key): the bridge took the job through the API
	// for one of the pipelines behind it, which then takes it from the
	// bridge (a Take with Via "bridge" and the same Target: the hold
	// passes to it), or never gets it when it or the bridge went away in
	// the middle of the take (the job stays held by the key until the
	// reaper fails it). A Take with Via ViaProxy is the node's answer
	// to a take as the API proxy in between saw it (Target: the key
	// that asked): it passes on to the API pipeline's (or the bridge's)
	// own take of the job under that key, or, when the answer never
	// reached it, the job stays held by the key until the reaper fails
	// it.
	//
	// A Take with Outcome TakeRefused is a take the node refused (the
	// API proxy saw its answer): no job was handed. Target the key that
	// asked, Text the error's code (revoked_key, unknown_key, …),
	// Num["status"] the HTTP status. Invariant 3's evidence: a revoked
	// key that asked again and was refused.
	// JobEnd: a pipeline ended a job it held. Actor, Via, Ident, Outcome
	// (done, aborted, or abandoned when the pipeline died holding it or
	// let it go because the node refused its writes for it).
	JobEnd Kind = "jobend"
	// Pipe: a pipeline's life. Actor, Via, Outcome (started, died,
	// paused, resumed, restarted). A bridge's (re)start is one too (Via
	// ViaBridgeSelf): it releases what the bridge itself held.
	Pipe Kind = "pipe"
	// Revoke: a key's revocation returned (T is when it returned).
	// Target (key name).
	Revoke Kind = "revoke"
	// Fault: a fault window. Fault (its name: kill-leader,
	// freeze-leader, kill-redis-master, partition-node-redis,
	// partition-pipeline-node, partition-leader-irc, pause-pipeline,
	// clock-skew, revoke-waiting, restart-bridge), Outcome (start or
	// end), Target (what it hit).
	Fault Kind = "fault"
	// Sample: one reading of a process's resources. Actor (node-a,
	// node-b, redis, bridge-N), Num (rss_bytes, goroutines, fds,
	// redis_used_memory, …).
	Sample Kind = "sample"
	// Probe: the node's view of a job at a quiet point. Via (jobs_api,
	// status, dashboard), Ident, Outcome (the state it reported, or
	// "absent"), Text (the raw answer, cut).
	Probe Kind = "probe"
	// Quiet: a quiet point, when no fault is active and load has
	// drained. Outcome (start or end).
	Quiet Kind = "quiet"
	// Stream: a dashboard viewer's figures for an interval. Actor
	// (viewer), Via (v2 or upstream), Num (frames, entries,
	// dropped_reported, lag_p50_ms, lag_p99_ms; for v2, gaps: entries
	// missing from their job's score sequence, counted within one
	// connection, each skipped score once).
	Stream Kind = "stream"
	// Feed: a post a fake network received. Via (mastodon or bluesky),
	// Text, URL, Ident where it can be told.
	Feed Kind = "feed"
	// Leader: the node that holds the lease changed. Actor (the new
	// leader, or "" when none).
	Leader Kind = "leader"
	// Note: free text for a person reading the run (Text).
	Note Kind = "note"
	// Final: the run ended; Text names the file holding Redis's state
	// at the end (a redistest.Dump as JSON), relative to the run's
	// directory; T is when the dump was complete and Num["dump_started"]
	// (UNIX seconds) when it began: Redis is read key by key, and what
	// changes meanwhile may or may not be in the dump.
	Final Kind = "final"
)

// Vias of the takes recorded between the node and a pipeline (see
// Take): a relay's hold passes to the pipeline that then takes the job
// under the same key.
const (
	// ViaBridgeSelf is the Via of a bridge's own Take and of its Pipe
	// events.
	ViaBridgeSelf = "bridge-self"
	// ViaProxy is the Via of a take the node answered with a job, seen
	// by the soak's API proxy (Actor "api-proxy", Target: the key).
	ViaProxy = "api-proxy"
)

// TakeRefused is the Outcome of a Take the node refused (see Take).
const TakeRefused = "refused"

// TakeUnsureMS is the Num of a pipeline's Take printed just after the
// soak thawed the process (SIGCONT): how many milliseconds before T the
// take may have been made. A take in flight when the process was stopped
// is made in Redis while it is stopped, and printed after the thaw.
const TakeUnsureMS = "unsure_ms"

// Refused reports whether e is a take the node refused rather than a job
// handed out.
func Refused(e Event) bool { return e.Kind == Take && e.Outcome == TakeRefused }

// Relayed reports whether via is one of a take recorded between the node
// and the pipeline (ViaBridgeSelf, ViaProxy).
func Relayed(via string) bool { return via == ViaBridgeSelf || via == ViaProxy }

// Event is one line of the history. Only the fields its Kind names are
// set.
type Event struct {
	T       time.Time          `json:"t"`
	Kind    Kind               `json:"kind"`
	Actor   string             `json:"actor,omitempty"`
	Channel string             `json:"channel,omitempty"`
	Text    string             `json:"text,omitempty"`
	ID      int64              `json:"id,omitempty"`
	Ident   string             `json:"ident,omitempty"`
	URL     string             `json:"url,omitempty"`
	Via     string             `json:"via,omitempty"`
	Target  string             `json:"target,omitempty"`
	Outcome string             `json:"outcome,omitempty"`
	Fault   string             `json:"fault,omitempty"`
	Num     map[string]float64 `json:"num,omitempty"`
}

// Recorder appends events to a file; it is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	now func() time.Time
	err error
}

// Create starts a history at path, truncating any file there.
func Create(path string) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &Recorder{f: f, w: w, enc: json.NewEncoder(w), now: time.Now}, nil
}

// Add records e, stamping it with the current time when e.T is zero. The
// first write error is kept and returned by Close.
func (r *Recorder) Add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.T.IsZero() {
		e.T = r.now()
	}
	if r.err == nil {
		r.err = r.enc.Encode(e)
	}
}

// Flush writes buffered events to the file.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	err := r.Flush()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read returns every event of the history in r, in file order.
func Read(r io.Reader) ([]Event, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	var out []Event
	for {
		var e Event
		err := dec.Decode(&e)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("history: event %d: %w", len(out)+1, err)
		}
		out = append(out, e)
	}
}

// ReadFile reads the history at path.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

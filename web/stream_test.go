package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// tap forwards the firehose to the hub and tells the test what arrived,
// so tests wait on signals rather than on time.
type tap struct {
	hub    *Hub
	mu     sync.Mutex
	logs   map[string]int // entries per ident
	events []news.JobEvent
	ch     chan struct{}
}

func (t *tap) StreamLog(job *record.Job, entries []record.LogEntry) {
	t.hub.StreamLog(job, entries)
	t.mu.Lock()
	t.logs[job.Ident] += len(entries)
	t.mu.Unlock()
	t.poke()
}

func (t *tap) StreamEvent(ev news.JobEvent) {
	t.hub.StreamEvent(ev)
	t.mu.Lock()
	t.events = append(t.events, ev)
	t.mu.Unlock()
	t.poke()
}

func (t *tap) poke() {
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// waitFor blocks until cond (checked under the tap's lock) holds.
func (t *tap) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.After(20 * time.Second)
	for {
		t.mu.Lock()
		ok := cond()
		t.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-t.ch:
		case <-deadline:
			t.mu.Lock()
			defer t.mu.Unlock()
			tb.Fatalf("timed out waiting for %s; events so far: %+v", what, t.events)
		}
	}
}

func (t *tap) hasEvent(ident, event string) bool {
	for _, e := range t.events {
		if e.Ident == ident && e.Event == event {
			return true
		}
	}
	return false
}

// streamRig is the stream of a node: updates listener, firehose, hub and
// both listeners, over one backend.
type streamRig struct {
	b      *redistest.Backend
	store  *store.Store
	hub    *Hub
	tap    *tap
	fh     *coordinator.Firehose
	main   *httptest.Server // the whole API
	second *httptest.Server // http.stream_listen: /stream only
	pipe   *pipelinesim.Pipeline
	joined chan struct{}
}

// holdWrites makes every client "slow": each write waits until the
// returned gate is closed. A write that starts waiting tells entered, if
// it has room (nil: no one is told).
func (r *streamRig) holdWrites(entered chan struct{}) chan struct{} {
	gate := make(chan struct{})
	block := func(*client) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
	}
	r.hub.beforeWrite.Store(&block)
	return gate
}

// newStreamRig starts the rig; with manual, the hub is not run: the test
// calls Flush itself.
func newStreamRig(t *testing.T, b *redistest.Backend, opt HubOptions, manual bool) *streamRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := quietLogger()
	r := &streamRig{b: b, store: store.New(b.Client), joined: make(chan struct{}, 16)}
	opt.Logger = log
	r.hub = NewHub(opt)
	r.hub.onJoin = func() { r.joined <- struct{}{} }
	r.tap = &tap{hub: r.hub, logs: map[string]int{}, ch: make(chan struct{}, 1)}
	r.fh = coordinator.NewFirehose(r.store, r.tap, coordinator.FirehoseConfig{WorkingInterval: 10 * time.Millisecond}, log)
	up := coordinator.NewUpdates(r.store, log)
	subscribed := make(chan struct{}, 1)
	up.OnUpdate(r.fh.Notify)
	up.OnSubscribe(func(ctx context.Context) {
		r.fh.CatchUp(ctx)
		select {
		case subscribed <- struct{}{}:
		default:
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); up.Run(ctx) }()
	<-subscribed
	r.fh.Start(ctx)
	<-r.fh.Ready()
	if !manual {
		wg.Add(1)
		go func() { defer wg.Done(); r.hub.Run(ctx) }()
	}
	srv := New(Options{Store: r.store, Hub: r.hub, Logger: log})
	r.main = httptest.NewServer(srv.Handler())
	r.second = httptest.NewServer(srv.StreamHandler())
	r.pipe = pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "streampipe"})
	if err := r.pipe.Report(ctx, "Running"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.main.Close()
		r.second.Close()
		cancel()
		r.fh.Stop()
		r.hub.shutdown()
		wg.Wait()
	})
	return r
}

// queueAndTake registers a job for url and lets the simulated pipeline
// take it.
func (r *streamRig) queueAndTake(t *testing.T, id, url string) *pipelinesim.Job {
	t.Helper()
	ctx := context.Background()
	err := r.store.Register(ctx, store.NewJob{Ident: id, URL: url, FetchDepth: "inf", Slug: "x-inf",
		StartedBy: "alice", StartedIn: "#archivebot", DelayMin: 250, DelayMax: 375, Concurrency: 3,
		SettingsAge: 1, Queue: "pending", Note: "a note"})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	j, err := r.pipe.Take(ctx)
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %v, %v (want %s)", j, err, id)
	}
	return j
}

// dial opens a stream client; it returns once the hub counts it.
func (r *streamRig) dial(t *testing.T, base, query, origin string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/stream" + query
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := websocket.Dialer{EnableCompression: true}
	c, resp, err := d.Dial(u, h)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", u, err, resp)
	}
	if !strings.Contains(resp.Header.Get("Sec-Websocket-Extensions"), "permessage-deflate") {
		t.Errorf("no permessage-deflate negotiated: %q", resp.Header.Get("Sec-Websocket-Extensions"))
	}
	t.Cleanup(func() { c.Close() })
	select {
	case <-r.joined:
	case <-time.After(10 * time.Second):
		t.Fatal("the hub never counted the client")
	}
	return c
}

// dialV2 opens a client of our protocol (?v=2, more parameters in more)
// on the main listener and reads its hello.
func (r *streamRig) dialV2(t *testing.T, more string) *websocket.Conn {
	t.Helper()
	c := r.dial(t, r.main.URL, "?v=2"+more, "")
	readV2(t, c) // hello
	return c
}

func readJSON(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("frame is not a JSON object: %v: %s", err, b)
	}
	return m
}

// The fields upstream's dashboard.js (dashboard/assets/scripts/dashboard.js)
// reads from a frame of /stream and from /logs/recent:
//   - every frame: type, job_data
//   - download (_renderDownloadLine): response_code, wget_code, url,
//     is_warning, is_error
//   - ignore (_renderIgnoreLine): url, pattern, source
//   - stdout (_renderStdoutLine): message (its lines matched against
//     "Finished RsyncUpload for Item", "Script requested immediate stop",
//     "Received item ")
//   - job_data (handleData, _createLogContainer, getTotalResponses,
//     applyFilter): ident, url, started_at, started_by, note, r1xx, r2xx,
//     r3xx, r4xx, r5xx, runk, bytes_downloaded, items_queued,
//     items_downloaded, concurrency, delay_min, delay_max,
//     suppress_ignore_reports
var (
	dashboardEntryFields = map[string][]string{
		"download": {"type", "response_code", "wget_code", "url", "is_warning", "is_error"},
		"ignore":   {"type", "url", "pattern", "source"},
		"stdout":   {"type", "message"},
	}
	dashboardJobFields = []string{"ident", "url", "started_at", "started_by", "note",
		"r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "bytes_downloaded", "items_queued",
		"items_downloaded", "concurrency", "delay_min", "delay_max", "suppress_ignore_reports"}
)

// checkDashboardFrame checks that m carries what dashboard.js reads; it
// returns the entry type.
func checkDashboardFrame(t *testing.T, m map[string]any, where string) string {
	t.Helper()
	typ, _ := m["type"].(string)
	fields, ok := dashboardEntryFields[typ]
	if !ok {
		t.Errorf("%s: type %q, which dashboard.js asserts on: %v", where, typ, m)
		return typ
	}
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("%s: %s entry lacks %q: %v", where, typ, f, m)
		}
	}
	jd, ok := m["job_data"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no job_data object: %v", where, m)
	}
	for _, f := range dashboardJobFields {
		if _, ok := jd[f]; !ok {
			t.Errorf("%s: job_data lacks %q", where, f)
		}
	}
	return typ
}

// TestStreamUpstreamCompat is upstream's dashboard against the node: a
// client from another origin on the second listener (and on the main
// one) gets one frame per download, ignore and stdout entry with job_data,
// nothing of other types, the end-of-job stdout line; /logs/recent as the
// page loads it carries the same fields.
func TestStreamUpstreamCompat(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, false)
		ctx := context.Background()
		j := r.queueAndTake(t, "compatjob", "http://compat.example/")
		if err := j.AddCounters(ctx, 5_000_000, 3, 10); err != nil {
			t.Fatal(err)
		}
		const origin = "http://dashboard.example.org"
		second := r.dial(t, r.second.URL, "", origin)
		main := r.dial(t, r.main.URL, "", origin)

		j.LogStdout(ctx, fmt.Sprintf(pipelinesim.StdoutReceived, j.Ident))
		for _, code := range []int{200, 301, 404, 500, 0} {
			j.LogDownload(ctx, fmt.Sprintf("http://compat.example/%d", code), code)
		}
		j.LogIgnore(ctx, "http://compat.example/x.css", `\.css$`, "global")
		j.Log(ctx, `{"type":"progress","what":"a type dashboard.js does not know"}`)
		j.Log(ctx, `not json`)
		r.tap.waitFor(t, "the entries", func() bool { return r.tap.logs[j.Ident] >= 9 })

		// /logs/recent, as the page loads it: XHR from the page's origin
		// with Accept: application/json.
		req, _ := http.NewRequest("GET", r.main.URL+"/logs/recent?cb=123", nil)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var recent []map[string]any
		json.NewDecoder(resp.Body).Decode(&recent)
		resp.Body.Close()
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("/logs/recent without Access-Control-Allow-Origin: *")
		}
		if len(recent) == 0 {
			t.Fatal("/logs/recent is empty")
		}
		for i, m := range recent {
			checkDashboardFrame(t, m, fmt.Sprintf("/logs/recent[%d]", i))
		}

		j.LogStdout(ctx, fmt.Sprintf(pipelinesim.StdoutFinished, j.Ident))
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]*websocket.Conn{"stream_listen": second, "listen": main} {
			var types []string
			for {
				m := readJSON(t, c)
				typ := checkDashboardFrame(t, m, name)
				types = append(types, typ)
				jd := m["job_data"].(map[string]any)
				if jd["ident"] != j.Ident || jd["url"] != "http://compat.example/" {
					t.Errorf("%s: job_data ident/url %v %v", name, jd["ident"], jd["url"])
				}
				// Upstream sends the raw hash: every value a string.
				for k, v := range jd {
					if _, ok := v.(string); !ok {
						t.Errorf("%s: job_data %s = %v is not a string", name, k, v)
					}
				}
				if typ == "stdout" && strings.HasPrefix(m["message"].(string), "Finished RsyncUpload for Item") {
					break
				}
			}
			want := "stdout download download download download download ignore stdout"
			if got := strings.Join(types, " "); got != want {
				t.Errorf("%s: frame types %q, want %q", name, got, want)
			}
		}
	})
}

// TestStreamRefusesNonWebSocket: a plain GET of /stream is a 426 with a
// clear message; an unknown protocol version is a 400.
func TestStreamRefusesNonWebSocket(t *testing.T) {
	r := newStreamRig(t, redistest.Mini(t), HubOptions{}, false)
	for path, want := range map[string]int{"/stream": 426, "/stream?v=3": 400} {
		resp, err := http.Get(r.main.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(r.second.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("second listener /status = %d, want 404", resp.StatusCode)
	}
}

// v2frame is a frame of our protocol.
type v2frame struct {
	Seq     uint64                       `json:"seq"`
	N       int                          `json:"n"`
	Entries []map[string]any             `json:"entries"`
	Jobs    map[string]map[string]string `json:"jobs"`
	Events  []news.JobEvent              `json:"events"`
	Dropped int                          `json:"dropped"`
	// RelayDropped: the entries per job the leader's API log publisher
	// dropped (stream_relaydrop_test.go).
	RelayDropped map[string]int `json:"relay_dropped"`
	Hello        map[string]any `json:"hello"`
	Subscribed   map[string]any `json:"subscribed"`
	Error        string         `json:"error"`
}

func readV2(t *testing.T, c *websocket.Conn) v2frame {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var f v2frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("frame: %v: %s", err, b)
	}
	if f.N != len(f.Entries) {
		t.Errorf("n = %d but %d entries", f.N, len(f.Entries))
	}
	return f
}

// TestStreamV2Filters: per-job subscription (from the query, then changed
// by a message) and the errors-only filter are applied by the server;
// job events reach every client whatever its filter.
func TestStreamV2Filters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		ctx := context.Background()
		only := r.dial(t, r.main.URL, "?v=2&jobs=v2job1", "")
		errs := r.dial(t, r.main.URL, "?v=2&errors=1", "")
		for _, c := range []*websocket.Conn{only, errs} {
			if h := readV2(t, c).Hello; h == nil || h["protocol"] != 2.0 {
				t.Fatalf("first frame is not hello: %v", h)
			}
		}
		j1 := r.queueAndTake(t, "v2job1", "http://one.example/")
		j2 := r.queueAndTake(t, "v2job2", "http://two.example/")
		r.tap.waitFor(t, "started events", func() bool {
			return r.tap.hasEvent(j1.Ident, "started") && r.tap.hasEvent(j2.Ident, "started")
		})
		for _, j := range []*pipelinesim.Job{j1, j2} {
			j.LogDownload(ctx, j.Fields["url"]+"ok", 200)
			j.LogDownload(ctx, j.Fields["url"]+"bad", 500)
		}
		r.tap.waitFor(t, "entries", func() bool { return r.tap.logs[j1.Ident] == 2 && r.tap.logs[j2.Ident] == 2 })
		r.hub.Flush()

		// Each client: the events frame, then its own log frame.
		for name, c := range map[string]*websocket.Conn{"jobs=v2job1": only, "errors=1": errs} {
			// Every client gets every job event whatever its filter: the
			// history's "queued" (published by register) and "started".
			ev := readV2(t, c)
			var events []string
			for _, e := range ev.Events {
				events = append(events, e.Ident+" "+e.Event)
			}
			sort.Strings(events)
			if got := strings.Join(events, ","); got != "v2job1 queued,v2job1 started,v2job2 queued,v2job2 started" {
				t.Errorf("%s: events %q", name, got)
			}
			logs := readV2(t, c)
			var got []string
			for _, e := range logs.Entries {
				got = append(got, fmt.Sprint(e["ident"], " ", e["response_code"]))
				if logs.Jobs[e["ident"].(string)]["url"] == "" {
					t.Errorf("%s: no job hash for %v", name, e["ident"])
				}
			}
			if name == "errors=1" {
				// One entry per job: the order across jobs is the order the
				// firehose read them in, which nothing promises.
				sort.Strings(got)
			}
			want := map[string]string{"jobs=v2job1": "v2job1 200,v2job1 500", "errors=1": "v2job1 500,v2job2 500"}[name]
			if strings.Join(got, ",") != want {
				t.Errorf("%s: entries %q, want %q", name, strings.Join(got, ","), want)
			}
			if logs.Seq != ev.Seq {
				t.Errorf("%s: events and entries of one batch have seq %d and %d", name, ev.Seq, logs.Seq)
			}
		}

		// Change the subscription: acknowledged, then applied.
		only.WriteJSON(map[string]any{"subscribe": []string{"v2job2"}, "errors_only": true})
		if s := readV2(t, only).Subscribed; fmt.Sprint(s) != "map[errors_only:true subscribe:[v2job2]]" {
			t.Errorf("subscribed notice %v", s)
		}
		only.WriteJSON(map[string]any{"subscribe": 5})
		if e := readV2(t, only).Error; !strings.Contains(e, "subscribe") {
			t.Errorf("bad subscription: error %q", e)
		}
		j1.LogDownload(ctx, "http://one.example/bad2", 503)
		j2.LogDownload(ctx, "http://two.example/ok2", 200)
		j2.LogDownload(ctx, "http://two.example/bad2", 502)
		r.tap.waitFor(t, "entries", func() bool { return r.tap.logs[j1.Ident] == 3 && r.tap.logs[j2.Ident] == 4 })
		r.hub.Flush()
		f := readV2(t, only)
		if len(f.Entries) != 1 || f.Entries[0]["url"] != "http://two.example/bad2" {
			t.Errorf("after resubscribing: %v", f.Entries)
		}
	})
}

// TestStreamNoMissedEndOfJob: a client that stops reading while its log
// frames overflow its queue loses old log frames (and is told how many),
// but still gets the end of every job: finished, aborted and failed (with
// the reason), derived by the firehose without anyone publishing events.
func TestStreamNoMissedEndOfJob(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{QueueV2: 8}, true)
		ctx := context.Background()
		c := r.dialV2(t, "")
		// The client is now "slow": nothing is written.
		gate := r.holdWrites(nil)
		jobs := []*pipelinesim.Job{
			r.queueAndTake(t, "endfin", "http://fin.example/"),
			r.queueAndTake(t, "endabort", "http://abort.example/"),
			r.queueAndTake(t, "endfail", "http://fail.example/"),
		}
		// The firehose sees jobs start by looking at working: wait until it
		// has, as a pipeline's job would be seen running for a while.
		r.tap.waitFor(t, "started events", func() bool {
			return r.tap.hasEvent("endfin", "started") && r.tap.hasEvent("endabort", "started") &&
				r.tap.hasEvent("endfail", "started")
		})
		const frames = 30
		for i := 1; i <= frames; i++ {
			jobs[0].LogDownload(ctx, fmt.Sprintf("http://fin.example/%d", i), 200)
			r.tap.waitFor(t, "entry", func() bool { return r.tap.logs[jobs[0].Ident] == i })
			r.hub.Flush()
		}
		jobs[0].LogStdout(ctx, fmt.Sprintf(pipelinesim.StdoutFinished, jobs[0].Ident))
		if err := jobs[0].Done(ctx); err != nil {
			t.Fatal(err)
		}
		jobs[1].LogStdout(ctx, pipelinesim.StdoutAborted)
		if err := jobs[1].Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if err := jobs[1].Done(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.FailJob(ctx, jobs[2].Ident, "failed by op"); err != nil {
			t.Fatal(err)
		}
		r.tap.waitFor(t, "the three end events", func() bool {
			return r.tap.hasEvent("endfin", "finished") && r.tap.hasEvent("endabort", "aborted") &&
				r.tap.hasEvent("endfail", "failed")
		})
		r.hub.Flush()
		close(gate) // the client reads again

		// Events of other tests' jobs can come too: the real Redis's
		// pub/sub is one for every database, shared by the packages'
		// tests running at once.
		want := map[string]string{"endfin": "finished", "endabort": "aborted", "endfail": "failed"}
		ends := map[string]string{}
		dropped, entries := 0, 0
		for len(ends) < 3 {
			f := readV2(t, c)
			dropped += f.Dropped
			entries += f.N
			for _, e := range f.Events {
				if _, ours := want[e.Ident]; ours && (e.Event == "finished" || e.Event == "aborted" || e.Event == "failed") {
					ends[e.Ident] = e.Event
					if e.Event == "failed" && !strings.Contains(string(e.Detail), "failed by op") {
						t.Errorf("failed event without the reason: %s", e.Detail)
					}
				}
			}
		}
		if fmt.Sprint(ends) != fmt.Sprint(want) {
			t.Errorf("end events %v, want %v", ends, want)
		}
		if dropped == 0 {
			t.Errorf("the client was never told it lost log frames (%d entries received)", entries)
		}
		t.Logf("received %d entries, told %d dropped", entries, dropped)
	})
}

// TestStreamOverflowOfEventsCloses: when a client's queue holds only job
// events and another comes, the server closes it (1008) rather than lose
// an event; job events published on the channel are deduplicated.
func TestStreamOverflowOfEventsCloses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{QueueV2: 2}, true)
		ctx := context.Background()
		c := r.dialV2(t, "")
		entered := make(chan struct{}, 1)
		gate := r.holdWrites(entered)
		publish := func(ident, event string) {
			doc := fmt.Sprintf(`{"ts":1732900000.5,"ident":%q,"event":%q,"by":"alice","detail":{"url":"http://x.example/"}}`, ident, event)
			if err := b.Client.Publish(ctx, store.ChannelJobEvents, doc).Err(); err != nil {
				t.Fatal(err)
			}
		}
		publish("ovf1", "queued")
		publish("ovf1", "queued") // a duplicate: dropped
		publish("ovf1", "settings")
		r.tap.waitFor(t, "two events", func() bool { return len(r.tap.events) == 2 })
		r.hub.Flush() // frame 1 (being written, blocked)
		<-entered
		publish("ovf2", "queued")
		r.tap.waitFor(t, "event", func() bool { return len(r.tap.events) == 3 })
		r.hub.Flush() // frame 2
		publish("ovf3", "queued")
		r.tap.waitFor(t, "event", func() bool { return len(r.tap.events) == 4 })
		r.hub.Flush() // frame 3
		publish("ovf4", "queued")
		r.tap.waitFor(t, "event", func() bool { return len(r.tap.events) == 5 })
		r.hub.Flush() // frame 4: the queue (2) is full of events: close
		close(gate)
		var got []string
		for {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, msg, err := c.ReadMessage()
			if err != nil {
				if !websocket.IsCloseError(err, CloseOverflow) {
					t.Errorf("closed with %v, want code %d", err, CloseOverflow)
				}
				break
			}
			var f v2frame
			json.Unmarshal(msg, &f)
			for _, e := range f.Events {
				got = append(got, e.Ident+" "+e.Event)
			}
		}
		if want := "ovf1 queued,ovf1 settings,ovf2 queued,ovf3 queued"; strings.Join(got, ",") != want {
			t.Errorf("events before the close: %q, want %q", strings.Join(got, ","), want)
		}
	})
}

// An oversized log entry is never loaded whole:
// /logs/recent leaves it out (and still answers the entries around it),
// the live stream leaves it out, and the analyzer counts it invalid and
// moves past it.
func TestOversizedLogEntry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, false)
		ctx := context.Background()
		j := r.queueAndTake(t, "bigjob", "http://big.example/")
		c := r.dial(t, r.main.URL, "", "")
		huge := `{"type":"stdout","message":"` + strings.Repeat("x", 2<<20) + `"}`
		j.LogDownload(ctx, "http://big.example/before", 200)
		j.Log(ctx, huge)
		j.LogDownload(ctx, "http://big.example/after", 200)
		r.tap.waitFor(t, "the entries", func() bool { return r.tap.logs[j.Ident] >= 3 })

		// The stream: the two downloads, never the huge entry.
		for _, want := range []string{"/before", "/after"} {
			m := readJSON(t, c)
			if u, _ := m["url"].(string); !strings.HasSuffix(u, want) {
				t.Fatalf("stream frame %v, want the download of %s", m["type"], want)
			}
		}

		resp, err := http.Get(r.main.URL + "/logs/recent")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) > 64<<10 {
			t.Fatalf("/logs/recent sent %d bytes: the oversized entry was loaded", len(body))
		}
		var got []map[string]any
		if err := json.Unmarshal(body, &got); err != nil || len(got) != 2 {
			t.Fatalf("/logs/recent: %v, %d entries, want the 2 downloads", err, len(got))
		}

		if b := countLog(t, r.store, j.Ident); b.Entries != 3 || b.Invalid != 1 || b.Oversized != 1 || b.Counts.R2xx != 2 {
			t.Fatalf("counted %+v; want 3 entries, 1 invalid (oversized), 2 2xx", b)
		}
	})
}

// A client message that deflate shrank below the 64 KiB read limit but
// that inflates far past it (a 48 KB frame
// carrying 50 MB) closes the connection with 1009 before it is inflated:
// the node never holds it.
func TestStreamDecompressionBomb(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		for _, srv := range []string{r.main.URL + "?v=2", r.second.URL} {
			base, q, _ := strings.Cut(srv, "?")
			if q != "" {
				q = "?" + q
			}
			c := r.dial(t, base, q, "")
			c.EnableWriteCompression(true)
			c.SetCompressionLevel(9)
			bomb := []byte(`{"subscribe":["` + strings.Repeat("a", 32<<20) + `"]}`)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			// The node may close before the client has written it all.
			werr := c.WriteMessage(websocket.TextMessage, bomb)
			bomb = nil
			var err error
			for err == nil {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, _, err = c.ReadMessage()
			}
			runtime.ReadMemStats(&after)
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) && werr == nil {
				t.Errorf("%s: the bomb ended with %v, want close 1009", srv, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("%s: %d MB allocated while reading a 32 MB message", srv, grew>>20)
			}
		}
	})
}

// Slow clients of our protocol with different subscriptions each hold
// at most ClientBytes (4 MiB) of frames, not 256 frames of any size: past that the oldest are dropped and the client is
// told how many entries it lost.
func TestStreamSlowClientsBoundedInBytes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		ctx := context.Background()
		const clients, rounds = 3, 120 // 120 frames of 60 KB: 7 MB each
		var jobs []*pipelinesim.Job
		var conns []*websocket.Conn
		for i := range clients {
			id := fmt.Sprintf("slowjob%d", i)
			jobs = append(jobs, r.queueAndTake(t, id, fmt.Sprintf("http://slow%d.example/", i)))
			conns = append(conns, r.dialV2(t, "&jobs="+id))
		}
		gate := r.holdWrites(nil)
		big := strings.Repeat("y", 60<<10)
		for k := 1; k <= rounds; k++ {
			for _, j := range jobs {
				j.Log(ctx, fmt.Sprintf(`{"type":"stdout","message":"%d %s"}`, k, big))
			}
			r.tap.waitFor(t, "entries", func() bool {
				for _, j := range jobs {
					if r.tap.logs[j.Ident] < k {
						return false
					}
				}
				return true
			})
			r.hub.Flush()
		}
		if q := r.hub.queued.Load(); q > clients*DefaultClientBytes {
			t.Errorf("%d bytes queued for %d clients, bound %d each", q, clients, DefaultClientBytes)
		}
		r.hub.beforeWrite.Store(nil)
		close(gate)
		for i, c := range conns {
			got, dropped := 0, 0
			for got+dropped < rounds {
				f := readV2(t, c)
				got += f.N
				dropped += f.Dropped
			}
			if dropped < rounds/3 || got > 4<<20/(60<<10)+1 {
				t.Errorf("client %d: %d entries received, told %d dropped; want at most 4 MiB held", i, got, dropped)
			}
		}
	})
}

// http.stream_listen serves upstream's protocol alone, as doc/web.md
// says: ?v=2 there is a 400 that names where it is.
func TestStreamListenUpstreamOnly(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		r := newStreamRig(t, b, HubOptions{}, true)
		d := websocket.Dialer{}
		_, resp, err := d.Dial("ws"+strings.TrimPrefix(r.second.URL, "http")+"/stream?v=2", nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("?v=2 on stream_listen: %v, %v; want a 400", err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "http.listen") {
			t.Errorf("the refusal does not say where v2 is: %s", body)
		}
		r.dial(t, r.second.URL, "", "")     // upstream's protocol still is
		r.dial(t, r.second.URL, "?v=1", "") // by name too
		r.dial(t, r.main.URL, "?v=2", "")   // and ours on the main listener
	})
}

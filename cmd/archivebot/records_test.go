package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
	"github.com/archiveteam/archivebot-go/web"
)

// Which record speaks for a job (doc/protocol.md): one table, every
// reader of a job × every
// situation. A failure record speaks only while no newer registration of
// the ident exists; a hash without the fields the node registers (url) is
// a ghost, re-created by a pipeline's late writes: never shown as a job,
// never blocking !a.

// lines is a bot.Replier that keeps what the bot said.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (r *lines) Reply(s string)   { r.mu.Lock(); r.l = append(r.l, s); r.mu.Unlock() }
func (r *lines) Private(s string) { r.Reply(s) }
func (r *lines) String() string   { r.mu.Lock(); defer r.mu.Unlock(); return strings.Join(r.l, " | ") }

// streamSink records what the live stream would send the dashboard.
type streamSink struct {
	mu     sync.Mutex
	logged map[string]int
	events []news.JobEvent
}

func (s *streamSink) StreamLog(job *record.Job, es []record.LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logged[job.Ident] += len(es)
}

func (s *streamSink) StreamEvent(ev news.JobEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

// view is what one reader says about a job: its state ("" when the reader
// does not know the job), and the URL it shows.
type view struct{ state, url string }

func TestWhichRecordSpeaks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		bt := bot.New(s, bot.Options{Catalog: bot.DefaultCatalog()})
		say := func(text string) string {
			var out lines
			bt.Handle(ctx, bot.Request{Nick: "alice", Channel: "#ab", Rank: bot.RankOp, Text: text}, &out)
			return out.String()
		}
		srv := httptest.NewServer(web.New(web.Options{Store: s}).Handler())
		defer srv.Close()
		get := func(path string, v any) int {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
			req.Header.Set("Accept", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode == http.StatusOK {
				if err := json.NewDecoder(res.Body).Decode(v); err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
			}
			return res.StatusCode
		}
		sink := &streamSink{logged: map[string]int{}}
		fh := coordinator.NewFirehose(s, sink, coordinator.FirehoseConfig{}, nil)
		pl := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "pl"})

		// expire does what the 5 s expiry after a fail does.
		expire := func(id string) {
			b.Client.Del(ctx, store.KeyJob(id), store.KeyLog(id), store.KeyIgnores(id))
		}
		// queue runs !a; taken jobs go to pending:pl, which the pipeline
		// checks first, so the take gets this job and no other.
		queue := func(url string, opts ...string) string {
			t.Helper()
			if got := say(strings.Join(append([]string{"!a", url}, opts...), " ")); !strings.Contains(got, "Queued") {
				t.Fatalf("!a %s: %q", url, got)
			}
			_, id, _ := ident.FromURL(url)
			return id
		}
		take := func() *pipelinesim.Job {
			t.Helper()
			j, err := pl.Take(ctx)
			if err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
			return j
		}
		fail := func(id string) {
			t.Helper()
			if got := say("!fail " + id); !strings.Contains(got, "failed") {
				t.Fatalf("!fail %s: %q", id, got)
			}
		}

		type situation struct {
			name string
			url  string
			// setup makes the situation and returns the ident and the
			// pipeline job whose late writes come after (nil: none).
			setup func(url string) (string, *pipelinesim.Job)
			want  string // state every reader must show; "" = unknown job
			// active: /jobs lists it; finished: /finished lists it.
			active, finished bool
		}
		situations := []situation{
			{name: "live job", url: "http://live.example/", want: "running", active: true,
				setup: func(url string) (string, *pipelinesim.Job) {
					id := queue(url, "--pipeline=pl")
					return id, take()
				}},
			{name: "failed, then registered again", url: "http://again.example/", want: "queued", active: true,
				setup: func(url string) (string, *pipelinesim.Job) {
					id := queue(url)
					fail(id)
					expire(id)
					queue(url) // `!a` queues it again: the newer registration
					return id, nil
				}},
			{name: "ghost hash after a fail", url: "http://ghost.example/", want: "failed", finished: true,
				setup: func(url string) (string, *pipelinesim.Job) {
					id := queue(url, "--pipeline=pl")
					j := take()
					fail(id)
					expire(id)
					return id, j // the pipeline's late writes re-create the hash
				}},
			{name: "ghost hash alone", url: "http://lonely.example/", want: "",
				setup: func(url string) (string, *pipelinesim.Job) {
					_, id, _ := ident.FromURL(url)
					b.Client.HIncrBy(ctx, store.KeyJob(id), "heartbeat", 1)
					return id, nil
				}},
			{name: "failed only", url: "http://failed.example/", want: "failed", finished: true,
				setup: func(url string) (string, *pipelinesim.Job) {
					id := queue(url)
					fail(id)
					expire(id)
					return id, nil
				}},
		}

		type reader struct {
			name string
			read func(id string) view
		}
		readers := []reader{
			{"!status IDENT", func(id string) view {
				got := say("!status " + id)
				switch {
				case strings.Contains(got, "don't know anything"):
					return view{}
				case strings.Contains(got, " Failed"):
					return view{"failed", got}
				case strings.Contains(got, "In progress"):
					return view{"running", got}
				case strings.Contains(got, "In queue"):
					return view{"queued", got}
				}
				return view{"?", got}
			}},
			{"/jobs/IDENT (and the job page, which shows it)", func(id string) view {
				var v struct {
					State   string `json:"state"`
					URL     string `json:"url"`
					Failure any    `json:"failure"`
				}
				if code := get("/jobs/"+id, &v); code == http.StatusNotFound {
					return view{}
				}
				if (v.Failure != nil) != (v.State == "failed") {
					return view{"failure record beside state " + v.State, v.URL}
				}
				return view{v.State, v.URL}
			}},
			{"/jobs", func(id string) view {
				var v struct {
					Jobs []struct{ Ident, URL, State string }
				}
				get("/jobs", &v)
				for _, j := range v.Jobs {
					if j.Ident == id {
						return view{j.State, j.URL}
					}
				}
				return view{"not listed", ""}
			}},
			{"/finished", func(id string) view {
				var v []struct {
					Ident  string  `json:"ident"`
					URL    *string `json:"url"`
					Failed *bool   `json:"failed"`
				}
				get("/finished", &v)
				for _, j := range v {
					if j.Ident == id {
						st := "finished"
						if j.Failed != nil && *j.Failed {
							st = "failed"
						}
						u := ""
						if j.URL != nil {
							u = *j.URL
						}
						return view{st, u}
					}
				}
				return view{"not listed", ""}
			}},
			{"dashboard (live stream)", func(id string) view {
				if err := fh.Broadcast(ctx, id); err != nil {
					t.Fatal(err)
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if sink.logged[id] > 0 {
					return view{"streamed", ""}
				}
				return view{"not streamed", ""}
			}},
			{"archivebot job IDENT", func(id string) view {
				code, out, _ := admin(t, b, "job", id, "-json")
				if code != 0 {
					return view{}
				}
				var v struct{ State, URL string }
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Fatalf("archivebot job -json: %v in %q", err, out)
				}
				return view{v.State, v.URL}
			}},
			{"pipeline API job read", func(id string) view {
				j, err := s.APIReadJob(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j == nil {
					return view{}
				}
				return view{"job", j.Record.URL.Value}
			}},
		}

		for _, sit := range situations {
			id, late := sit.setup(sit.url)
			if late != nil {
				if err := late.Heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
				if err := late.AddCounters(ctx, 100, 2, 3); err != nil {
					t.Fatal(err)
				}
				if _, err := late.LogDownload(ctx, sit.url+"late", 200); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range readers {
				got := r.read(id)
				want := view{sit.want, sit.url}
				switch r.name {
				case "/jobs":
					if !sit.active {
						want = view{"not listed", ""}
					}
				case "/finished":
					want = view{"not listed", ""}
					if sit.finished {
						want = view{sit.want, sit.url}
					}
				case "dashboard (live stream)":
					want = view{"not streamed", ""}
					if sit.name == "live job" {
						want = view{"streamed", ""}
					}
				case "pipeline API job read":
					want = view{}
					if sit.want == "running" || sit.want == "queued" {
						want = view{"job", sit.url}
					}
				}
				if want.state == "" {
					want.url = ""
				}
				if r.name == "!status IDENT" && got.state == want.state {
					got.url = want.url // a line, checked for its state only
				}
				if got != want {
					t.Errorf("%s: %s says %+v, want %+v", sit.name, r.name, got, want)
				}
			}
			// A ghost never blocks !a.
			if strings.HasPrefix(sit.name, "ghost") {
				if got := say("!a " + sit.url); !strings.Contains(got, "Queued") {
					t.Errorf("%s: !a %s says %q, want it queued over the ghost", sit.name, sit.url, got)
				} else if v := readers[1].read(id); v.state != "queued" || v.url != sit.url {
					t.Errorf("%s: after !a, /jobs/IDENT says %+v, want queued", sit.name, v)
				}
			}
		}
	})
}

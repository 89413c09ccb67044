package bot

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// referenceLine is one line of testdata/reference/public.jsonl: a command
// run through the upstream Ruby bot against a real Redis, its replies and
// the complete Redis state after it.
type referenceLine struct {
	Line    string                     `json:"line"`
	Replies []string                   `json:"replies"`
	Note    string                     `json:"note"`
	State   map[string]redistest.Entry `json:"state"`
}

// fix is what we do instead of upstream on a line, and why (doc/upstream.md).
type fix struct {
	// cmd must occur in the line: it guards against a fix aimed at the
	// wrong line.
	cmd     string
	why     string
	replies []string
	// state edits the reference state after the line into ours; nil
	// means the state is the reference's.
	state func(st map[string]redistest.Entry)
}

const refIdent = "9tfs9o6557kgozy0wlqrzal3o"

// fixes are keyed by the line's index in public.jsonl (0-based).
var fixes = map[int]fix{
	15: {cmd: "!a <", why: "doc/upstream.md: `!a <` from a voiced non-op was dropped silently; every refusal gets a reply",
		replies: []string{"carol: Sorry, only channel operators may use that command."}},
	18: {cmd: "--large --pipeline", why: "doc/upstream.md: `--large` with `--pipeline` or `!ao` did not say whether the job was queued",
		replies: []string{"carol: Sorry, --large has no effect when combined with --pipeline or !ao; the job was not queued. Leave out --large (or --pipeline) and try again."}},
	32: {cmd: "!whereis", why: "doc/upstream.md: `!whereis` on a job with no pipeline raised; it must say so",
		replies: []string{"carol: Job " + refIdent + " is not on a pipeline."}},
	33: {cmd: "!pending", why: "doc/upstream.md: `!pending` showed only `pending`; show every queue, next to run first",
		replies: []string{
			"[privmsg bob] 9 pending jobs in 4 queues, next to run first:",
			"[privmsg bob] pending:superfast (1):",
			"[privmsg bob] 1. https://example.com/list.txt (y6ma7xsxtsacvovu5csxltjn)",
			"[privmsg bob] pending-large (1):",
			"[privmsg bob] 1. http://big.example.com/ (aiuwp58pv503lsnrkzu5id696)",
			"[privmsg bob] pending (5):",
			"[privmsg bob] 1. http://example.com/ (9tfs9o6557kgozy0wlqrzal3o)",
			"[privmsg bob] 2. http://example.com/blog/ (5cn2jso6prf8hw2qfpzyyk8zh)",
			"[privmsg bob] 3. ftp://ftp.example.org/pub/ (2sav7kxlo07xuzhq48m0kzzg9)",
			"[privmsg bob] 4. https://example.com/urls.txt (74zjuuy6nx9nm5uoe0lwxeieg)",
			"[privmsg bob] 5. http://slow.example.com/ (a087j9dfq1d3v2hwayupyfvvi)",
			"[privmsg bob] pending-ao (2):",
			"[privmsg bob] 1. http://example.net/page.html (57eicfrj8h8dah55yc2az0f5)",
			"[privmsg bob] 2. https://example.org/only (2k6q5c2r3i2dxrlld39f8vwrm)",
		}},
	34: {cmd: "!expire", why: "doc/upstream.md: `!expire` from a non-op was dropped silently; every refusal gets a reply",
		replies: []string{"carol: Sorry, only channel operators may use that command."}},
	37: {cmd: "!status", why: "doc/upstream.md: `pending-large` was not counted by `!status`",
		replies: []string{"bob: Job status: 0 completed, 0 aborted, 0 failed, 0 in progress, 5 pending, 2 pending-ao, 2 pending in other queues (1 in pending-large)"}},
	41: {cmd: "!igoff", why: "doc/upstream.md: ignore-report toggles need voice like other settings changes",
		replies: []string{"dave: Sorry, only channel operators or voiced users may use that command."},
		state: func(st map[string]redistest.Entry) {
			setField(st, refIdent, "settings_age", "4")
		}},
	44: {cmd: "!abort", why: "doc/upstream.md: `!abort` of a queued job finishes it as aborted at once, as a pipeline would",
		replies: []string{"carol: Job " + refIdent + " for http://example.com/ was aborted before it started."},
		state: func(st map[string]redistest.Entry) {
			h := st[refIdent]
			h.TTL = "set"
			m := h.Value.(map[string]any)
			m["aborted"] = "true"
			st[refIdent] = h
			ig := st[refIdent+"_ignores"]
			ig.TTL = "set"
			st[refIdent+"_ignores"] = ig
			delete(st, "pending")
			st["jobs_aborted"] = redistest.Entry{Type: "string", Value: "1", TTL: -1}
			st["finish_notifications"] = redistest.Entry{Type: "list", TTL: -1, Value: []any{
				`{"aborted":true,"fetch_depth":"inf","pipeline_id":null,"queued_at":"QUEUED_AT","started_by":"alice","started_in":"#archivebot","url":"http://example.com/","url_file":null}`,
			}}
		}},
}

func setField(st map[string]redistest.Entry, key, field, value string) {
	e := st[key]
	e.Value.(map[string]any)[field] = value
	st[key] = e
}

func loadReference(t *testing.T) []referenceLine {
	t.Helper()
	f, err := os.Open("../testdata/reference/public.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []referenceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l referenceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("public.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, l)
	}
	return out
}

// recorder is a Replier that writes replies as the transcripts do.
type recorder struct {
	nick    string
	replies []string
}

func (r *recorder) Reply(text string)   { r.replies = append(r.replies, r.nick+": "+text) }
func (r *recorder) Private(text string) { r.replies = append(r.replies, "[privmsg "+r.nick+"] "+text) }

// parseLine splits "MODE NICK CHANNEL TEXT".
func parseLine(t *testing.T, line string) Request {
	t.Helper()
	parts := strings.SplitN(line, " ", 4)
	if len(parts) != 4 {
		t.Fatalf("bad transcript line %q", line)
	}
	rank := map[string]Rank{"o": RankOp, "v": RankVoice, "-": RankNone}[parts[0]]
	return Request{Nick: parts[1], Channel: parts[2], Rank: rank, Text: parts[3]}
}

func referenceCatalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := LoadCatalog("../testdata/reference/ignore_sets", "../testdata/reference/user_agents", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// normalizeState makes a dump comparable with a reference state: JSON
// round trip (so types match), volatile fields dropped, queued_at in
// finish notifications replaced by a placeholder.
func normalizeState(t *testing.T, st map[string]redistest.Entry) map[string]any {
	t.Helper()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	// Keys of our own (archivebot:…, such as the queue index) are not
	// part of the upstream layout the transcript records.
	for k := range out {
		if strings.HasPrefix(k, "archivebot:") {
			delete(out, k)
		}
	}
	for _, e := range out {
		m := e.(map[string]any)
		switch v := m["value"].(type) {
		case map[string]any:
			for _, f := range []string{"queued_at", "started_at", "finished_at", "ts"} {
				delete(v, f)
			}
		case []any:
			for i, item := range v {
				if s, ok := item.(string); ok && strings.HasPrefix(s, "{") {
					var doc map[string]any
					if json.Unmarshal([]byte(s), &doc) == nil {
						// A number, as pipelines write it: volatile.
						if _, ok := doc["queued_at"].(float64); ok {
							doc["queued_at"] = "QUEUED_AT"
							b, _ := json.Marshal(doc)
							v[i] = string(b)
						}
					}
				}
			}
		}
	}
	return out
}

// TestReferenceTranscript replays every line of the upstream transcript
// through the command layer and compares the replies and the complete
// Redis state after each line. Lines where doc/upstream.md lists a fix of an upstream bug
// assert the fixed behaviour and say which bug.
func TestReferenceTranscript(t *testing.T) {
	lines := loadReference(t)
	storetest.Each(t, func(t *testing.T, be *redistest.Backend, st *store.Store, ctx context.Context) {
		b := New(st, Options{Catalog: referenceCatalog(t)})
		for i, l := range lines {
			name := fmt.Sprintf("%02d %s", i, l.Line)
			if l.Line == "@flush" {
				if err := be.Client.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			req := parseLine(t, l.Line)
			rec := &recorder{nick: req.Nick}
			b.Handle(ctx, req, rec)

			wantReplies := l.Replies
			wantState := l.State
			if f, ok := fixes[i]; ok {
				if !strings.Contains(l.Line, f.cmd) {
					t.Fatalf("fix for line %d expects %q, the line is %q", i, f.cmd, l.Line)
				}
				t.Logf("line %d: asserting the fix, not upstream: %s", i, f.why)
				wantReplies = f.replies
				if f.state != nil {
					wantState = copyState(t, l.State)
					f.state(wantState)
				}
			}
			if wantReplies == nil {
				wantReplies = []string{}
			}
			if rec.replies == nil {
				rec.replies = []string{}
			}
			if d := cmp.Diff(wantReplies, rec.replies); d != "" {
				t.Errorf("%s: replies (-want +got):\n%s", name, d)
			}
			got, err := redistest.Dump(ctx, be.Client)
			if err != nil {
				t.Fatal(err)
			}
			// Every state-changing command also leaves its outcome
			// record, archivebot:cmd:ID (a key of our own with a random
			// id, expiring in minutes; see bot/outcome.go). Upstream had
			// none; every upstream key is still compared byte for byte.
			for k := range got {
				if strings.HasPrefix(k, store.KeyCommand("")) {
					delete(got, k)
				}
			}
			if d := cmp.Diff(normalizeState(t, wantState), normalizeState(t, got)); d != "" {
				t.Fatalf("%s: redis state (-want +got):\n%s", name, d)
			}
		}
	})
}

func copyState(t *testing.T, st map[string]redistest.Entry) map[string]redistest.Entry {
	t.Helper()
	raw, _ := json.Marshal(st)
	var out map[string]redistest.Entry
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out == nil {
		out = map[string]redistest.Entry{}
	}
	return out
}

package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// rerouteState is what a reroute may change, for "nothing changed" checks.
func rerouteState(t *testing.T, b *redistest.Backend, ident string, keys ...string) string {
	t.Helper()
	ctx := context.Background()
	c := b.Client
	job, _ := c.HGetAll(ctx, store.KeyJob(ident)).Result()
	var fields []string
	for k, v := range job {
		fields = append(fields, k+"="+v)
	}
	slices.Sort(fields)
	out := fmt.Sprintf("job %v\nworking %v\npending %v\npending-ao %v\nhistory %d\nadmin notices %q\n", fields,
		list(t, b, store.KeyWorking), list(t, b, store.KeyPending), list(t, b, store.KeyPendingAO),
		c.LLen(ctx, store.KeyHistory(ident)).Val(), list(t, b, store.KeyAdminNotices))
	for _, k := range keys {
		m, _ := c.SMembers(ctx, store.KeyPipelineKeyJobs(k)).Result()
		a, _ := c.SMembers(ctx, store.KeyPipelineKeyAvoid(k)).Result()
		slices.Sort(m)
		slices.Sort(a)
		out += fmt.Sprintf("%s held %v avoid %v\n", k, m, a)
	}
	return out
}

// A running job is taken away from its key and queued again at the head
// of its queue, with the key avoiding its site: the key's next take skips
// it, another key takes it next, and the old holder's writes are refused.
func TestRerouteRunningJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		queueJob(t, ctx, st, "jb", "erin", "http://www.Example.com/x", store.KeyPending)
		queueJob(t, ctx, st, "other", "erin", "http://other.org/", store.KeyPending)
		queueJob(t, ctx, st, "third", "erin", "http://third.org/", store.KeyPending)
		if got := take(t, ctx, st, "pipe-a"); got != "jb" {
			t.Fatalf("pipe-a took %q, want jb", got)
		}
		if err := st.APIUpdate(ctx, "pipe-a", "jb", map[string]int64{"bytes_downloaded": 100, "r4xx": 48}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.BanCheck(ctx, "jb", "pipe-a", "example.com", 2, []string{"403"}); err != nil {
			t.Fatal(err)
		}
		before, _ := st.GetJob(ctx, "jb")
		sub := b.Client.Subscribe(ctx, store.ChannelJob("jb"))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}

		r, err := st.Reroute(ctx, "jb", "", "opnick")
		if err != nil {
			t.Fatalf("reroute: %v", err)
		}
		want := store.RerouteResult{Ident: "jb", URL: "http://www.Example.com/x", Running: true, From: "pipe-a",
			Queue: store.KeyPending, Avoid: "pipe-a", Rule: "example.com", RuleAdded: true}
		if *r != want {
			t.Fatalf("result %+v, want %+v", *r, want)
		}
		after, _ := st.GetJob(ctx, "jb")
		for _, f := range []string{"started_at", "pipeline_id", "bytes_downloaded", "r4xx"} {
			if v, ok := after.Fields[f]; ok {
				t.Errorf("field %s = %q kept; a re-take must start clean", f, v)
			}
		}
		for _, f := range []string{"url", "delay_min", "delay_max", "concurrency", "queued_at", "started_by"} {
			if after.Fields[f] != before.Fields[f] {
				t.Errorf("field %s = %q, was %q; the job's settings must stay", f, after.Fields[f], before.Fields[f])
			}
		}
		if after.Fields["settings_age"] == before.Fields["settings_age"] {
			t.Errorf("settings_age not bumped (%s): the node serving the key is not told", after.Fields["settings_age"])
		}
		if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != after.Fields["settings_age"] {
			t.Errorf("job channel message %v %v, want the new age %s", msg, err, after.Fields["settings_age"])
		}
		if ig, _ := b.Client.SMembers(ctx, store.KeyIgnores("jb")).Result(); len(ig) != 2 {
			t.Errorf("ignore patterns %v, want the two kept", ig)
		}
		if n, _ := b.Client.Exists(ctx, store.KeyBanCheck("jb")).Result(); n != 0 {
			t.Error("the ban check is kept: the next pipeline's first responses would not be checked")
		}
		if got := list(t, b, store.KeyWorking); slices.Contains(got, "jb") {
			t.Errorf("working %v still holds jb", got)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"third", "other", "jb"}) {
			t.Errorf("pending %v, want jb at the head (the right end)", got)
		}
		if m, _ := b.Client.SIsMember(ctx, store.KeyPipelineKeyJobs("pipe-a"), "jb").Result(); m {
			t.Error("pipe-a's held set still has jb")
		}
		h, _ := st.History(ctx, "jb", 1)
		if len(h) != 1 || h[0].Event != store.EventRerouted || h[0].By != "opnick" || h[0].Detail["from"] != "pipe-a" {
			t.Errorf("last history entry %+v, want rerouted by opnick from pipe-a", h)
		}
		// The old holder's writes are refused and change nothing.
		var nh *store.NotHeldError
		if err := st.APIUpdate(ctx, "pipe-a", "jb", map[string]int64{"bytes_downloaded": 5}, nil); !errors.As(err, &nh) {
			t.Errorf("old holder's update: %v, want NotHeldError", err)
		}
		if _, err := st.APIDone(ctx, "pipe-a", "jb"); !errors.As(err, &nh) {
			t.Errorf("old holder's done: %v, want NotHeldError", err)
		}
		if err := st.APIAbort(ctx, "pipe-a", "jb"); !errors.As(err, &nh) {
			t.Errorf("old holder's abort: %v, want NotHeldError", err)
		}
		if got := take(t, ctx, st, "pipe-a"); got != "other" {
			t.Fatalf("pipe-a took %q, want other (it avoids example.com now)", got)
		}
		if got := take(t, ctx, st, "pipe-b"); got != "jb" {
			t.Fatalf("pipe-b took %q, want jb (at the head)", got)
		}
		if rules, _ := st.PipelineKeyRules(ctx, "pipe-a"); !slices.Equal(rules.Avoid, []string{"example.com"}) {
			t.Errorf("pipe-a avoids %v", rules.Avoid)
		}
	})
}

// --avoid names another key; a running job's holder lets go all the same.
// A rule the list already has is not added twice.
func TestRerouteAvoidOtherKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		if err := st.SetPipelineKeyAvoid(ctx, "pipe-b", []string{"example.com"}); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "jb", "erin", "http://a.b.example.com/", store.KeyPendingAO)
		take(t, ctx, st, "pipe-a", store.KeyPendingAO)
		r, err := st.Reroute(ctx, "jb", "pipe-b", "op")
		if err != nil {
			t.Fatal(err)
		}
		if r.From != "pipe-a" || r.Avoid != "pipe-b" || r.RuleAdded || r.Queue != store.KeyPendingAO {
			t.Errorf("result %+v", *r)
		}
		if got := list(t, b, store.KeyPendingAO); !slices.Equal(got, []string{"jb"}) {
			t.Errorf("pending-ao %v", got)
		}
	})
}

// A queued job moves to the head of its queue; it needs --avoid.
func TestRerouteQueuedJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		queueJob(t, ctx, st, "jb", "erin", "http://example.com/", store.KeyPending)
		queueJob(t, ctx, st, "other", "erin", "http://other.org/", store.KeyPending)
		before := rerouteState(t, b, "jb", "pipe-a")
		if _, err := st.Reroute(ctx, "jb", "", "op"); !errors.Is(err, store.ErrRerouteNothing) {
			t.Fatalf("reroute of a queued job without --avoid: %v", err)
		}
		if after := rerouteState(t, b, "jb", "pipe-a"); after != before {
			t.Fatalf("a refusal changed\n%s\nto\n%s", before, after)
		}
		r, err := st.Reroute(ctx, "jb", "pipe-a", "op")
		if err != nil {
			t.Fatal(err)
		}
		if r.Running || r.From != "" || !r.RuleAdded || r.Queue != store.KeyPending {
			t.Errorf("result %+v", *r)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"other", "jb"}) {
			t.Errorf("pending %v, want jb at the head", got)
		}
	})
}

// A job whose host is an IP address is rerouted without a rule.
func TestRerouteIPHostAddsNoRule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		queueJob(t, ctx, st, "jb", "erin", "http://192.0.2.7:8080/", store.KeyPending)
		take(t, ctx, st, "pipe-a")
		r, err := st.Reroute(ctx, "jb", "", "op")
		if err != nil {
			t.Fatal(err)
		}
		if r.Rule != "" || r.RuleAdded || !strings.Contains(r.NoRule, "192.0.2.7") {
			t.Errorf("result %+v, want no rule and why", *r)
		}
		if rules, _ := st.PipelineKeyRules(ctx, "pipe-a"); len(rules.Avoid) != 0 {
			t.Errorf("pipe-a avoids %v", rules.Avoid)
		}
		if got := list(t, b, store.KeyPending); !slices.Equal(got, []string{"jb"}) {
			t.Errorf("pending %v", got)
		}
	})
}

// Every refusal says why and changes nothing.
func TestRerouteRefusalsChangeNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "full")
		var many []string
		for i := range store.MaxAvoidRules {
			many = append(many, fmt.Sprintf("site%d.org", i))
		}
		if err := st.SetPipelineKeyAvoid(ctx, "full", many); err != nil {
			t.Fatal(err)
		}
		queueJob(t, ctx, st, "jb", "erin", "http://example.com/", store.KeyPending)
		take(t, ctx, st, "pipe-a")
		// subject is the job refused: its state is what must not change.
		subject := "jb"
		before := rerouteState(t, b, subject, "pipe-a", "full")
		// Each refusal is asked for with and without the channel's line:
		// neither queues one.
		reroute := func(ident, avoid string) (*store.RerouteResult, error) {
			t.Helper()
			r, err := st.RerouteReported(ctx, ident, avoid, "op")
			if r != nil {
				return r, err
			}
			if _, err2 := st.Reroute(ctx, ident, avoid, "op"); fmt.Sprint(err2) != fmt.Sprint(err) {
				t.Errorf("reroute %s: %v without the line, %v with it", ident, err2, err)
			}
			return r, err
		}
		check := func(name string, err error, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", name, err, want)
			}
			if after := rerouteState(t, b, subject, "pipe-a", "full"); after != before {
				t.Fatalf("%s changed\n%s\nto\n%s", name, before, after)
			}
		}
		_, err := reroute("nosuch", "")
		check("unknown ident", err, store.ErrNoJob)
		_, err = reroute("jb", "nokey")
		check("unknown key", err, store.ErrNoSuchPipelineKey)
		_, err = reroute("jb", "full")
		var full *store.AvoidFullError
		if !errors.As(err, &full) || full.N != int64(store.MaxAvoidRules) || !strings.Contains(err.Error(), "full") {
			t.Errorf("full avoid list: %v", err)
		}
		check("full avoid list", nil, nil)

		// A job a direct pipeline runs.
		queueJob(t, ctx, st, "direct", "erin", "http://example.org/", store.KeyPending)
		b.Client.LRem(ctx, store.KeyPending, 1, "direct")
		b.Client.LPush(ctx, store.KeyWorking, "direct")
		b.Client.HSet(ctx, store.KeyJob("direct"), "pipeline_id", "pipeline:deadbeef", "started_at", "1")
		subject = "direct"
		before = rerouteState(t, b, subject, "pipe-a", "full")
		_, err = reroute("direct", "pipe-a")
		var dp *store.DirectPipelineError
		if !errors.As(err, &dp) || dp.PipelineID != "pipeline:deadbeef" {
			t.Errorf("direct pipeline: %v", err)
		}
		check("direct pipeline", nil, nil)
		subject = "jb"

		// Abort requested.
		if res, _, err := st.Abort(ctx, "jb"); err != nil || res != store.AbortRequested {
			t.Fatal(res, err)
		}
		before = rerouteState(t, b, subject, "pipe-a", "full")
		_, err = reroute("jb", "")
		check("abort requested", err, store.ErrAbortRequested)

		// Finished.
		if _, err := st.APIDone(ctx, "pipe-a", "jb"); err != nil {
			t.Fatal(err)
		}
		before = rerouteState(t, b, subject, "pipe-a", "full")
		_, err = reroute("jb", "")
		check("finished", err, store.ErrJobFinished)
	})
}

// RerouteReported (`archivebot reroute`) queues the job's channel line in
// the reroute's own script run: exactly one admin notice, for started_in,
// saying what the script found (a running job taken back, a queued job
// moved), and no push of the client's own. Reroute (!reroute, which
// replies in the channel) queues none.
func TestRerouteReportedQueuesTheChannelLine(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		addKey(t, ctx, st, "pipe-b")
		queueJob(t, ctx, st, "jb", "erin", "http://www.Example.com/x", store.KeyPending)
		queueJob(t, ctx, st, "jc", "frank", "http://example.com/y", store.KeyPending)
		queueJob(t, ctx, st, "jd", "gina", "http://192.0.2.7/", store.KeyPending)
		if got := take(t, ctx, st, "pipe-a"); got != "jb" {
			t.Fatalf("pipe-a took %q, want jb", got)
		}
		notices := func() []store.AdminNotice {
			t.Helper()
			var out []store.AdminNotice
			for _, d := range list(t, b, store.KeyAdminNotices) {
				var n store.AdminNotice
				if err := json.Unmarshal([]byte(d), &n); err != nil {
					t.Fatalf("notice %q: %v", d, err)
				}
				out = append(out, n)
			}
			return out
		}
		h := &nameHook{}
		b.Client.AddHook(h)

		// A running job, its holder made to avoid the site.
		r, err := st.RerouteReported(ctx, "jb", "", "opnick")
		if err != nil {
			t.Fatalf("reroute: %v", err)
		}
		want := store.AdminNotice{Channel: "#archivebot", Text: "erin: Job jb for http://www.Example.com/x was rerouted by opnick (operator): " +
			"taken from pipe-a and queued again at the front of pending; pipe-a avoids example.com."}
		if got := notices(); len(got) != 1 || got[0] != want {
			t.Fatalf("admin notices %+v, want just %+v", got, want)
		}
		if r.Notice == nil || *r.Notice != want {
			t.Errorf("result's notice %+v, want %+v", r.Notice, want)
		}
		if pushes := h.pushes(); len(pushes) != 0 {
			t.Errorf("the client pushed %v itself: the line must go in the reroute's own script run", pushes)
		}

		// A queued job whose site pipe-a avoids already: the same
		// "avoids", true either way.
		r, err = st.RerouteReported(ctx, "jc", "pipe-a", "opnick")
		if err != nil || r.Running || r.RuleAdded {
			t.Fatalf("reroute of a queued job: %+v %v", r, err)
		}
		want2 := store.AdminNotice{Channel: "#archivebot", Text: "frank: Job jc for http://example.com/y was rerouted by opnick (operator): " +
			"moved to the front of pending; pipe-a avoids example.com."}
		if got := notices(); len(got) != 2 || got[1] != want2 {
			t.Fatalf("admin notices %+v, want %+v last", got, want2)
		}

		// No rule for an IP address: the line says so.
		r, err = st.RerouteReported(ctx, "jd", "pipe-b", "opnick")
		if err != nil || r.Notice == nil || !strings.HasSuffix(r.Notice.Text, "; pipe-b was given no rule: its host 192.0.2.7 has no registered domain to avoid.") {
			t.Fatalf("reroute of an IP host: %+v %v", r, err)
		}
		if got := notices(); len(got) != 3 || got[2] != *r.Notice {
			t.Fatalf("admin notices %+v", got)
		}

		// !reroute's path queues nothing.
		r, err = st.Reroute(ctx, "jc", "pipe-b", "opnick")
		if err != nil || r.Notice != nil {
			t.Fatalf("plain reroute: %+v %v", r, err)
		}
		if got := notices(); len(got) != 3 {
			t.Fatalf("plain reroute queued a line: %+v", got)
		}
		if pushes := h.pushes(); len(pushes) != 0 {
			t.Errorf("the client pushed %v itself", pushes)
		}
	})
}

// The channel and nick the line names are the script's: when they are
// not what the caller read, the script refuses and the caller reads again.
func TestRerouteReportedNamesTheChannelTheScriptFinds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		addKey(t, ctx, st, "pipe-a")
		queueJob(t, ctx, st, "jb", "erin", "http://example.com/", store.KeyPending)
		take(t, ctx, st, "pipe-a")
		// Between the read (a pipeline) and the script (EVALSHA), the
		// record changes its channel and nick once.
		b.Client.AddHook(&beforeScript{once: func() {
			b.Client.HSet(ctx, store.KeyJob("jb"), "started_in", "#other", "started_by", "zed")
		}})
		r, err := st.RerouteReported(ctx, "jb", "", "op")
		if err != nil {
			t.Fatal(err)
		}
		got := list(t, b, store.KeyAdminNotices)
		if len(got) != 1 || r.Notice == nil || r.Notice.Channel != "#other" || !strings.HasPrefix(r.Notice.Text, "zed: ") {
			t.Fatalf("notice %+v, queued %q; want one for #other naming zed", r.Notice, got)
		}
	})
}

// nameHook records the push commands a client sends itself.
type nameHook struct {
	mu    sync.Mutex
	names []string
}

func (h *nameHook) note(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		if n := c.Name(); n == "rpush" || n == "lpush" {
			h.names = append(h.names, n)
		}
	}
}

func (h *nameHook) pushes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.names)
}

func (h *nameHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *nameHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h *nameHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note(cmds...)
		return next(ctx, cmds)
	}
}

// beforeScript runs once before the first script a client sends.
type beforeScript struct {
	done atomic.Bool
	once func()
}

func (h *beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && h.done.CompareAndSwap(false, true) {
			h.once()
		}
		return next(ctx, cmd)
	}
}
func (h *beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

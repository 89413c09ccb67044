package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// eachStore runs fn on each backend (redistest.Each) with a store on it.
func eachStore(t *testing.T, fn func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context)) {
	t.Helper()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) { fn(t, b, store.NewStore(b.Client), context.Background()) })
}

// writesNothing runs fn, a step Redis must refuse, and fails the test
// (saying what, and the difference) if it changed the database.
func writesNothing(t *testing.T, b *redistest.Backend, what string, fn func()) {
	t.Helper()
	ctx := context.Background()
	before, _ := redistest.Dump(ctx, b.Client)
	fn()
	after, _ := redistest.Dump(ctx, b.Client)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("%s:\n%s", what, diff)
	}
}

// historyOf is the job's history as "event by WHO" strings.
func historyOf(t *testing.T, s *store.Store, id string) []string {
	t.Helper()
	es, err := s.History(context.Background(), id, store.HistoryMax)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Event + " by " + e.By
	}
	return out
}

// jobEvents subscribes to archivebot:job_events and returns what it got so
// far on each call.
func jobEvents(t *testing.T, b *redistest.Backend) func(n int) []string {
	t.Helper()
	ctx := context.Background()
	ps := b.Client.Subscribe(ctx, store.ChannelJobEvents)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	ch := ps.Channel()
	var got []string
	return func(n int) []string {
		for len(got) < n {
			select {
			case m := <-ch:
				got = append(got, m.Payload)
			case <-time.After(5 * time.Second):
				t.Fatalf("got %d job events, want %d: %q", len(got), n, got)
			}
		}
		return got
	}
}

// TestJobHistory drives one job through queue, three settings changes by
// two users, start, abort and the pipeline's finish, and checks that the
// history lists every step with who did it, that every entry was also
// published on archivebot:job_events, and that the list expires with the
// job.
func TestJobHistory(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		events := jobEvents(t, b)
		id := svcQueue(t, s, "http://history.example.com/", "alice", "#ab", store.KeyPending)
		changes := []store.Change{
			{Bump: 1, By: "alice", Set: map[string]string{"delay_min": "0", "delay_max": "0"}},
			{Bump: 1, By: "bob", Set: map[string]string{"concurrency": "5"}},
			{Bump: 1, By: "alice", AddPatterns: []string{"/calendar/"}},
		}
		for _, c := range changes {
			if _, err := s.ChangeSettings(ctx, id, c); err != nil {
				t.Fatal(err)
			}
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "hist-pipe"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		j := mustTake(t, ctx, p)
		if _, err := s.ScanStarts(ctx, true); err != nil {
			t.Fatal(err)
		}
		if res, _, err := s.AbortBy(ctx, id, "bob"); err != nil || res != store.AbortRequested {
			t.Fatalf("abort: %v %v", res, err)
		}
		if err := j.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		ann := newSvcAnnouncer("#ab")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		// A notice delivered again (a crash before its acknowledgement)
		// appends nothing more.
		if err := s.RecordJobEnd(ctx, id, true, p.Key()); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"queued by alice", "settings by alice", "settings by bob", "ignore_added by alice",
			"started by " + p.Key(), "aborted by bob", "aborted by " + p.Key(),
		}
		if diff := cmp.Diff(want, historyOf(t, s, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if d, err := s.JobDetail(ctx, id); err != nil || d == nil || len(d.History) != len(want) {
			t.Errorf("JobDetail history: %+v %v", d, err)
		}
		es, _ := s.History(ctx, id, store.HistoryMax)
		if es[4].Detail["pipeline"] != "hist-pipe" || es[1].Detail["set"] == nil {
			t.Errorf("details: started %v, settings %v", es[4].Detail, es[1].Detail)
		}
		published := events(len(want))
		raw, _ := b.Client.LRange(ctx, store.KeyHistory(id), 0, -1).Result()
		if diff := cmp.Diff(raw, published); diff != "" {
			t.Errorf("published events differ from the history (-history +published):\n%s", diff)
		}
		// The list expires with the job: an aborted job's record lives 5 s,
		// its history as long as a failure record.
		ttl, _ := b.Client.TTL(ctx, store.KeyHistory(id)).Result()
		if ttl <= store.HistoryEndedTTL-time.Minute || ttl > store.HistoryEndedTTL {
			t.Errorf("history TTL %v, want about %v", ttl, store.HistoryEndedTTL)
		}
		if otl, _ := b.Client.TTL(ctx, store.KeyOrigin(id)).Result(); otl <= 0 {
			t.Errorf("origin record TTL %v, want one", otl)
		}
		if b.Mini != nil {
			b.Mini.FastForward(store.HistoryEndedTTL + time.Second)
			if n, _ := b.Client.Exists(ctx, store.KeyHistory(id), store.KeyOrigin(id)).Result(); n != 0 {
				t.Errorf("history or origin still there after their TTL")
			}
		}
	})
}

// TestJobHistoryFinished: a finished job's history lives as long as its
// record (48 h), and !expire keeps it (with an "expired" entry).
func TestJobHistoryFinished(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://finished.example.com/", "carol", "#ab", store.KeyPendingAO)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
		j := mustTake(t, ctx, p)
		if err := j.Done(ctx); err != nil {
			t.Fatal(err)
		}
		if err := NewFinishNotifier(s, newSvcAnnouncer("#ab"), FinishConfig{}, svcLog(t)).runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.ExpireBy(ctx, id, "dave"); err != nil {
			t.Fatal(err)
		}
		// The job finished before any scan saw it start: no "started".
		want := []string{"queued by carol", "finished by " + p.Key(), "expired by dave"}
		if diff := cmp.Diff(want, historyOf(t, s, id)); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		ttl, _ := b.Client.TTL(ctx, store.KeyHistory(id)).Result()
		if ttl <= store.HistoryFinishedTTL-time.Minute || ttl > store.HistoryFinishedTTL {
			t.Errorf("history TTL %v, want about %v", ttl, store.HistoryFinishedTTL)
		}
		if n, _ := b.Client.Exists(ctx, store.KeyOrigin(id)).Result(); n != 0 {
			t.Errorf("origin record kept after !expire")
		}
	})
}

// TestHistoryCapped: at most HistoryMax entries, the newest kept.
func TestHistoryCapped(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	s := store.NewStore(b.Client)
	id := svcQueue(t, s, "http://capped.example.com/", "alice", "#ab", store.KeyPending)
	for i := 0; i < store.HistoryMax+20; i++ {
		if _, err := s.ChangeSettings(ctx, id, store.Change{Bump: 1, By: fmt.Sprintf("u%d", i), Set: map[string]string{"concurrency": "2"}}); err != nil {
			t.Fatal(err)
		}
	}
	h := historyOf(t, s, id)
	if len(h) != store.HistoryMax || h[len(h)-1] != fmt.Sprintf("settings by u%d", store.HistoryMax+19) {
		t.Fatalf("history has %d entries, last %q", len(h), h[len(h)-1])
	}
}

// TestStartNotices: a pipeline takes seven jobs; the five that want a
// notice get exactly one line each, the one that opted out and the !ao job
// none; every start is in the history; scanning again sends nothing.
func TestStartNotices(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		nodeStarted(t, s)
		var ids []string
		for i := 0; i < 5; i++ {
			ids = append(ids, queueNotify(t, s, fmt.Sprintf("http://start%d.example.com/", i), store.KeyPending, true))
		}
		optOut := queueNotify(t, s, "http://optout.example.com/", store.KeyPending, false)
		ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "starter"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 7; i++ {
			if j, err := p.Take(ctx); err != nil || j == nil {
				t.Fatalf("take %d: %v %v", i, j, err)
			}
		}
		ann := newSvcAnnouncer("#ab")
		n := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		for i := 0; i < 3; i++ {
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, l := range ann.take() {
			got = append(got, l.Text)
		}
		var want []string
		for _, id := range ids {
			j, _ := s.GetJob(ctx, id)
			want = append(want, fmt.Sprintf("bob: Your job for %s has started on starter. (%s)", j.URL.Value, id))
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("start lines (-want +got):\n%s", diff)
		}
		for _, id := range append(ids, optOut, ao) {
			if h := historyOf(t, s, id); len(h) != 2 || h[1] != "started by "+p.Key() {
				t.Errorf("history of %s: %q", id, h)
			}
		}
		if n, _ := b.Client.LLen(ctx, store.KeyStartProcessing).Result(); n != 0 {
			t.Errorf("%d notices left in delivery", n)
		}
	})
}

// nodeStarted runs a first start scan, as a node does when it starts:
// the jobs in `working` then (none, in these tests) are its baseline, and
// jobs taken afterwards get start notices.
func nodeStarted(t *testing.T, s *store.Store) {
	t.Helper()
	if _, err := s.ScanStarts(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

// TestStartNoticesBaseline (issue 18, finding 11): the first start against
// a Redis where pipelines already run jobs (a switch-over from upstream's
// node) announces none of them: they started before this node did, so
// "has started" would be untrue, and hundreds of lines would take the
// channel for minutes. Their starts are recorded; the count is logged. A
// job taken afterwards is announced, once; a restart announces nothing
// again.
func TestStartNoticesBaseline(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		var before []string
		for i := 0; i < 30; i++ {
			before = append(before, queueNotify(t, s, fmt.Sprintf("http://before%d.example.com/", i), store.KeyPending, true))
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "upstreamnode"})
		for range before {
			if j, err := p.Take(ctx); err != nil || j == nil {
				t.Fatalf("take: %v %v", j, err)
			}
		}
		ann := newSvcAnnouncer("#ab")
		logs, log := newLogCounter(t)
		n := NewStartNotifier(s, ann, StartConfig{Notify: true}, log)
		if err := n.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if lines := ann.take(); len(lines) != 0 {
			t.Fatalf("%d start lines for jobs running before the node's first start: %q", len(lines), lines)
		}
		logs.mu.Lock()
		said := slices.ContainsFunc(logs.lines, func(l string) bool {
			return strings.Contains(l, "get no start notice") && strings.Contains(l, "jobs=30")
		})
		logs.mu.Unlock()
		if !said {
			t.Error("the jobs left unannounced are not logged")
		}
		for _, id := range before[:3] {
			if h := historyOf(t, s, id); len(h) != 2 || h[1] != "started by "+p.Key() {
				t.Errorf("history of %s: %q", id, h)
			}
		}
		after := queueNotify(t, s, "http://after.example.com/", store.KeyPending, true)
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		// A restart (a new notifier) changes nothing: the baseline is in Redis.
		n = NewStartNotifier(s, ann, StartConfig{Notify: true}, log)
		for i := 0; i < 2; i++ {
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lines := ann.take()
		if len(lines) != 1 || !strings.Contains(lines[0].Text, "("+after+")") {
			t.Fatalf("lines after the first start: %q, want one for %s", lines, after)
		}
	})
}

// queueNotify registers a job for bob that asks for a start notice or not.
func queueNotify(t *testing.T, s *store.Store, url, queue string, notify bool) string {
	t.Helper()
	norm, id := identOfURL(t, url)
	err := s.Register(context.Background(), store.NewJob{Ident: id, URL: norm, FetchDepth: "inf", Slug: "s",
		StartedBy: "bob", StartedIn: "#ab", Queue: queue, NotifyStart: notify})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStartNoticeSurvivesCrash: a notice taken into delivery whose line was
// not written (IRC down, or the node killed between take and announce) is
// delivered by the next notifier, once.
func TestStartNoticeSurvivesCrash(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		nodeStarted(t, s)
		id := queueNotify(t, s, "http://crash.example.com/", store.KeyPending, true)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "crashy"})
		if err := p.Report(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Take(ctx); err != nil {
			t.Fatal(err)
		}
		ann := newSvcAnnouncer("#ab")
		ann.setDown(errIRCDown)
		first := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		if err := first.runOnce(ctx); !errors.Is(err, errIRCDown) {
			t.Fatalf("runOnce with IRC down: %v", err)
		}
		if n, _ := b.Client.LLen(ctx, store.KeyStartProcessing).Result(); n != 1 {
			t.Fatalf("%d notices in delivery, want 1", n)
		}
		ann.setDown(nil)
		second := NewStartNotifier(s, ann, StartConfig{Notify: true}, svcLog(t))
		for i := 0; i < 2; i++ {
			if err := second.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lines := ann.take()
		if len(lines) != 1 || !strings.Contains(lines[0].Text, "has started on crashy. ("+id+")") {
			t.Fatalf("lines %v", lines)
		}
	})
}

// TestStartNoticesDefault: a job without an origin record (queued by
// another program) follows notifier.start_notices, except !ao jobs; with
// start notices off nothing is announced but the start is recorded.
func TestStartNoticesDefault(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			b := redistest.Mini(t)
			ctx := context.Background()
			s := store.NewStore(b.Client)
			nodeStarted(t, s)
			inf := svcQueue(t, s, "http://inf.example.com/", "alice", "#ab", store.KeyPending)
			ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
			b.Client.Del(ctx, store.KeyOrigin(inf), store.KeyOrigin(ao))
			p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
			for i := 0; i < 2; i++ {
				if _, err := p.Take(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := s.ScanStarts(ctx, on)
			if err != nil {
				t.Fatal(err)
			}
			started, notices := sc.Started, sc.Notices
			wantNotices := int64(0)
			if on {
				wantNotices = 1
			}
			if started != 2 || notices != wantNotices {
				t.Fatalf("started %d, notices %d; want 2, %d", started, notices, wantNotices)
			}
		})
	}
}

// TestMove covers every outcome of !move with the state after it.
func TestMove(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		a := svcQueue(t, s, "http://a.example.com/", "alice", "#ab", store.KeyPending)
		bb := svcQueue(t, s, "http://b.example.com/", "alice", "#ab", store.KeyPending)
		c := svcQueue(t, s, "http://c.example.com/", "alice", "#ab", store.KeyPending)
		ao := svcQueue(t, s, "http://ao.example.com/", "alice", "#ab", store.KeyPendingAO)
		queue := func(q string) []string {
			v, _ := b.Client.LRange(ctx, q, 0, -1).Result()
			return v
		}
		// pending is [c b a]: a runs next.
		if from, err := s.Move(ctx, c, store.MoveFront, "op"); err != nil || from != store.KeyPending {
			t.Fatalf("front: %q %v", from, err)
		}
		if diff := cmp.Diff([]string{bb, a, c}, queue(store.KeyPending)); diff != "" {
			t.Errorf("after front (-want +got):\n%s", diff)
		}
		if _, err := s.Move(ctx, c, store.MoveBack, "op"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{c, bb, a}, queue(store.KeyPending)); diff != "" {
			t.Errorf("after back (-want +got):\n%s", diff)
		}
		if _, err := s.Move(ctx, a, store.KeyPendingLarge, "op"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Move(ctx, ao, "pending:fast", "op"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{c, bb}, queue(store.KeyPending)); diff != "" {
			t.Errorf("pending (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{a}, queue(store.KeyPendingLarge)); diff != "" {
			t.Errorf("pending-large (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{ao}, queue("pending:fast")); diff != "" {
			t.Errorf("pending:fast (-want +got):\n%s", diff)
		}
		if q, _ := b.Client.HGet(ctx, store.KeyOrigin(a), "queue").Result(); q != store.KeyPendingLarge {
			t.Errorf("origin queue of a: %q", q)
		}
		if ok, _ := b.Client.SIsMember(ctx, store.KeyQueues, "pending:fast").Result(); !ok {
			t.Errorf("pending:fast not in the queue index")
		}
		es, _ := s.History(ctx, a, 1)
		if len(es) != 1 || es[0].Event != store.EventMoved || es[0].Detail["from"] != store.KeyPending || es[0].Detail["to"] != store.KeyPendingLarge || es[0].By != "op" {
			t.Errorf("history entry of the move: %+v", es)
		}
		before, _ := redistest.Dump(ctx, b.Client)
		// Refusals write nothing.
		defer func() {
			if t.Failed() {
				t.Log(before)
			}
		}()
		for _, tc := range []struct {
			id, where string
			want      error
		}{
			{bb, store.KeyPendingAO, store.ErrWrongQueueKind},
			{ao, store.KeyPending, store.ErrWrongQueueKind},
			{bb, store.KeyPending, store.ErrSameQueue},
			{"nosuchjob", store.MoveFront, store.ErrNoJob},
		} {
			if _, err := s.Move(ctx, tc.id, tc.where, "op"); !errors.Is(err, tc.want) {
				t.Errorf("move %s to %s: %v, want %v", tc.id, tc.where, err, tc.want)
			}
		}
		if mid, _ := redistest.Dump(ctx, b.Client); !cmp.Equal(before, mid) {
			t.Errorf("refused moves changed Redis:\n%s", cmp.Diff(before, mid))
		}
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"})
		j, _ := p.Take(ctx) // takes a (pending-large is not checked: not large) or the next of pending
		if j == nil {
			t.Fatal("nothing taken")
		}
		writesNothing(t, b, "refused move changed Redis", func() {
			if _, err := s.Move(ctx, j.Ident, store.MoveFront, "op"); !errors.Is(err, store.ErrJobStarted) {
				t.Errorf("move of a running job: %v", err)
			}
		})
	})
}

// TestUserAgentQueuedOnly: the user agent of a queued job changes (history
// "useragent"); a running job's is refused with nothing written.
func TestUserAgentQueuedOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		id := svcQueue(t, s, "http://ua.example.com/", "alice", "#ab", store.KeyPending)
		ch := store.Change{QueuedOnly: true, Event: store.EventUserAgent, By: "bob", Set: map[string]string{"user_agent": "UA/1"}}
		if _, err := s.ChangeSettings(ctx, id, ch); err != nil {
			t.Fatal(err)
		}
		if ua, _ := b.Client.HGet(ctx, id, "user_agent").Result(); ua != "UA/1" {
			t.Fatalf("user_agent %q", ua)
		}
		if h := historyOf(t, s, id); h[len(h)-1] != "useragent by bob" {
			t.Errorf("history %q", h)
		}
		if _, err := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}).Take(ctx); err != nil {
			t.Fatal(err)
		}
		ch.Set["user_agent"] = "UA/2"
		writesNothing(t, b, "refused change wrote", func() {
			if _, err := s.ChangeSettings(ctx, id, ch); !errors.Is(err, store.ErrJobStarted) {
				t.Fatalf("change of a running job: %v", err)
			}
		})
	})
}

// TestPerUserPendingLimit: a nick may have at most the limit of jobs
// queued; jobs a pipeline took no longer count; the refusal writes nothing
// and says how many are queued.
func TestPerUserPendingLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		reg := func(url, key string) error {
			norm, id := identOfURL(t, url)
			return s.Register(ctx, store.NewJob{Ident: id, URL: norm, FetchDepth: "inf", StartedBy: "Nick[1]", NickKey: key,
				Queue: store.KeyPending, PerUserLimit: 2})
		}
		if err := reg("http://u1.example.com/", "nick{1}"); err != nil {
			t.Fatal(err)
		}
		if err := reg("http://u2.example.com/", "nick{1}"); err != nil {
			t.Fatal(err)
		}
		writesNothing(t, b, "refusal wrote", func() {
			var le *store.UserLimitError
			if err := reg("http://u3.example.com/", "nick{1}"); !errors.As(err, &le) || le.Queued != 2 {
				t.Fatalf("third job: %v", err)
			}
		})
		if _, err := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "p"}).Take(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reg("http://u3.example.com/", "nick{1}"); err != nil {
			t.Fatalf("after a start: %v", err)
		}
	})
}

// TestFailureRecordFromReaper: the reaper's auto-fail writes the failure
// record (failed_by reaper, the pipeline in the reason) in the fail step.
func TestFailureRecordFromReaper(t *testing.T) {
	b := redistest.Mini(t)
	ctx := context.Background()
	s := store.NewStore(b.Client)
	id := svcQueue(t, s, "http://reaped.example.com/", "alice", "#ab", store.KeyPending)
	b.Client.SAdd(ctx, store.KeyIgnores(id), "/x/")
	p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "reaped-pipe"})
	if err := p.Report(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Take(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FailJobBy(ctx, id, "no heartbeat for 2h0m", "reaper"); err != nil {
		t.Fatal(err)
	}
	f, err := s.GetFailure(ctx, id)
	if err != nil || f == nil {
		t.Fatalf("failure record: %v %v", f, err)
	}
	if f.FailedBy != "reaper" || f.Queue != store.KeyWorking || f.Job["started_by"] != "alice" || f.Extra["origin_queue"] != store.KeyPending ||
		f.Extra["pipeline"] != "reaped-pipe" || f.Job["pipeline_id"] != p.Key() {
		t.Errorf("failure record %+v", f)
	}
	var ign []string
	if err := json.Unmarshal([]byte(f.Extra["ignores"]), &ign); err != nil || !slices.Equal(ign, []string{"/x/", "global-pattern"}) {
		t.Errorf("ignores %q: %v", f.Extra["ignores"], err)
	}
	if ttl, _ := b.Client.TTL(ctx, store.KeyFailed(id)).Result(); ttl != store.FailureTTL {
		t.Errorf("failure record TTL %v", ttl)
	}
}

// identOfURL is the normalized URL and ident of raw.
func identOfURL(t *testing.T, raw string) (string, string) {
	t.Helper()
	norm, id, err := ident.FromURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return norm, id
}

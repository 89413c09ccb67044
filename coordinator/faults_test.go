package coordinator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/faultstore"
)

// The services' tests of one failed store call (store/faultstore): what a
// cycle does when Redis fails one call of it, not only when Redis goes
// away whole.

var _ Store = (*faultstore.Store)(nil)

// TestFaultStoreIsTheDoor: the fault store wraps exactly the methods of
// the services' door, and every one goes through its faults (asleep, each
// fails with ErrDown without reaching the store: the wrapped store here
// is nil, so a call that reached it would panic).
func TestFaultStoreIsTheDoor(t *testing.T) {
	door := reflect.TypeFor[Store]()
	var names []string
	for i := range door.NumMethod() {
		names = append(names, door.Method(i).Name)
	}
	got := faultstore.Methods()
	sort.Strings(got)
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("fault store methods against the door (-door +faultstore):\n%s", diff)
	}
	f := faultstore.New(nil)
	f.Sleep()
	v := reflect.ValueOf(f)
	ctx := reflect.ValueOf(context.Background())
	for _, name := range names {
		m := v.MethodByName(name)
		args := []reflect.Value{ctx}
		for i := 1; i < m.Type().NumIn(); i++ {
			in := m.Type().In(i)
			if m.Type().IsVariadic() && i == m.Type().NumIn()-1 {
				in = in.Elem()
			}
			args = append(args, reflect.Zero(in))
		}
		out := m.Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s while asleep: %v, want ErrUnavailable", name, err)
		}
		if f.Calls(name) != 1 {
			t.Errorf("%s: %d calls counted", name, f.Calls(name))
		}
	}
}

// deadJobs queues n jobs that a simulated pipeline takes, heartbeats once
// and abandons; it returns their idents in queue order.
func deadJobs(t *testing.T, b *redistest.Backend, s *store.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "crashy"})
	if err := p.Report(ctx, ""); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		id := svcQueue(t, s, fmt.Sprintf("http://dies%d.example.net/", i), "alice", "#ab", store.KeyPending)
		j, err := p.Take(ctx)
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take: %v %v", j, err)
		}
		if err := j.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestReaperDeathMarkLost: the death line went out but marking it
// announced failed (Redis lost that one write). The cycle fails, the next
// one announces the death again and marks it, and the one after says
// nothing: a lost mark costs one repeated line, never a lost one.
func TestReaperDeathMarkLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s, id, j := reaperScenario(t, b)
		if err := j.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		f := faultstore.New(s)
		ann := newSvcAnnouncer("#ab")
		r := NewReaper(f, ann, ReaperConfig{Interval: time.Minute, Threshold: 2}, svcLog(t))
		for range 2 { // acknowledge the heartbeat, one silent check
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if l := ann.take(); len(l) != 0 {
			t.Fatalf("announced before the death: %v", l)
		}
		f.Fail("MarkDeathReported", 1, nil)
		if err := r.runOnce(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("cycle whose mark failed: %v, want ErrUnavailable", err)
		}
		for range 2 {
			if err := r.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		line := fmt.Sprintf(`alice: Job %s <http://dies.example.net/> has had no heartbeat for 2m on pipeline "crashy"; it may be dead (an op can !fail %s).`, id, id)
		again := strings.Replace(line, "2m", "3m", 1)
		if diff := cmp.Diff([]svcLine{{"#ab", line}, {"#ab", again}}, ann.take()); diff != "" {
			t.Errorf("announcements (-want +got):\n%s", diff)
		}
		if got := f.Calls("MarkDeathReported"); got != 2 {
			t.Errorf("MarkDeathReported called %d times, want 2 (the failed one and the retry)", got)
		}
		reported, _ := b.Client.SMembers(ctx, store.KeyReaperReported).Result()
		if !slices.Equal(reported, []string{id}) {
			t.Errorf("reaper_reported %v, want [%s]", reported, id)
		}
	})
}

// TestReaperAutoFailFaults: with AutoFail, a fail that never reached Redis
// leaves its job (and the dead jobs after it) to the next cycle, and a
// fail whose reply was lost is not done twice: either way each dead job is
// failed once and its death line queued once.
func TestReaperAutoFailFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(f *faultstore.Store)
	}{
		{"not sent", func(f *faultstore.Store) { f.Fail("FailJobNotice", 1, nil) }},
		{"reply lost", func(f *faultstore.Store) { f.LoseReply("FailJobNotice", 1, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx := context.Background()
				s := store.New(b.Client)
				ids := deadJobs(t, b, s, 2)
				f := faultstore.New(s)
				r := NewReaper(f, newSvcAnnouncer("#ab"), ReaperConfig{Interval: time.Minute, Threshold: 2, AutoFail: true}, svcLog(t))
				for range 2 { // acknowledge the heartbeats, one silent check
					if err := r.runOnce(ctx); err != nil {
						t.Fatal(err)
					}
				}
				tc.fault(f)
				if err := r.runOnce(ctx); !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("cycle with the fault: %v, want ErrUnavailable", err)
				}
				for range 2 {
					if err := r.runOnce(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for _, id := range ids {
					job, err := s.GetJob(ctx, id)
					if err != nil || job == nil || job.State() != record.StateFailed {
						t.Errorf("%s after the cycles: %+v %v, want failed", id, job, err)
					}
				}
				notices, _ := b.Client.LRange(ctx, store.KeyAdminNotices, 0, -1).Result()
				if len(notices) != len(ids) {
					t.Errorf("death lines queued: %d, want one per job:\n%s", len(notices), strings.Join(notices, "\n"))
				}
				for _, id := range ids {
					if n := countContaining(notices, id); n != 1 {
						t.Errorf("%s: %d death lines, want 1", id, n)
					}
				}
				if failed, _ := b.Client.Get(ctx, store.KeyJobsFailed).Result(); failed != "2" {
					t.Errorf("jobs_failed %q, want 2", failed)
				}
			})
		})
	}
}

func countContaining(ls []string, s string) int {
	n := 0
	for _, l := range ls {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// TestFinishNotifierAckLost: the finish line was written but its
// acknowledgement never reached Redis. The notice stays in the processing
// list, the cycle stops there, and the next cycle says that one line
// again before the rest: at least once, one repeat, nothing lost.
func TestFinishNotifierAckLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var docs, lines []string
		for n := range 3 {
			url := fmt.Sprintf("http://ack%d.example.com/", n)
			docs = append(docs, svcNotice(url, "a", "#ab", false))
			lines = append(lines, fmt.Sprintf("a: Your job for %s has finished. (%s)", url, ident.Of(url)))
		}
		b.Client.RPush(ctx, store.KeyFinishNotifications, docs[0], docs[1], docs[2])
		f := faultstore.New(store.New(b.Client))
		f.Fail("AckNotice", 1, nil)
		ann := newSvcAnnouncer("#ab")
		n := NewFinishNotifier(f, ann, FinishConfig{}, svcLog(t))
		if err := n.runOnce(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("cycle whose ack failed: %v, want ErrUnavailable", err)
		}
		if diff := cmp.Diff([2][]string{docs[1:], docs[:1]}, svcLists(t, b)); diff != "" {
			t.Errorf("Redis after the lost ack (-want +got):\n%s", diff)
		}
		if err := n.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range ann.take() {
			got = append(got, l.Text)
		}
		if diff := cmp.Diff([]string{lines[0], lines[0], lines[1], lines[2]}, got); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([2][]string{}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("notices left in Redis (-want +got):\n%s", diff)
		}
	})
}

// TestFinishNotifierRecordUnreadable: the read of a job's failure record,
// which decides whether its finish is reported at all, failed. No line is
// said for it (a failed job must not be reported finished), the notice
// waits first in the processing list, and the next cycle reports it once,
// with the finished index and the history written once.
func TestFinishNotifierRecordUnreadable(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		url := "http://unreadable.example.com/"
		doc := svcNotice(url, "a", "#ab", false)
		b.Client.RPush(ctx, store.KeyFinishNotifications, doc)
		f := faultstore.New(store.New(b.Client))
		f.Fail("GetFailure", 1, nil)
		ann := newSvcAnnouncer("#ab")
		n := NewFinishNotifier(f, ann, FinishConfig{}, svcLog(t))
		if err := n.runOnce(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("cycle whose record read failed: %v, want ErrUnavailable", err)
		}
		if l := ann.take(); len(l) != 0 {
			t.Errorf("said %v without knowing whether the job failed", l)
		}
		if got := [2]int{f.Calls("IndexFinished"), f.Calls("RecordJobEnd")}; got != [2]int{} {
			t.Errorf("IndexFinished, RecordJobEnd called %v times before the record was read, want none", got)
		}
		if diff := cmp.Diff([2][]string{{}, {doc}}, svcLists(t, b), cmpEmpty); diff != "" {
			t.Errorf("Redis after the failed read (-want +got):\n%s", diff)
		}
		if err := n.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		want := []svcLine{{"#ab", fmt.Sprintf("a: Your job for %s has finished. (%s)", url, ident.Of(url))}}
		if diff := cmp.Diff(want, ann.take()); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if got := [2]int{f.Calls("IndexFinished"), f.Calls("RecordJobEnd")}; got != [2]int{1, 1} {
			t.Errorf("IndexFinished, RecordJobEnd called %v times, want once each", got)
		}
	})
}

// TestServicesStopWithAStalledStore: a store call that never answers (a
// Redis that accepts and then hangs, before the client's timeout) does not
// hold Stop: the reaper's cycle is waiting in it, Stop cancels the term,
// and the cycle returns.
func TestServicesStopWithAStalledStore(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f := faultstore.New(store.New(b.Client))
		gate := f.Hold("AdvanceDeathTimers")
		defer gate.Open()
		svc := NewServices(f, newSvcAnnouncer("#ab"), ServicesConfig{Reaper: ReaperConfig{Interval: time.Millisecond}}, svcLog(t))
		svc.Start(context.Background())
		select {
		case <-gate.Waiting():
		case <-time.After(10 * time.Second):
			t.Fatal("the reaper never called the store")
		}
		stopped := make(chan struct{})
		go func() { svc.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("Stop waits on a stalled store call")
		}
	})
}

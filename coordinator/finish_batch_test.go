package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// batchAnnouncer takes finish reports without sending them; the test
// answers each one.
type batchAnnouncer struct {
	svcAnnouncer
	got chan batchCall
}

type batchCall struct {
	r    FinishReport
	done func(error)
}

func (a *batchAnnouncer) AnnounceFinish(ctx context.Context, r FinishReport, done func(error)) {
	a.got <- batchCall{r, done}
}

// TestFinishNotifierBatch: with a front end that combines reports, a
// cycle hands over every notice at once, acknowledges a document only
// when its report's line is written (or can never be), and keeps the one
// whose line failed for the next cycle.
func TestFinishNotifierBatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.NewStore(b.Client)
		docs := []string{
			`{"no":"url"}`, // acknowledged before the next is taken
			svcNotice("http://a.example.com/", "alice", "#ab", false),
			svcNotice("http://b.example.com/", "alice", "#ab", true),
			svcNotice("http://c.example.com/", "bob", "#victim", false),
			svcNotice("http://d.example.com/", "bob", "#ab", false),
		}
		for _, d := range docs {
			b.Client.RPush(ctx, store.KeyFinishNotifications, d)
		}
		ann := &batchAnnouncer{svcAnnouncer: *newSvcAnnouncer("#ab"), got: make(chan batchCall, 10)}
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		errc := make(chan error, 1)
		go func() { errc <- f.runOnce(ctx) }()

		var calls []batchCall
		for range 4 {
			calls = append(calls, <-ann.got)
		}
		// Nothing acknowledged before any line was written (the
		// malformed document is, at once).
		if l := svcLists(t, b); len(l[0]) != 0 || len(l[1]) != 4 {
			t.Fatalf("before any line: queue %d, processing %d; want 0, 4", len(l[0]), len(l[1]))
		}
		if r := calls[1].r; r.Nick != "alice" || r.Channel != "#ab" || !r.Aborted || r.Ident == "" || r.Line != "alice: Your job for http://b.example.com/ was aborted. ("+r.Ident+")" {
			t.Errorf("report = %+v", r)
		}
		calls[0].done(nil)
		calls[2].done(ErrCannotDeliver)
		calls[3].done(errors.New("connection lost"))
		calls[1].done(nil)
		if err := <-errc; err == nil {
			t.Error("a failed line did not fail the cycle")
		}
		if l := svcLists(t, b); len(l[0]) != 0 || len(l[1]) != 1 || l[1][0] != docs[4] {
			t.Fatalf("after: queue %v, processing %v; want only the failed one left", l[0], l[1])
		}
		// Next cycle: the failed one is handed over again.
		go func() { errc <- f.runOnce(ctx) }()
		c := <-ann.got
		if c.r.URL != "http://d.example.com/" {
			t.Errorf("redelivered %q", c.r.URL)
		}
		c.done(nil)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if l := svcLists(t, b); len(l[0])+len(l[1]) != 0 {
			t.Fatalf("left: %v", l)
		}
	})
}

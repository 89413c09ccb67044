package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/text"
)

// runBatch is runOnce for a front end that combines reports: it hands
// every notice of the cycle to fa without waiting (what the processing
// list holds, then up to Batch new ones), then acknowledges each document
// as fa reports its line written. A document whose line failed stays in
// the processing list for the next cycle; the cycle returns only when
// every report has its answer, so no document is handed over twice at
// once.
func (f *FinishNotifier) runBatch(ctx context.Context, fa FinishAnnouncer) error {
	type result struct {
		doc string
		n   FinishNotice
		err error
	}
	results := make(chan result, f.cfg.Batch)
	out := 0
	var firstErr error
	take := func(doc string) {
		n, err := ParseFinishNotice(doc)
		if err != nil {
			f.log.Error("dropping malformed finish notification", "doc", doc, "err", err)
			if err := f.ack(ctx, doc); err != nil && firstErr == nil {
				firstErr = err
			}
			return
		}
		id := ident.Of(n.URL)
		f.observe(ctx, n)
		r := FinishReport{Channel: n.StartedIn, Nick: n.StartedBy, URL: n.URL, Ident: id, Aborted: bool(n.Aborted), Line: text.Clean(n.Line(), text.Untrusted)}
		out++
		fa.AnnounceFinish(ctx, r, func(err error) { results <- result{doc, n, err} })
	}

	left, err := f.store.FinishNoticesInDelivery(ctx, f.cfg.Batch)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		f.log.Info("delivering notices left from an earlier run", "count", len(left))
	}
	for _, doc := range left {
		take(doc)
	}
	for sent := len(left); sent < f.cfg.Batch && firstErr == nil && ctx.Err() == nil; sent++ {
		doc, ok, err := f.store.TakeFinishNotice(ctx)
		if err != nil {
			firstErr = err
			break
		}
		if !ok {
			break
		}
		take(doc)
	}

	for ; out > 0; out-- {
		r := <-results
		id := ident.Of(r.n.URL)
		switch {
		case r.err == nil:
			f.log.Info("finish reported", "ident", id, "channel", r.n.StartedIn, "line", r.n.Line())
		case errors.Is(r.err, ErrCannotDeliver):
			f.log.Warn("cannot deliver line, dropping it", "ident", id, "channel", r.n.StartedIn, "line", r.n.Line(), "err", r.err)
		default:
			if firstErr == nil {
				firstErr = fmt.Errorf("announce finish of %s: %w", r.n.URL, r.err)
			}
			continue
		}
		if err := f.ack(ctx, r.doc); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// ack removes doc from the processing list once its line is out; shutdown
// must not cut that short.
func (f *FinishNotifier) ack(ctx context.Context, doc string) error {
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return f.store.AckFinishNotice(ackCtx, doc)
}

// RunOnce runs one cycle now, as the service's timer would: for tests of
// front ends, which drive the notifier without its schedule.
func (f *FinishNotifier) RunOnce(ctx context.Context) error { return f.runOnce(ctx) }

package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
)

// The one drain loop of the notice queues (finish, start and admin
// notices; store.NoticeQueue). Delivery is at least once and, in normal
// operation, exactly once: a notice moves into the processing list before
// its line is sent, and is acknowledged only once its line was written.
// What the processing list holds (a crash, IRC down) is delivered first
// on the next cycle, in order.

// handOff hands one notice document to the front end. It calls done
// exactly once, from any goroutine: with nil once the document's line was
// written, or once it is known it never can be (a malformed document,
// ErrCannotDeliver), else with the reason it was not (the document stays
// in the processing list). A front end that sends one line at a time
// calls done before handOff returns.
type handOff func(ctx context.Context, doc string, done func(error))

// ackTimeout bounds one acknowledgement; shutdown does not cut it short
// (the line is out).
const ackTimeout = 5 * time.Second

// drain runs one cycle over q: once the front end is connected (or
// connectWait has passed, see awaitConnected) it hands over what the
// processing list holds, then up to batch notices in all, taking new ones
// one by one. The
// first failure known stops the handing over (the failed notice is the
// first delivered next cycle). Each notice is acknowledged as soon as its
// line is reported written, while the loop goes on taking: a written line
// never waits for the rest of the cycle to be acknowledged, so a kill
// repeats at most the line in flight. drain returns once every notice
// handed over has its answer, so no notice is handed over twice at once;
// it returns the first failure.
func drain(ctx context.Context, st Store, q store.NoticeQueue, batch int, ann news.Announcer, log *slog.Logger, hand handOff) error {
	awaitConnected(ctx, ann)
	left, err := st.NoticesInDelivery(ctx, q, batch)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		log.Info("delivering notices left from an earlier run", "count", len(left))
	}

	var (
		mu       sync.Mutex
		firstErr error
		answers  sync.WaitGroup // notices handed over without an answer yet
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	// A notice is acknowledged as soon as its answer comes, on the
	// goroutine that answers: the front end's sender for a channel does
	// not write its next line before the last one is acknowledged, so a
	// kill repeats at most the one line in flight per channel.
	give := func(doc string) {
		answers.Add(1)
		hand(ctx, doc, func(err error) {
			defer answers.Done()
			if err != nil {
				fail(err)
				return
			}
			ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
			defer cancel()
			if err := st.AckNotice(ackCtx, q, doc); err != nil {
				fail(err)
			}
		})
	}

	sent := 0
	for _, doc := range left {
		if failed() {
			break
		}
		give(doc)
		sent++
	}
	for ; sent < batch && !failed() && ctx.Err() == nil; sent++ {
		doc, ok, err := st.TakeNotice(ctx, q)
		if err != nil {
			fail(err)
			break
		}
		if !ok {
			break
		}
		give(doc)
	}
	answers.Wait()
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// connectWait bounds how long a cycle waits for the front end to connect.
const connectWait = 2 * time.Second

// awaitConnected waits, up to connectWait, until a front end that can tell
// (the IRC client: WaitConnected) is connected. Right after a start the
// first cycle would otherwise hand the notices left from the earlier run
// to a client still connecting, fail on the first ("irc: not connected")
// and leave them all to the next cycle. While IRC is down the cycle goes
// on after the wait and fails as before, the notice kept for later.
func awaitConnected(ctx context.Context, ann news.Announcer) {
	c, ok := ann.(interface {
		WaitConnected(context.Context) bool
	})
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	c.WaitConnected(ctx)
}

package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/store"
)

// pauseQueueArg reads the optional QUEUE|all argument of !pause and
// !resume: "all" when absent; ok false (and the refusal said) when it
// names no queue.
func pauseQueueArg(c *Call) (queue string, ok bool) {
	if len(c.Args) == 0 {
		return store.PauseAll, true
	}
	q := c.Args[0]
	if !store.ValidQueueName(q) {
		c.Refuse("Sorry, %q is not a queue: say pending, pending-ao, pending-large, pending:NAME or all. Nothing was changed.", q)
		return "", false
	}
	return q, true
}

// queueWords names a pause target in a reply.
func queueWords(q string) string {
	if q == store.PauseAll {
		return "every queue"
	}
	return "queue " + q
}

// PauseLine is how a pause is shown: "Queue pending is paused by JAA
// since 12:03 (deploy)."
func PauseLine(p store.Pause) string {
	what := "Queue " + p.Queue + " is"
	if p.Queue == store.PauseAll {
		what = "Every queue is"
	}
	line := fmt.Sprintf("%s paused by %s since %s", what, p.By, p.At.UTC().Format("15:04 UTC"))
	if p.At.UTC().Format(time.DateOnly) != time.Now().UTC().Format(time.DateOnly) {
		line = fmt.Sprintf("%s paused by %s since %s", what, p.By, p.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if p.Reason != "" {
		line += " (" + p.Reason + ")"
	}
	return line + "."
}

// !pause [QUEUE|all] [REASON]
func runPause(ctx context.Context, b *Bot, c *Call) error {
	q, ok := pauseQueueArg(c)
	if !ok {
		return nil
	}
	reason := ""
	if len(c.Args) > 1 {
		reason = strings.Join(c.Args[1:], " ")
	}
	c.Effect = queueWords(q) + " was paused"
	err := b.store.PauseQueue(ctx, q, c.Req.Nick, reason)
	switch {
	case errors.Is(err, store.ErrAlreadyPaused), errors.Is(err, store.ErrAllPaused):
		ps, rerr := b.store.Pauses(ctx)
		if rerr != nil {
			return rerr
		}
		if p := store.PauseOf(ps, q); p != nil {
			c.Refuse("%s Nothing was changed.", PauseLine(*p))
			return nil
		}
		c.Refuse("Sorry, %s is already paused. Nothing was changed.", queueWords(q))
		return nil
	case err != nil:
		return err
	}
	c.Reply("Paused %s: no pipeline gets a job from it, not even one taking straight from Redis, until !resume %s. New jobs still queue and wait.", queueWords(q), q)
	return nil
}

// !resume [QUEUE|all]
func runResume(ctx context.Context, b *Bot, c *Call) error {
	q, ok := pauseQueueArg(c)
	if !ok {
		return nil
	}
	if len(c.Args) > 1 {
		c.Usage()
		return nil
	}
	c.Effect = queueWords(q) + " was resumed"
	err := b.store.ResumeQueue(ctx, q)
	switch {
	case errors.Is(err, store.ErrNotPaused):
		c.Refuse("Sorry, %s is not paused. Nothing was changed.", queueWords(q))
		return nil
	case errors.Is(err, store.ErrAllPaused):
		c.Refuse("Sorry, every queue is paused: !resume all first. Nothing was changed.")
		return nil
	case err != nil:
		return err
	}
	c.Reply("Resumed %s: its jobs are handed out again, in the order they were queued.", queueWords(q))
	return nil
}

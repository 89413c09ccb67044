package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
)

// change applies a settings change and answers the common failures. It
// reports whether the change was made.
func (b *Bot) change(ctx context.Context, c *Call, id string, ch store.Change) (bool, error) {
	ch.By = c.Req.by()
	_, err := b.store.ChangeSettings(ctx, id, ch)
	switch {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
		return false, nil
	case errors.Is(err, store.ErrJobFinished):
		c.Refuse("Job %s has already finished; its settings can no longer change.", id)
		return false, nil
	case errors.Is(err, store.ErrJobStarted):
		c.Refuse("Sorry, job %s has already started: its pipeline read that setting when it took the job and never reads it again.", id)
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// !ignore IDENT PATTERN    (!ig)
func runIgnore(ctx context.Context, b *Bot, c *Call) error {
	id, pattern := c.Args[0], restAfterFirst(c.Rest)
	if err := ValidatePattern(pattern); err != nil {
		c.Refuse("Sorry, invalid pattern %s: %s", pattern, err)
		return nil
	}
	if ok, err := b.change(ctx, c, id, store.Change{Bump: 1, AddPatterns: []string{pattern}}); !ok {
		return err
	}
	c.Reply("Added ignore pattern %s to job %s.", pattern, id)
	if NestedQuantifier(pattern) {
		c.Reply("Warning: %s repeats a group that itself repeats (nested quantifiers); on some URLs Python's re can backtrack for minutes and stall the pipeline. Consider a simpler pattern.", pattern)
	}
	return nil
}

// !unignore IDENT PATTERN  (!unig, !ug)
func runUnignore(ctx context.Context, b *Bot, c *Call) error {
	id, pattern := c.Args[0], restAfterFirst(c.Rest)
	if ok, err := b.change(ctx, c, id, store.Change{Bump: 1, DelPatterns: []string{pattern}}); !ok {
		return err
	}
	c.Reply("Removed ignore pattern %s from job %s.", pattern, id)
	return nil
}

// !ignoreset IDENT NAME[,NAME…]  (!igset)
func runIgnoreSet(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	var known, unknown, patterns []string
	for _, name := range strings.Split(restAfterFirst(c.Rest), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if p, ok := b.opts.Catalog.Set(name); ok {
			known = append(known, name)
			patterns = append(patterns, p...)
		} else {
			unknown = append(unknown, name)
		}
	}
	if len(known)+len(unknown) == 0 {
		c.Usage()
		return nil
	}
	if len(known) == 0 {
		// As upstream, an unknown job is the first complaint; with known
		// sets the change itself reports it.
		exists, err := b.store.Exists(ctx, id)
		if err != nil {
			return err
		}
		if !exists {
			c.unknownJob(id)
			return nil
		}
	}
	if len(known) > 0 {
		if ok, err := b.change(ctx, c, id, store.Change{Bump: 1, AddPatterns: patterns}); !ok {
			return err
		}
		if len(known) == 1 {
			c.Reply("Added %d patterns from ignore set %s to job %s.", len(patterns), known[0], id)
		} else {
			c.Reply("Added %d patterns from ignore sets {%s} to job %s.", len(patterns), strings.Join(known, ", "), id)
		}
	}
	if len(unknown) > 0 {
		c.Reply("The following sets are unknown: %s", strings.Join(unknown, ", "))
	}
	return nil
}

// !ignorereports IDENT on|off  (!igrep)
func runIgnoreReports(ctx context.Context, b *Bot, c *Call) error {
	switch c.Args[1] {
	case "on":
		return b.setIgnoreReports(ctx, c, c.Args[0], true)
	case "off":
		return b.setIgnoreReports(ctx, c, c.Args[0], false)
	}
	c.Usage()
	return nil
}

// !igon IDENT, !igoff IDENT
func runIgnoreReportsSwitch(show bool) func(context.Context, *Bot, *Call) error {
	return func(ctx context.Context, b *Bot, c *Call) error {
		return b.setIgnoreReports(ctx, c, c.Args[0], show)
	}
}

func (b *Bot) setIgnoreReports(ctx context.Context, c *Call, id string, show bool) error {
	ch := store.Change{Bump: 1, Set: map[string]string{"suppress_ignore_reports": "true"}}
	if show {
		ch = store.Change{Bump: 1, Del: []string{"suppress_ignore_reports"}}
	}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	if show {
		c.Reply("Showing ignore pattern reports for job %s.", id)
	} else {
		c.Reply("Suppressing ignore pattern reports for job %s.", id)
	}
	return nil
}

// parseSmallInt parses a non-negative integer of at most 7 digits.
func parseSmallInt(s string) (int, bool) {
	if len(s) == 0 || len(s) > 7 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// !delay IDENT MIN MAX  (!d)
func runDelay(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	lo, ok1 := parseSmallInt(c.Args[1])
	hi, ok2 := parseSmallInt(c.Args[2])
	if !ok1 || !ok2 {
		c.Usage()
		return nil
	}
	if lo > hi {
		c.Refuse("Sorry, min delay must be less than or equal to max delay.")
		return nil
	}
	ch := store.Change{Bump: 1, Set: map[string]string{
		"delay_min": strconv.Itoa(lo), "delay_max": strconv.Itoa(hi),
	}}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	c.Reply("Inter-request delay for job %s set to [%d, %d] ms.", id, lo, hi)
	return nil
}

// !concurrency IDENT N  (!con, !concurrent)
func runConcurrency(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	n, ok := parseSmallInt(c.Args[1])
	if !ok || n > 99 {
		c.Usage()
		return nil
	}
	if n < 1 {
		c.Refuse("Sorry, concurrency level must be at least 1.")
		return nil
	}
	ch := store.Change{Bump: 1, Set: map[string]string{"concurrency": strconv.Itoa(n)}}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	c.Reply("Job %s set to use %s.", id, workers(n))
	return nil
}

// !yahoo IDENT
func runYahoo(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	// Upstream set delay and concurrency silently (one age each) and then
	// published one change: settings_age rises by 3.
	ch := store.Change{Bump: 3, Set: map[string]string{
		"delay_min": "0", "delay_max": "0", "concurrency": "4",
	}}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	c.Reply("Job %s set to Yahoo! mode.", id)
	return nil
}

// !explain IDENT NOTE  (!ex, !reason)
func runExplain(ctx context.Context, b *Bot, c *Call) error {
	id, note := c.Args[0], restAfterFirst(c.Rest)
	if err := checkNote(note); err != nil {
		c.Refuse("Sorry, %s.", err)
		return nil
	}
	ch := store.Change{AllowFinished: true, Set: map[string]string{"note": note}}
	if ok, err := b.change(ctx, c, id, ch); !ok {
		return err
	}
	c.Reply("Added note \"%s\" to job %s.", note, id)
	return nil
}

// !abort IDENT
func runAbort(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	res, url, err := b.store.AbortBy(ctx, id, c.Req.by())
	switch {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
		return nil
	case errors.Is(err, store.ErrJobFinished):
		c.Refuse("Job %s has already finished; there is nothing to abort.", id)
		return nil
	case err != nil:
		return err
	}
	if res == store.AbortedQueued {
		c.Reply("Job %s for %s was aborted before it started.", id, url)
		return nil
	}
	c.Reply("Initiated abort for %s.", url)
	return nil
}

// !expire IDENT
func runExpire(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	switch err := b.store.ExpireBy(ctx, id, c.Req.by()); {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
	case errors.Is(err, store.ErrNoExpiry):
		c.Refuse("Job %s does not yet have an expiry timer.", id)
	case err != nil:
		return err
	default:
		c.Reply("Job %s expired; its URL can be archived again.", id)
	}
	return nil
}

// restAfterFirst returns the text after the first word, trimmed.
func restAfterFirst(s string) string {
	_, rest := cutSpace(strings.TrimSpace(s))
	return rest
}

// !fail IDENT
//
// The fail's report is a line for the job's channel, queued in the fail's
// own atomic step and delivered at least once by the admin notifier
// (store.FailJobReported): a reply alone was lost when the node stopped
// right after the fail (doc/reliability.md). The reply only acknowledges
// the command, in words that do not report the outcome a second time.
func runFail(ctx context.Context, b *Bot, c *Call) error {
	id := c.Args[0]
	by := c.Req.by()
	job, err := b.store.FailJobReported(ctx, id, "failed by "+by, by, func(j *record.Job) store.AdminNotice {
		return failNotice(j, by)
	})
	switch {
	case errors.Is(err, store.ErrNoJob):
		c.unknownJob(id)
		return nil
	case errors.Is(err, store.ErrJobFinished):
		c.Refuse("Job %s has already finished; there is nothing to fail.", id)
		return nil
	case err != nil:
		return err
	}
	where := job.StartedIn.Value
	if where == "" {
		where = "every channel"
	}
	c.Reply("OK, job %s for %s is failed; its report goes to %s.", id, job.URL.Value, where)
	return nil
}

// failNotice is the channel line reporting that by failed job j, addressed
// to whoever queued it: "Job IDENT for URL failed: removed from its
// queue, …" (soak/check/parse.go recognises it as the job's outcome).
func failNotice(j *record.Job, by string) store.AdminNotice {
	text := fmt.Sprintf("Job %s for %s failed: removed from its queue, it will not run any more (failed by %s).", j.Ident, j.URL.Value, by)
	if nick := j.StartedBy.Value; nick != "" {
		text = nick + ": " + text
	}
	return store.AdminNotice{Channel: j.StartedIn.Value, Text: text}
}

package tweeter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/store"
)

// SummaryText words the daily summary of day (a UTC date).
func SummaryText(day time.Time, queued, ended int64) string {
	return fmt.Sprintf("Yesterday (%s UTC): %d %s queued for archiving, %d %s ended.",
		day.Format("2006-01-02"), queued, plural(int(queued), "site", "sites"), ended, plural(int(ended), "job", "jobs"))
}

// PostSummary posts the summary of the previous UTC day on every network
// that has not posted it yet (archivebot:feed:NET:summary keeps the day).
// It counts against each network's budget like any post; a network whose
// budget is spent or that is rate limited skips it, and says so.
func (t *Tweeter) PostSummary(ctx context.Context) error {
	now := t.cfg.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	day := today.AddDate(0, 0, -1)
	queued, ended, err := t.store.FeedDay(ctx, day, today)
	if err != nil {
		return err
	}
	text := SummaryText(day, queued, ended)
	var errs []error
	for _, n := range t.nets {
		if err := t.summary(ctx, n, day.Format("2006-01-02"), text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Tweeter) summary(ctx context.Context, n *net, day, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if done, err := t.store.FeedSummaryDay(ctx, n.Name); err != nil || done == day {
		return err
	}
	if until := n.pausedUntil; until.After(t.cfg.Now()) {
		n.log.Warn("summary skipped: the network is paused", "until", until, "why", n.pauseWhy)
		return nil
	}
	a := store.FeedAttempt{Key: NewTID(t.cfg.Now()), At: t.cfg.Now().UnixMilli(), Post: text}
	why, err := t.store.FeedClaim(ctx, n.Name, a, n.Budget, n.Window)
	if err != nil {
		return err
	}
	if why != store.FeedClaimed {
		n.log.Warn("summary skipped: the budget is spent", "budget", n.Budget, "window", n.Window)
		return nil
	}
	err = n.Poster.Post(WithAttempt(ctx, Attempt{Key: a.Key}), text)
	outcome := store.FeedPosted
	if err != nil && Answered(err) {
		// Certainly not posted: it no longer counts against the budget.
		outcome = store.FeedRelease
	}
	if _, rerr := t.resolve(ctx, n, a.Key, outcome, ""); rerr != nil {
		return rerr
	}
	if err != nil {
		return err
	}
	n.stats.Summaries++
	metrics.FeedPosted(n.Name, "summary")
	return t.store.SetFeedSummaryDay(ctx, n.Name, day)
}

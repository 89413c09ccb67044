package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
)

// ReaperConfig configures the death timer (see doc/protocol.md, Death
// timer). Zero values take the defaults of package config.
type ReaperConfig struct {
	// Interval between two checks.
	Interval time.Duration
	// Threshold is the number of consecutive checks without heartbeat
	// progress after which a job is dead.
	Threshold int
	// AutoFail fails dead jobs (FailJob) once they are announced.
	AutoFail bool
}

func (c ReaperConfig) orDefaults() ReaperConfig {
	orDefault(&c.Interval, config.DefaultReaperInterval)
	orDefault(&c.Threshold, config.DefaultReaperThreshold)
	return c
}

// Reaper runs the death timer over the jobs in `working`. One cycle is one
// Lua script, so it costs the same number of Redis round trips whatever the
// number of working jobs; dead jobs cost a few more each.
type Reaper struct {
	store Store
	ann   news.Announcer
	cfg   ReaperConfig
	log   *slog.Logger

	// ghostsAt is when ghost job hashes were last removed (removeGhosts).
	ghostsAt time.Time
	// badKeys counts the members of working that are not jobs, which the
	// death timer skips (counted by the ghost pass).
	badKeys *badkeys.Summary
}

// ghostEvery is the least time between two removals of ghost job hashes:
// a ghost is never shown and never blocks `!a`, so the removal only keeps
// Redis tidy, and its scan of the finished index need not run every cycle.
const ghostEvery = time.Minute

// removeGhosts deletes ghost job hashes (record.Job.Ghost: re-created by a
// pipeline's late writes after the job ended), once per ghostEvery (the
// first a ghostEvery after the start; that cycle costs one more round
// trip), and logs one line when it removed any.
func (r *Reaper) removeGhosts(ctx context.Context) error {
	now := time.Now()
	if !r.ghostsAt.IsZero() && now.Sub(r.ghostsAt) < ghostEvery {
		return nil
	}
	r.ghostsAt = now
	ids, bad, err := r.store.RemoveGhosts(ctx)
	if err != nil {
		return err
	}
	for _, k := range bad {
		r.badKeys.Add(k)
	}
	r.badKeys.End(r.log, now)
	if len(ids) > 0 {
		r.log.Info("removed ghost job records (hashes re-created by a pipeline after their job ended)",
			"count", len(ids), "first", ids[0])
	}
	return nil
}

// NewReaper returns a reaper; zero config values take their defaults.
func NewReaper(st Store, ann news.Announcer, cfg ReaperConfig, log *slog.Logger) *Reaper {
	return &Reaper{store: st, ann: ann, cfg: cfg.orDefaults(), log: serviceLog(log, "reaper"), ghostsAt: time.Now(),
		badKeys: workingSummary("reaper", "not jobs: no death timer")}
}

// Silent is how long the job has gone without a heartbeat.
func (r *Reaper) Silent(d store.DeadJob) time.Duration {
	return time.Duration(d.Checks) * r.cfg.Interval
}

// runOnce is one reaper cycle: advance the death timers, announce each new
// death once in the job's channel, and with AutoFail fail the job.
//
// Without AutoFail the announcement is remembered in KeyReaperReported
// (MarkDeathReported) only once Announce succeeded: while IRC is down the
// dead job stays in `working` unannounced and is announced when IRC is
// back. With AutoFail the job is failed and its line queued in one step
// (fail): the line says "marked as failed" only when it was.
func (r *Reaper) runOnce(ctx context.Context) error {
	dead, err := r.store.AdvanceDeathTimers(ctx, r.cfg.Threshold, r.cfg.AutoFail)
	if err != nil {
		return err
	}
	for _, d := range dead {
		log := r.log.With("ident", d.Ident)
		if r.cfg.AutoFail {
			if err := r.fail(ctx, log, d); err != nil {
				return err
			}
			continue
		}
		if !d.Reported {
			log.Warn("no heartbeat", "url", d.URL, "silent", r.Silent(d), "pipeline", d.PipelineID)
			if err := announceIn(ctx, r.ann, r.log, d.StartedIn, r.deathLine(d)); err != nil {
				return fmt.Errorf("announce dead job %s: %w", d.Ident, err)
			}
			if err := r.store.MarkDeathReported(ctx, d.Ident); err != nil {
				return err
			}
		}
	}
	return r.removeGhosts(ctx)
}

// fail fails dead job d (AutoFail). Its death line goes into the admin
// notices in the fail's own atomic step, so the channel hears "marked as
// failed" only for a fail that happened (a job whose pipeline finished it
// meanwhile gets its finish report instead), at least once (the admin
// notifier's queue survives IRC and the node going away). A death
// announced by an older node (d.Reported) is failed without a second line.
func (r *Reaper) fail(ctx context.Context, log *slog.Logger, d store.DeadJob) error {
	reason := "no heartbeat for " + shortDuration(r.Silent(d))
	var notice *store.AdminNotice
	if !d.Reported {
		log.Warn("no heartbeat", "url", d.URL, "silent", r.Silent(d), "pipeline", d.PipelineID)
		notice = &store.AdminNotice{Channel: d.StartedIn, Text: r.deathLine(d)}
	}
	_, err := r.store.FailJobNotice(ctx, d.Ident, reason, "reaper", notice)
	switch {
	case err == nil:
		log.Warn("failed dead job", "reason", reason)
	case errors.Is(err, store.ErrNoJob), errors.Is(err, store.ErrJobFinished):
		// It finished or expired since the cycle: nothing to fail, and
		// nothing said.
		log.Info("dead job finished before it could be failed", "err", err)
	default:
		return err
	}
	return nil
}

// deathLine is the channel line for a dead job: "no heartbeat" with the
// ident, URL, the pipeline and how long, addressed to whoever queued it.
func (r *Reaper) deathLine(d store.DeadJob) string {
	where := ""
	switch {
	case d.PipelineNick != "":
		where = fmt.Sprintf(" on pipeline %q", d.PipelineNick)
	case d.PipelineID != "":
		where = " on " + d.PipelineID
	}
	text := fmt.Sprintf("Job %s <%s> has had no heartbeat for %s%s", d.Ident, d.URL, shortDuration(r.Silent(d)), where)
	if r.cfg.AutoFail {
		text += "; it has been marked as failed."
	} else {
		text += fmt.Sprintf("; it may be dead (an op can !fail %s).", d.Ident)
	}
	return addressed(d.StartedBy, text)
}

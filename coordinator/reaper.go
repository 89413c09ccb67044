package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ReaperConfig configures the death timer (SPEC §5.1).
type ReaperConfig struct {
	// Interval between two checks; default 2 s.
	Interval time.Duration
	// Threshold is the number of consecutive checks without heartbeat
	// progress after which a job is dead; default 3600 (2 hours at 2 s).
	Threshold int
	// AutoFail fails dead jobs (FailJob) once they are announced.
	AutoFail bool
}

func (c ReaperConfig) withDefaults() ReaperConfig {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.Threshold <= 0 {
		c.Threshold = 3600
	}
	return c
}

// Reaper runs the death timer over the jobs in `working`. One cycle is one
// Lua script, so it costs the same number of Redis round trips whatever the
// number of working jobs; dead jobs cost a few more each.
type Reaper struct {
	store *Store
	ann   Announcer
	cfg   ReaperConfig
	log   *slog.Logger
}

// NewReaper returns a reaper; zero config values take their defaults.
func NewReaper(store *Store, ann Announcer, cfg ReaperConfig, log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.Default()
	}
	return &Reaper{store: store, ann: ann, cfg: cfg.withDefaults(), log: log.With("service", "reaper")}
}

// DeadJob is a working job whose death timer reached the threshold.
type DeadJob struct {
	Ident, URL, StartedBy, StartedIn string
	PipelineID, PipelineNick         string
	// Checks is the job's death_timer: checks without heartbeat progress.
	Checks int64
	// Reported is true once its death was announced.
	Reported bool
}

// Silent is how long the job has gone without a heartbeat.
func (r *Reaper) Silent(d DeadJob) time.Duration {
	return time.Duration(d.Checks) * r.cfg.Interval
}

// cycle advances every working job's death timer and returns the dead
// ones (those not announced yet; with AutoFail also the announced ones,
// so that a failed FailJob is retried).
func (r *Reaper) cycle(ctx context.Context) ([]DeadJob, error) {
	include := "0"
	if r.cfg.AutoFail {
		include = "1"
	}
	res, err := reapScript.Run(ctx, r.store.rdb, []string{KeyWorking, KeyReaperReported},
		r.cfg.Threshold, include).Slice()
	if err != nil {
		return nil, wrap("reaper cycle", err)
	}
	dead := make([]DeadJob, 0, len(res))
	for _, row := range res {
		f, ok := row.([]any)
		if !ok || len(f) < 8 {
			return nil, fmt.Errorf("reaper cycle: unexpected reply %v", row)
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		checks, _ := f[6].(int64)
		reported, _ := f[7].(int64)
		dead = append(dead, DeadJob{
			Ident: str(0), URL: str(1), StartedBy: str(2), StartedIn: str(3),
			PipelineID: str(4), PipelineNick: str(5),
			Checks: checks, Reported: reported == 1,
		})
	}
	return dead, nil
}

// runOnce is one reaper cycle: advance the death timers, announce each new
// death once in the job's channel, and with AutoFail fail the job.
//
// The announcement comes first and is remembered in KeyReaperReported
// only once Announce succeeded: while IRC is down the dead job stays in
// `working` unannounced and is announced when IRC is back. With AutoFail
// the job is failed right after; if that fails, the next cycle retries it
// without announcing again.
func (r *Reaper) runOnce(ctx context.Context) error {
	dead, err := r.cycle(ctx)
	if err != nil {
		return err
	}
	for _, d := range dead {
		log := r.log.With("ident", d.Ident)
		if !d.Reported {
			log.Warn("no heartbeat", "url", d.URL, "silent", r.Silent(d), "pipeline", d.PipelineID)
			if err := announceIn(ctx, r.ann, r.log, d.StartedIn, r.deathLine(d)); err != nil {
				return fmt.Errorf("announce dead job %s: %w", d.Ident, err)
			}
			if err := r.store.rdb.SAdd(ctx, KeyReaperReported, d.Ident).Err(); err != nil {
				return wrap("remember dead job "+d.Ident, err)
			}
		}
		if !r.cfg.AutoFail {
			continue
		}
		reason := "no heartbeat for " + shortDuration(r.Silent(d))
		_, err := r.store.FailJob(ctx, d.Ident, reason)
		switch {
		case err == nil:
			log.Warn("failed dead job", "reason", reason)
		case errors.Is(err, ErrNoJob), errors.Is(err, ErrJobFinished):
			// It finished or expired since the cycle: nothing to fail.
			log.Info("dead job finished before it could be failed", "err", err)
		default:
			return err
		}
	}
	return nil
}

// deathLine is the channel line for a dead job: "no heartbeat" with the
// ident, URL, the pipeline and how long, addressed to whoever queued it.
func (r *Reaper) deathLine(d DeadJob) string {
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
	if d.StartedBy != "" {
		text = d.StartedBy + ": " + text
	}
	return text
}

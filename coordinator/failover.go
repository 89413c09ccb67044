package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/store"
)

// DefaultFailoverCheckInterval is how often the leader asks the master
// for its replication ID, to see a failover: a second, as Sentinel's own
// checks.
const DefaultFailoverCheckInterval = time.Second

// HoldRechecker re-reads the jobs held under the pipeline API whose take
// lacks returns true for, releases those Redis no longer gives their key
// (telling the key's control streams at once), and returns their idents
// (pipelineapi.Server.RecheckHolds).
type HoldRechecker interface {
	RecheckHolds(ctx context.Context, lacks func(store.ReplPos) bool) ([]string, error)
}

// FailoverCheck is a node's watch over Redis failovers. Redis
// replicates asynchronously: WAIT makes a write reach a replica, not the
// replica that will be promoted, and a take is not waited for at all. So
// after each change of master (a new replication ID) it compares where
// the new master's history ends with where this node's writes ended
// (store.Positions: the last write WAIT confirmed, and each take under the
// pipeline API), through the replication ID history (a promoted replica
// holds its old master's stream up to second_repl_offset-1). When the new
// master lacks any of them it logs it, counts it, re-checks the holds
// made in that window (a pipeline holding a job Redis has forgotten is
// told at once, not at its next write), and says it once in every
// channel (archivebot:admin_notices) while it leads. doc/reliability.md,
// A failover that loses writes.
type FailoverCheck struct {
	store Store
	pos   *store.Positions
	holds HoldRechecker // nil: no pipeline API
	log   *slog.Logger
	// Leading, when set (ha.enabled: the lease's Valid), says whether
	// this node leads now. Every node runs the check, since a failover
	// can move the leadership too (a lease_ttl shorter than the
	// failover): the node that made the writes judges them, logs and
	// counts what was lost wherever it stands, and says it in the
	// channel only while it leads (a follower never writes): at once,
	// or when it next leads, within noticeKeep. Set it before Run.
	Leading func() bool

	// notice is a line to queue that could not be yet (Redis away, or
	// not leading), noticed at noticeAt.
	notice   string
	noticeAt time.Time
	failing  bool
}

// noticeKeep is how long a node that noticed a loss while not leading
// keeps the line for the channel, in case it leads again.
const noticeKeep = 10 * time.Minute

// NewFailoverCheck returns the check of pos, the positions st notes (a
// store made with store.WithPositions: st.Positions()); holds may be nil.
func NewFailoverCheck(st Store, pos *store.Positions, holds HoldRechecker, log *slog.Logger) *FailoverCheck {
	return &FailoverCheck{store: st, pos: pos, holds: holds, log: serviceLog(log, "failover-check")}
}

// Run checks every DefaultFailoverCheckInterval until ctx ends.
func (f *FailoverCheck) Run(ctx context.Context) {
	run.Every(ctx, f.log, "failover-check", run.Schedule{Interval: DefaultFailoverCheckInterval, Now: true}, func(ctx context.Context) {
		err := f.Check(ctx)
		switch {
		case err != nil && !f.failing && ctx.Err() == nil:
			f.failing = true
			f.log.Warn("cannot check the Redis master's replication state; retrying every second", "err", err)
		case err == nil && f.failing:
			f.failing = false
			f.log.Info("checking the Redis master's replication state again")
		}
	})
}

func (f *FailoverCheck) leading() bool { return f.Leading == nil || f.Leading() }

// say queues the pending line for every channel, if this node leads.
func (f *FailoverCheck) say(ctx context.Context) error {
	if f.notice == "" {
		return nil
	}
	if time.Since(f.noticeAt) > noticeKeep {
		f.log.Warn("a lost-writes line was never said in the channel: this node did not lead again in time", "line", f.notice)
		f.notice = ""
		return nil
	}
	if !f.leading() {
		return nil
	}
	if err := f.store.PushAdminNotice(ctx, store.AdminNotice{Text: f.notice}); err != nil {
		return err
	}
	f.notice = ""
	return nil
}

// Check is one cycle: it reads the master's replication state and, at a
// change of master, judges it.
func (f *FailoverCheck) Check(ctx context.Context) error {
	if err := f.say(ctx); err != nil {
		return err
	}
	ri, err := f.store.MasterReplication(ctx)
	if err != nil {
		return err
	}
	if ri.Role != "master" || ri.ID == "" {
		return nil // a demoted master still answering: the client moves on
	}
	prev := f.pos.Watched(ri.ID)
	if prev == "" || prev == ri.ID {
		return nil
	}
	return f.judge(ctx, prev, ri)
}

// judge compares the new master ri with this node's writes.
func (f *FailoverCheck) judge(ctx context.Context, prev string, ri store.ReplInfo) error {
	conf, op, at := f.pos.LastConfirmed()
	lost, known := false, true
	if !conf.Zero() {
		var held bool
		held, known = f.pos.Holds(ri, conf)
		lost = known && !held
	}
	// A take the new master lacks, or one its history cannot place.
	lacks := func(p store.ReplPos) bool {
		if p.Zero() || p.ID == ri.ID {
			return false
		}
		held, ok := f.pos.Holds(ri, p)
		return !ok || !held
	}
	var released []string
	if f.holds != nil {
		var err error
		if released, err = f.holds.RecheckHolds(ctx, lacks); err != nil {
			// Watch this change again next cycle: its holds are unchecked.
			f.pos.Watched(prev)
			return fmt.Errorf("re-check the holds after a change of master: %w", err)
		}
	}
	metrics.LostTakes(len(released))
	attrs := []any{"previous_replid", prev, "replid", ri.ID, "replid2", ri.ID2, "second_repl_offset", ri.SecondOffset,
		"master_repl_offset", ri.Offset, "last_confirmed_replid", conf.ID, "last_confirmed_offset", conf.Offset,
		"last_confirmed_write", op, "lost_takes", len(released), "released", released}
	verdict := "held"
	switch {
	case lost || len(released) > 0:
		verdict = "lost"
	case !known:
		verdict = "unknown"
	}
	metrics.FailoverChecked(verdict)
	switch verdict {
	case "held":
		f.log.Info("the Redis master changed; the new master holds every write this node acknowledged", attrs...)
		return nil
	case "unknown":
		f.log.Warn("the Redis master changed and its replication history does not say whether it holds this node's last confirmed write (more failovers than this node saw)", attrs...)
		return nil
	}
	f.log.Error("a Redis failover lost writes this node acknowledged: the new master lacks them", append(attrs, "leading", f.leading())...)
	text := lostNotice(lost, conf, op, at, ri, released)
	if f.notice != "" {
		text = f.notice + " " + text // an earlier one not yet said
	}
	if !f.leading() {
		text += fmt.Sprintf(" (noticed at %s UTC by a node that did not lead then)", time.Now().UTC().Format("15:04:05"))
	}
	f.notice, f.noticeAt = text, time.Now()
	return f.say(ctx) // else said at a later cycle
}

// LostNoticePrefix starts the line the leader says in every channel when
// a Redis failover lost writes it acknowledged (the soak's checker looks
// for it).
const LostNoticePrefix = "Redis failover lost writes:"

// maxNamed bounds the idents a notice names.
const maxNamed = 5

func lostNotice(lost bool, conf store.ReplPos, op string, at time.Time, ri store.ReplInfo, released []string) string {
	var b strings.Builder
	b.WriteString(LostNoticePrefix)
	if lost {
		behind := conf.Offset - ri.SecondOffset + 1
		if conf.ID == ri.ID2 && behind > 0 {
			fmt.Fprintf(&b, " the new master is %d bytes short of this node's last confirmed write (%s, %s UTC);", behind, op, at.UTC().Format("15:04:05"))
		} else {
			fmt.Fprintf(&b, " the new master lacks this node's last confirmed write (%s, %s UTC);", op, at.UTC().Format("15:04:05"))
		}
		b.WriteString(" commands acknowledged just before it may be undone.")
	}
	if n := len(released); n > 0 {
		names := released
		if n > maxNamed {
			names = names[:maxNamed]
		}
		fmt.Fprintf(&b, " %d takes lost; their pipelines were told to let go: %s", n, strings.Join(names, ", "))
		if n > maxNamed {
			fmt.Fprintf(&b, " and %d more", n-maxNamed)
		}
		b.WriteString(".")
	}
	return b.String()
}

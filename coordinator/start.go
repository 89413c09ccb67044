package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
)

// StartConfig configures start notices (see doc/protocol.md, Start
// notices). Zero values take the defaults of package config.
type StartConfig struct {
	// Interval between two scans of `working`.
	Interval time.Duration
	// Notify is notifier.start_notices: whether jobs without their own
	// choice (--notify-start / --no-notify-start) are announced. Services
	// built without a config (tests) get false; cmd/archivebot passes the
	// configured value.
	Notify bool
	// Batch is the most notices one cycle delivers.
	Batch int
}

func (c StartConfig) orDefaults() StartConfig {
	orDefault(&c.Interval, config.DefaultStartInterval)
	orDefault(&c.Batch, config.DefaultFinishBatch)
	return c
}

// StartNotice is a start notice document (start_scan.lua writes it).
type StartNotice struct {
	Ident      string `json:"ident"`
	URL        string `json:"url"`
	StartedBy  string `json:"started_by"`
	StartedIn  string `json:"started_in"`
	PipelineID string `json:"pipeline_id"`
	Pipeline   string `json:"pipeline"`
}

// Line is "NICK: Your job for URL has started on PIPELINE. (IDENT)"; the
// pipeline's nickname, or its id when it has none.
func (n StartNotice) Line() string {
	on := n.Pipeline
	if on == "" {
		on = n.PipelineID
	}
	if on == "" {
		on = "a pipeline"
	}
	return addressed(n.StartedBy, fmt.Sprintf("Your job for %s has started on %s. (%s)", n.URL, on, n.Ident))
}

// StartNotifier notices the jobs pipelines take (nothing is published
// when a pipeline takes a job: it scans `working`, on a timer and at once
// when an `updates` message names a job it has not seen start) and tells
// their channel once: at least once across crashes, never twice in normal
// operation. The scan marks a job seen and queues its notice in one atomic
// step (Store.ScanStarts); the notice moves into a processing list while
// its line is sent, and is acknowledged only once Announce reports it
// written to the IRC socket (store.DeliveryQueue and the drain loop of
// deliver.go, as for finish notices).
type StartNotifier struct {
	store Store
	ann   news.Announcer
	cfg   StartConfig
	log   *slog.Logger

	trigger chan struct{}
	mu      sync.Mutex
	seen    map[string]struct{} // idents seen started by this process
	// jobs logs jobs taken and failed from the same read of `working`.
	jobs    *jobWatch
	badKeys *badkeys.Summary // members of working that are not jobs
}

// NewStartNotifier returns a start notifier; zero config values take their
// defaults.
func NewStartNotifier(st Store, ann news.Announcer, cfg StartConfig, log *slog.Logger) *StartNotifier {
	return &StartNotifier{store: st, ann: ann, cfg: cfg.orDefaults(), log: serviceLog(log, "start-notifier"),
		trigger: make(chan struct{}, 1), seen: map[string]struct{}{}, jobs: newJobWatch(st, log),
		badKeys: workingSummary("start-notifier", "not jobs: no start notice, no history")}
}

// Notify is the `updates` callback: a message about a job not seen
// starting yet asks for a scan now. It never blocks.
func (n *StartNotifier) Notify(_ context.Context, ident string) {
	n.mu.Lock()
	_, ok := n.seen[ident]
	n.mu.Unlock()
	if ok {
		return
	}
	select {
	case n.trigger <- struct{}{}:
	default:
	}
}

// runOnce scans `working`, then delivers what the processing list holds
// and the new notices. The first Announce error ends the cycle: the
// notice stays in the processing list and is the first delivered next
// time.
func (n *StartNotifier) runOnce(ctx context.Context) error {
	sc, err := n.store.ScanStarts(ctx, n.cfg.Notify)
	if err != nil {
		return err
	}
	if sc.Started > 0 {
		n.log.Debug("jobs started", "count", sc.Started, "notices", sc.Notices)
	}
	if sc.Unannounced > 0 {
		n.log.Info("first start scan against this Redis: jobs already running before this node first started get no start notice",
			"jobs", sc.Unannounced)
	}
	for _, id := range sc.Skipped {
		n.badKeys.Add(id)
	}
	n.badKeys.End(n.log, time.Now())
	n.rememberWorking(ctx, sc.Working, sc.Skipped)
	return drain(ctx, n.store, store.StartQueue, n.cfg.Batch, n.ann, n.log, n.hand)
}

// rememberWorking keeps the idents the scan read from `working` as seen,
// so that their `updates` messages do not ask for scans, and logs the
// jobs taken and failed since the last scan (not the bad members, which
// the scan's summary counts).
func (n *StartNotifier) rememberWorking(ctx context.Context, ids, bad []string) {
	n.jobs.observe(ctx, ids, bad)
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		seen[id] = struct{}{}
	}
	n.mu.Lock()
	n.seen = seen
	n.mu.Unlock()
}

// hand posts doc's line (a handOff). A document that cannot be read is
// logged and reported delivered: retrying would never succeed.
func (n *StartNotifier) hand(ctx context.Context, doc string, done func(error)) {
	var sn StartNotice
	if err := json.Unmarshal([]byte(doc), &sn); err != nil || sn.Ident == "" {
		n.log.Error("dropping malformed start notice", "doc", doc, "err", err)
		done(nil)
		return
	}
	line := sn.Line()
	if err := announceIn(ctx, n.ann, n.log, sn.StartedIn, line); err != nil {
		done(fmt.Errorf("announce start of %s: %w", sn.Ident, err))
		return
	}
	n.log.Info("start reported", "ident", sn.Ident, "channel", sn.StartedIn, "line", line)
	done(nil)
}

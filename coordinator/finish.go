package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/ident"
)

// FinishConfig configures the finish notifier (see doc/protocol.md,
// Finish notices). Zero values take the defaults of package config.
type FinishConfig struct {
	// Interval between two cycles.
	Interval time.Duration
	// Batch is the most notices one cycle delivers.
	Batch int
	// PushGap is the least time between two cycles started by `updates`
	// messages (see Services.pushFinish).
	PushGap time.Duration
}

func (c FinishConfig) orDefaults() FinishConfig {
	orDefault(&c.Interval, config.DefaultFinishInterval)
	orDefault(&c.Batch, config.DefaultFinishBatch)
	orDefault(&c.PushGap, config.DefaultFinishPushGap)
	return c
}

// FinishNotice is the document a pipeline RPUSHes on finish_notifications
// when a job ends (see doc/protocol.md, Finish notices). Only the fields the report needs are
// decoded; the rest are kept as they came.
type FinishNotice struct {
	Aborted    flexBool        `json:"aborted"`
	FetchDepth json.RawMessage `json:"fetch_depth,omitempty"`
	PipelineID json.RawMessage `json:"pipeline_id,omitempty"`
	QueuedAt   json.RawMessage `json:"queued_at,omitempty"`
	StartedBy  string          `json:"started_by"`
	StartedIn  string          `json:"started_in"`
	URL        string          `json:"url"`
	URLFile    json.RawMessage `json:"url_file,omitempty"`
}

// flexBool decodes true, false, null, "true" and "false".
type flexBool bool

func (b *flexBool) UnmarshalJSON(p []byte) error {
	switch string(bytes.TrimSpace(p)) {
	case "true", `"true"`:
		*b = true
	case "false", `"false"`, "null", `""`:
		*b = false
	default:
		return fmt.Errorf("aborted: not a boolean: %s", p)
	}
	return nil
}

// ParseFinishNotice decodes a finish notification; it needs a url.
func ParseFinishNotice(doc string) (FinishNotice, error) {
	var n FinishNotice
	if err := json.Unmarshal([]byte(doc), &n); err != nil {
		return n, err
	}
	if n.URL == "" {
		return n, errors.New("no url")
	}
	return n, nil
}

// pipelineID is the notice's pipeline_id, "" when it is null or not a
// string.
func (n FinishNotice) pipelineID() string {
	var id string
	_ = json.Unmarshal(n.PipelineID, &id)
	return id
}

// Line is the channel line for the notice, with the job's ident computed
// from its (already normalized) url:
// "NICK: Your job for URL has finished. (IDENT)" or "… was aborted. (IDENT)".
func (n FinishNotice) Line() string {
	how := "has finished"
	if n.Aborted {
		how = "was aborted"
	}
	text := fmt.Sprintf("Your job for %s %s. (%s)", n.URL, how, ident.Of(n.URL))
	if n.StartedBy != "" {
		text = n.StartedBy + ": " + text
	}
	return text
}

// FinishNotifier turns finish_notifications into channel lines, at least
// once and, in normal operation, exactly once: each document is moved into
// delivery (Store.TakeFinishNotice) before its line is sent, and
// acknowledged (Store.AckFinishNotice) only once Announce reports the line
// written to the IRC socket.
// Whatever is left in the processing list (a crash, IRC down) is delivered
// first on the next cycle, in order.
type FinishNotifier struct {
	store *store.Store
	ann   Announcer
	cfg   FinishConfig
	log   *slog.Logger
	// onNotice, when set, is called with the ident of every notice read;
	// Services points it at the analyzer so a job's last log entries are
	// counted even when their `updates` messages were lost.
	onNotice func(ctx context.Context, ident string)
}

// NewFinishNotifier returns a finish notifier; zero config values take
// their defaults.
func NewFinishNotifier(store *store.Store, ann Announcer, cfg FinishConfig, log *slog.Logger) *FinishNotifier {
	if log == nil {
		log = slog.Default()
	}
	return &FinishNotifier{store: store, ann: ann, cfg: cfg.orDefaults(), log: log.With("service", "finish-notifier")}
}

// runOnce delivers what the processing list holds, then up to Batch new
// notices. The first Announce error ends the cycle: the notice stays in the
// processing list and is the first delivered next time.
func (f *FinishNotifier) runOnce(ctx context.Context) error {
	if fa, ok := f.ann.(FinishAnnouncer); ok {
		return f.runBatch(ctx, fa)
	}
	sent := 0
	left, err := f.store.FinishNoticesInDelivery(ctx, f.cfg.Batch)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		f.log.Info("delivering notices left from an earlier run", "count", len(left))
	}
	for _, doc := range left {
		if err := f.deliver(ctx, doc); err != nil {
			return err
		}
		sent++
	}
	for ; sent < f.cfg.Batch; sent++ {
		doc, ok, err := f.store.TakeFinishNotice(ctx)
		if err != nil || !ok {
			return err
		}
		if err := f.deliver(ctx, doc); err != nil {
			return err
		}
	}
	return nil
}

// observe does what the node does once it sees a job has ended, before
// its report goes out: the analyzer reads the job's last log entries, the
// job joins the index of finished jobs (/finished) and its history gets
// its last entry. Both delivery paths
// (one line at a time, and combined by the front end) call it.
func (f *FinishNotifier) observe(ctx context.Context, n FinishNotice) {
	id := ident.Of(n.URL)
	if f.onNotice != nil {
		f.onNotice(ctx, id)
	}
	if err := f.store.IndexFinished(ctx, id); err != nil {
		f.log.Warn("could not add the job to the index of finished jobs (/finished)", "ident", id, "err", err)
	}
	if err := f.store.RecordJobEnd(ctx, id, bool(n.Aborted), n.pipelineID()); err != nil {
		f.log.Warn("could not record the end of the job in its history", "ident", id, "err", err)
	}
}

// deliver posts doc's line and acknowledges it. A document that cannot be
// read is logged and acknowledged: retrying would never succeed.
func (f *FinishNotifier) deliver(ctx context.Context, doc string) error {
	n, err := ParseFinishNotice(doc)
	if err != nil {
		f.log.Error("dropping malformed finish notification", "doc", doc, "err", err)
	} else {
		f.observe(ctx, n)
		line := n.Line()
		if err := announceIn(ctx, f.ann, f.log, n.StartedIn, line); err != nil {
			return fmt.Errorf("announce finish of %s: %w", n.URL, err)
		}
		msg := "job finished"
		if n.Aborted {
			msg = "job aborted"
		}
		f.log.Info(msg, "ident", ident.Of(n.URL), "channel", n.StartedIn, "line", line)
	}
	// The line is out: acknowledging must not be cut short by shutdown.
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return f.store.AckFinishNotice(ackCtx, doc)
}

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
	"github.com/archiveteam/archivebot-go/ident"
	"github.com/archiveteam/archivebot-go/internal/text"
	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/record"
	"github.com/archiveteam/archivebot-go/store"
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
	return addressed(n.StartedBy, fmt.Sprintf("Your job for %s %s. (%s)", n.URL, how, ident.Of(n.URL)))
}

// FinishNotifier turns finish_notifications into channel lines, at least
// once and, in normal operation, exactly once (store.NoticeQueue, the
// drain loop of deliver.go): each document is moved into delivery before
// its line is sent, and acknowledged only once the front end reports the
// line written to the IRC socket. Whatever is left in the processing list
// (a crash, IRC down) is delivered first on the next cycle, in order.
type FinishNotifier struct {
	store Store
	ann   news.Announcer
	cfg   FinishConfig
	log   *slog.Logger
	// onNotice, when set, is called with the ident of every notice read;
	// Services points it at the analyzer so a job's last log entries are
	// counted even when their `updates` messages were lost.
	onNotice func(ctx context.Context, id string)
}

// NewFinishNotifier returns a finish notifier; zero config values take
// their defaults.
func NewFinishNotifier(st Store, ann news.Announcer, cfg FinishConfig, log *slog.Logger) *FinishNotifier {
	return &FinishNotifier{store: st, ann: ann, cfg: cfg.orDefaults(), log: serviceLog(log, "finish-notifier")}
}

// runOnce delivers what the processing list holds, then up to Batch new
// notices. The first failure ends the cycle: the notice stays in the
// processing list and is the first delivered next time.
func (f *FinishNotifier) runOnce(ctx context.Context) error {
	return drain(ctx, f.store, store.FinishQueue, f.cfg.Batch, f.ann, f.log, f.hand)
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

// failed tells whether the record that speaks for ident is its failure
// record (record.Speaking): the job was failed, and no registration of the
// same ident came after.
func (f *FinishNotifier) failed(ctx context.Context, id string) (bool, error) {
	fail, err := f.store.GetFailure(ctx, id)
	if err != nil || fail == nil {
		return false, err
	}
	j, err := f.store.GetJob(ctx, id)
	var notJob *store.NotAJobError
	if err != nil && !errors.As(err, &notJob) {
		return false, err
	}
	_, fail = record.Speaking(j, fail)
	return fail != nil, nil
}

// hand delivers doc (a handOff): to a front end that combines reports
// (FinishAnnouncer) without waiting for its line, else with Announce. A
// document that cannot be read is logged and reported delivered: retrying
// would never succeed.
func (f *FinishNotifier) hand(ctx context.Context, doc string, done func(error)) {
	n, err := ParseFinishNotice(doc)
	if err != nil {
		f.log.Error("dropping malformed finish notification", "doc", doc, "err", err)
		done(nil)
		return
	}
	id := ident.Of(n.URL)
	failed, err := f.failed(ctx, id)
	if err != nil {
		done(fmt.Errorf("read the record of %s before its finish report: %w", id, err))
		return
	}
	if failed {
		// The job was failed (!fail, the reaper) while its pipeline ran
		// it; the pipeline, never told, marked it done later. The failure
		// record speaks for the job (doc/protocol.md, Which record speaks
		// for a job): no "has finished" line, no end in its history.
		f.log.Info("a failed job's pipeline finished it later; not reported as finished", "ident", id, "channel", n.StartedIn, "aborted", bool(n.Aborted))
		done(nil)
		return
	}
	f.observe(ctx, n)
	if fa, ok := f.ann.(news.FinishAnnouncer); ok {
		r := news.FinishReport{Channel: n.StartedIn, Nick: n.StartedBy, URL: n.URL, Ident: id, Aborted: bool(n.Aborted), Line: text.Clean(n.Line(), text.Untrusted)}
		fa.AnnounceFinish(ctx, r, func(err error) {
			switch {
			case err == nil:
				f.log.Info("finish reported", "ident", id, "channel", n.StartedIn, "line", n.Line())
			case errors.Is(err, news.ErrCannotDeliver):
				f.log.Warn("cannot deliver line, dropping it", "ident", id, "channel", n.StartedIn, "line", n.Line(), "err", err)
				err = nil
			default:
				err = fmt.Errorf("announce finish of %s: %w", n.URL, err)
			}
			done(err)
		})
		return
	}
	line := n.Line()
	if err := announceIn(ctx, f.ann, f.log, n.StartedIn, line); err != nil {
		done(fmt.Errorf("announce finish of %s: %w", n.URL, err))
		return
	}
	msg := "job finished"
	if n.Aborted {
		msg = "job aborted"
	}
	f.log.Info(msg, "ident", id, "channel", n.StartedIn, "line", line)
	done(nil)
}

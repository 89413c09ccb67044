package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator/store"
)

// DefaultAdminNoticeInterval is how often the node looks for lines the
// operator's commands left in archivebot:admin_notices.
const DefaultAdminNoticeInterval = 2 * time.Second

// AdminNotifier delivers the lines `archivebot` subcommands queue in
// archivebot:admin_notices (a fail, a requeue), with the finish notifier's
// at-least-once pattern: each document moves into a processing list before
// its line is sent and is removed only once Announce reports it written;
// what is left there is delivered first next cycle.
type AdminNotifier struct {
	store *store.Store
	ann   Announcer
	log   *slog.Logger
	batch int
}

// NewAdminNotifier returns an admin notifier.
func NewAdminNotifier(store *store.Store, ann Announcer, log *slog.Logger) *AdminNotifier {
	if log == nil {
		log = slog.Default()
	}
	return &AdminNotifier{store: store, ann: ann, log: log.With("service", "admin-notices"), batch: 100}
}

// runOnce delivers what the processing list holds, then up to a batch of
// new notices; the first Announce error ends the cycle.
func (a *AdminNotifier) runOnce(ctx context.Context) error {
	left, err := a.store.AdminNoticesInDelivery(ctx, a.batch)
	if err != nil {
		return err
	}
	for _, doc := range left {
		if err := a.deliver(ctx, doc); err != nil {
			return err
		}
	}
	for sent := len(left); sent < a.batch; sent++ {
		doc, ok, err := a.store.TakeAdminNotice(ctx)
		if err != nil || !ok {
			return err
		}
		if err := a.deliver(ctx, doc); err != nil {
			return err
		}
	}
	return nil
}

// deliver says doc's line and acknowledges it; a document that cannot be
// read is logged and acknowledged.
func (a *AdminNotifier) deliver(ctx context.Context, doc string) error {
	var n store.AdminNotice
	if err := json.Unmarshal([]byte(doc), &n); err != nil || n.Text == "" {
		a.log.Error("dropping malformed admin notice", "doc", doc, "err", err)
	} else {
		if err := announceIn(ctx, a.ann, a.log, n.Channel, n.Text); err != nil {
			return fmt.Errorf("announce admin notice: %w", err)
		}
		a.log.Info("admin notice delivered", "channel", n.Channel, "line", n.Text)
	}
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return a.store.AckAdminNotice(ackCtx, doc)
}

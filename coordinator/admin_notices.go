package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/archiveteam/archivebot-go/news"
	"github.com/archiveteam/archivebot-go/store"
)

// DefaultAdminNoticeInterval is how often the node looks for lines the
// operator's commands left in archivebot:admin_notices.
const DefaultAdminNoticeInterval = 2 * time.Second

// AdminNotifier delivers the lines `archivebot` subcommands queue in
// archivebot:admin_notices (a fail, a requeue), at least once, as finish
// notices are (store.NoticeQueue and the drain loop of deliver.go): each
// document moves into a processing list before its line is sent and is
// removed only once Announce reports it written; what is left there is
// delivered first next cycle.
type AdminNotifier struct {
	store Store
	ann   news.Announcer
	log   *slog.Logger
	batch int
}

// NewAdminNotifier returns an admin notifier.
func NewAdminNotifier(st Store, ann news.Announcer, log *slog.Logger) *AdminNotifier {
	return &AdminNotifier{store: st, ann: ann, log: serviceLog(log, "admin-notices"), batch: 100}
}

// runOnce delivers what the processing list holds, then up to a batch of
// new notices; the first failure ends the cycle.
func (a *AdminNotifier) runOnce(ctx context.Context) error {
	return drain(ctx, a.store, store.AdminQueue, a.batch, a.ann, a.log, a.hand)
}

// hand says doc's line (a handOff); a document that cannot be read is
// logged and reported delivered.
func (a *AdminNotifier) hand(ctx context.Context, doc string, done func(error)) {
	var n store.AdminNotice
	if err := json.Unmarshal([]byte(doc), &n); err != nil || n.Text == "" {
		a.log.Error("dropping malformed admin notice", "doc", doc, "err", err)
		done(nil)
		return
	}
	if err := announceIn(ctx, a.ann, a.log, n.Channel, n.Text); err != nil {
		done(fmt.Errorf("announce admin notice: %w", err))
		return
	}
	a.log.Info("admin notice delivered", "channel", n.Channel, "line", n.Text)
	done(nil)
}

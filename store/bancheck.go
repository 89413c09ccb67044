package store

// The ban line (doc/pipeline-api.md, A ban shows itself): the first
// responses of a job, counted in Redis until they decide, and the channel
// line queued once in the same script that records it.

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/archiveteam/archivebot-go/record"
)

// KeyBanCheck (hash, ours) counts the first responses of a job for the ban
// line, then holds only `state`: posted or clear.
func KeyBanCheck(ident string) string { return "archivebot:ban_check:" + ident }

// BanCheckTTL is how long a job's ban check is kept after its last write:
// longer than jobs run, so a restart or a new leader does not count again.
const BanCheckTTL = 90 * 24 * time.Hour

// Ban check states (BanCheck's answer).
const (
	BanCounting = "counting" // fewer than N responses seen, all errors
	BanPosted   = "posted"   // the line was queued now
	BanDone     = "done"     // decided before; nothing written
	BanClear    = "clear"    // a response that is not an error: no line
)

// BanLabel is what one log entry adds to the ban check: "" when it is no
// response (not a download entry), "ok" for a response that is not an
// error, else the error: "403", "429", the 5xx code, or "network" (no
// HTTP status: code 0 or absent, with is_error).
func BanLabel(e record.LogEntry) string {
	if e.Kind != record.EntryObject || e.Type != "download" {
		return ""
	}
	c := e.Code
	switch {
	case c == 403 || c == 429 || (c >= 500 && c < 600):
		return strconv.Itoa(int(c))
	case c <= 0 && e.IsError:
		return "network"
	}
	return "ok"
}

// BanCheck adds labels (BanLabel's, "" left out by the caller) to the
// ban check of ident, held by pipeline on site; n is how many first
// responses decide. When the first n are all errors, the line is queued
// as an admin notice to the job's channel, in the same step that records
// it; text is the line then.
func (s *Store) BanCheck(ctx context.Context, ident, pipeline, site string, n int, labels []string) (state, text string, err error) {
	if n <= 0 || len(labels) == 0 {
		return BanCounting, "", nil
	}
	if len(labels) > n {
		labels = labels[:n]
	}
	args := make([]any, 0, 5+len(labels))
	args = append(args, n, int64(BanCheckTTL/time.Second), pipeline, site, ident)
	for _, l := range labels {
		args = append(args, l)
	}
	res, err := banCheckScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyBanCheck(ident), KeyJob(ident), KeyAdminNotices}, args...).Slice()
	if err != nil {
		return "", "", wrap("ban check of "+ident, err)
	}
	if len(res) != 2 {
		return "", "", errors.New("ban check: unexpected reply")
	}
	state, _ = res[0].(string)
	text, _ = res[1].(string)
	return state, text, nil
}

// SiteOf is the registered domain of a job URL's host (the host itself
// when it has none, such as an IP address), as the ban line names it.
func SiteOf(url string) string {
	h := hostOf(url)
	if d, err := publicsuffix.EffectiveTLDPlusOne(h); err == nil {
		return d
	}
	return h
}

// KeyAllAvoid (string, ours) marks a queued job whose "every pipeline
// avoids its site" line was queued (AllAvoidNotice).
func KeyAllAvoid(ident string) string { return "archivebot:all_avoid:" + ident }

// KeyAllAvoidSite marks that an "every pipeline avoids its site" line
// was queued for the avoid rule site in the current period
// (AllAvoidNotice).
func KeyAllAvoidSite(site string) string { return "archivebot:all_avoid_site:" + site }

// AllAvoid is what AllAvoidNotice did.
type AllAvoid int

const (
	// AllAvoidBefore: the job's line was queued (or covered) before.
	AllAvoidBefore AllAvoid = iota
	// AllAvoidQueued: the line was queued now.
	AllAvoidQueued
	// AllAvoidCovered: the site had its line this period; the job is
	// marked as told, and no line is queued.
	AllAvoidCovered
)

// AllAvoidNotice queues n for ident once, and at most one such line per
// site (the avoid rule) and period (0: no bound per site): the markers
// and the notice in one script (notice_once).
func (s *Store) AllAvoidNotice(ctx context.Context, ident, site string, period time.Duration, n AdminNotice) (AllAvoid, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	v, err := noticeOnceScript.Run(s.apiCtx(ctx), s.rdb, []string{KeyAllAvoid(ident), KeyAdminNotices, KeyAllAvoidSite(site)},
		int64(BanCheckTTL/time.Second), b, int64(period/time.Second)).Int64()
	if err != nil {
		return 0, wrap("queue the all-avoid line of "+ident, err)
	}
	return AllAvoid(v), nil
}

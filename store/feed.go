package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store operations of the feed's networks (see doc/protocol.md, Tweets).
// Every network (x, mastodon, bluesky, or dryrun when none is configured)
// keeps its own progress on each text of tweets:queue in
// archivebot:feed:NET:state; a text leaves tweets:queue once every
// configured network has posted it, carried it in a digest or given up on
// it. Each change is one Lua script.

// FeedNets names the configured networks, in a fixed order; every feed
// call takes it, since a text leaves the queue only when all are done.
type FeedNets []string

func (n FeedNets) index(net string) (int, error) {
	for i, v := range n {
		if v == net {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("feed: network %q is not among %q", net, []string(n))
}

func (n FeedNets) stateKeys() []string {
	keys := make([]string, len(n))
	for i, v := range n {
		keys[i] = KeyFeedState(v)
	}
	return keys
}

// FeedItem is a queued text and the job URL it was made from ("" when
// another program queued it).
type FeedItem struct {
	Text, URL string
}

// FeedAttempt is a post claimed on a network: sent, or about to be.
type FeedAttempt struct {
	// Key identifies the attempt; posters use it as an idempotency key.
	Key string `json:"-"`
	// At is when it was claimed (UNIX ms).
	At int64 `json:"at"`
	// Post is the text sent.
	Post string `json:"post"`
	// Items are the queued texts it carries (one, or a digest's).
	Items  []string `json:"items"`
	Digest bool     `json:"digest,omitempty"`
	// Links are the post's link facets (Bluesky), kept to send it again.
	Links []FeedLink `json:"links,omitempty"`
}

// FeedLink is a span of a post (UTF-8 byte offsets, End exclusive) that
// links to URI.
type FeedLink struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	URI   string `json:"uri"`
}

// Time is At as a time.
func (a FeedAttempt) Time() time.Time { return time.UnixMilli(a.At) }

// FeedView is what one network has to do.
type FeedView struct {
	// Used is how many posts were claimed in the budget window; Oldest is
	// the earliest of them (zero when none): the window frees a post at
	// Oldest+window.
	Used   int
	Oldest time.Time
	// Pending counts the queued texts this network has not handled.
	Pending int
	// Unresolved are attempts never recorded (a crash or stop between
	// send and record), oldest first.
	Unresolved []FeedAttempt
	// Items are the oldest pending texts, oldest first.
	Items []FeedItem
}

// FeedView reads net's budget use, unresolved attempts and up to max of
// its oldest pending texts, finishing texts final on every network on the
// way.
func (s *Store) FeedView(ctx context.Context, nets FeedNets, net string, window time.Duration, max int) (FeedView, error) {
	var v FeedView
	i, err := nets.index(net)
	if err != nil {
		return v, err
	}
	keys := append([]string{KeyTweetsQueue, KeyTweetsDone, KeyTweetsFailed, KeyFeedURLs, KeyFeedAttempts(net), KeyFeedSent(net)}, nets.stateKeys()...)
	res, err := feedViewScript.Run(ctx, s.rdb, keys, i, s.Now().UnixMilli(), window.Milliseconds(), max).Slice()
	if err != nil {
		return v, wrap("feed view "+net, err)
	}
	if len(res) != 5 {
		return v, fmt.Errorf("feed view %s: unexpected script result %v", net, res)
	}
	used, _ := res[0].(int64)
	oldest, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	pending, _ := res[2].(int64)
	v.Used, v.Pending = int(used), int(pending)
	if oldest > 0 {
		v.Oldest = time.UnixMilli(oldest)
	}
	attempts, _ := res[3].([]any)
	for j := 0; j+1 < len(attempts); j += 2 {
		var a FeedAttempt
		raw, _ := attempts[j+1].(string)
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			return v, fmt.Errorf("feed view %s: attempt %v: %w", net, attempts[j], err)
		}
		a.Key, _ = attempts[j].(string)
		v.Unresolved = append(v.Unresolved, a)
	}
	for j := 1; j < len(v.Unresolved); j++ {
		for k := j; k > 0 && v.Unresolved[k].At < v.Unresolved[k-1].At; k-- {
			v.Unresolved[k], v.Unresolved[k-1] = v.Unresolved[k-1], v.Unresolved[k]
		}
	}
	items, _ := res[4].([]any)
	for j := 0; j+1 < len(items); j += 2 {
		text, _ := items[j].(string)
		u, _ := items[j+1].(string)
		v.Items = append(v.Items, FeedItem{Text: text, URL: u})
	}
	return v, nil
}

// Why FeedClaim refused.
const (
	FeedClaimed = ""
	FeedBudget  = "budget"
	FeedGone    = "gone"
)

// FeedClaim records attempt a on net before it is sent, and counts it
// against the budget (posts per window; 0: none). It returns FeedBudget
// when the budget is spent and FeedGone when a text is no longer pending
// on net; then nothing was written.
func (s *Store) FeedClaim(ctx context.Context, net string, a FeedAttempt, budget int, window time.Duration) (string, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	keys := []string{KeyTweetsQueue, KeyFeedAttempts(net), KeyFeedSent(net), KeyFeedState(net)}
	args := []any{a.At, window.Milliseconds(), budget, a.Key, string(raw)}
	for _, it := range a.Items {
		args = append(args, it)
	}
	res, err := feedClaimScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return "", wrap("feed claim "+net, err)
	}
	if len(res) >= 1 && res[0] == int64(1) {
		return FeedClaimed, nil
	}
	if len(res) >= 2 {
		if why, _ := res[1].(string); why == FeedBudget || why == FeedGone {
			return why, nil
		}
	}
	return "", fmt.Errorf("feed claim %s: unexpected script result %v", net, res)
}

// Outcomes for FeedResolve.
const (
	FeedPosted  = "posted"
	FeedFailed  = "failed"
	FeedRelease = "release"
)

// FeedResolve ends attempt key on net: FeedPosted, FeedFailed (reason is
// recorded) or FeedRelease (certainly not posted: the texts are pending
// again and the post no longer counts against the budget). It returns how
// many texts left tweets:queue; -1 when the attempt was resolved already.
func (s *Store) FeedResolve(ctx context.Context, nets FeedNets, net, key, outcome, reason string) (int, error) {
	i, err := nets.index(net)
	if err != nil {
		return 0, err
	}
	keys := append([]string{KeyTweetsQueue, KeyTweetsDone, KeyTweetsFailed, KeyFeedURLs,
		KeyFeedAttempts(net), KeyFeedSent(net), KeyFeedDigests(net), KeyFeedFailed(net)}, nets.stateKeys()...)
	n, err := feedResolveScript.Run(ctx, s.rdb, keys, i, s.Now().Unix(), key, outcome, reason).Int()
	return n, wrap("feed resolve "+net, err)
}

// FeedDigest is a digest a network posted and the texts it carried.
type FeedDigest struct {
	Key   string   `json:"key"`
	Post  string   `json:"post"`
	Items []string `json:"items"`
}

// FeedDigests lists net's recorded digests, oldest first.
func (s *Store) FeedDigests(ctx context.Context, net string) ([]FeedDigest, error) {
	return zrangeJSON[FeedDigest](ctx, s, KeyFeedDigests(net), "feed digests "+net)
}

// FeedFailure is a text a network gave up on, and why.
type FeedFailure struct {
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// FeedFailures lists the texts net gave up on, oldest first.
func (s *Store) FeedFailures(ctx context.Context, net string) ([]FeedFailure, error) {
	return zrangeJSON[FeedFailure](ctx, s, KeyFeedFailed(net), "feed failures "+net)
}

// zrangeJSON decodes every member of the sorted set key, lowest score
// first, as a T; what names the read in errors.
func zrangeJSON[T any](ctx context.Context, s *Store, key, what string) ([]T, error) {
	raw, err := s.rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, wrap(what, err)
	}
	out := make([]T, 0, len(raw))
	for _, r := range raw {
		var v T
		if err := json.Unmarshal([]byte(r), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// PruneFeed removes net's digests and give-ups recorded before
// now-maxAge, its sends older than window, and URLs of texts no longer
// queued.
func (s *Store) PruneFeed(ctx context.Context, net string, maxAge, window time.Duration) (digests, failed int64, err error) {
	now := s.Now()
	keys := []string{KeyFeedDigests(net), KeyFeedFailed(net), KeyFeedSent(net), KeyFeedURLs, KeyTweetsQueue}
	res, err := feedPruneScript.Run(ctx, s.rdb, keys, now.Add(-maxAge).Unix(), now.Add(-window).UnixMilli()).Int64Slice()
	if err != nil {
		return 0, 0, wrap("prune feed "+net, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("prune feed %s: unexpected script result %v", net, res)
	}
	return res[0], res[1], nil
}

// FeedSummaryDay is the UTC day of the last summary posted on net ("").
func (s *Store) FeedSummaryDay(ctx context.Context, net string) (string, error) {
	v, err := s.rdb.Get(ctx, KeyFeedSummary(net)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, wrap("feed summary "+net, err)
}

// SetFeedSummaryDay records that net's summary for day was posted.
func (s *Store) SetFeedSummaryDay(ctx context.Context, net, day string) error {
	return wrap("feed summary "+net, feedSummaryScript.Run(ctx, s.rdb, []string{KeyFeedSummary(net)}, day).Err())
}

// FeedDay counts what happened in [from, to) for the daily summary: texts
// queued for the feed (by their queue or posting time) and jobs that
// ended (finished, aborted or failed; archivebot:finished).
func (s *Store) FeedDay(ctx context.Context, from, to time.Time) (queued, ended int64, err error) {
	lo, hi := strconv.FormatInt(from.Unix(), 10), "("+strconv.FormatInt(to.Unix(), 10)
	pipe := s.rdb.Pipeline()
	q := pipe.ZCount(ctx, KeyTweetsQueue, lo, hi)
	d := pipe.ZCount(ctx, KeyTweetsDone, lo, hi)
	f := pipe.ZCount(ctx, KeyTweetsFailed, lo, hi)
	e := pipe.ZCount(ctx, KeyFinishedIndex, lo, hi)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, wrap("feed day", err)
	}
	return q.Val() + d.Val() + f.Val(), e.Val(), nil
}

// FeedNetStatus is what Redis holds about one network, for the operator.
type FeedNetStatus struct {
	Network string `json:"network"`
	// Queued counts tweets:queue; Handled the texts still in it that this
	// network is done with (posted, carried in a digest, given up, or in
	// flight) while another network still needs them, so pending on this
	// network is Queued - Handled. It is not a count of posts (that is
	// Used, within the budget window): after the queue drains it is 0,
	// which read as "nothing handled" under its old JSON name "handled".
	Queued  int64 `json:"queued"`
	Handled int64 `json:"queued_done_here"`
	// InFlight counts attempts sent or being sent and not yet recorded.
	InFlight int64 `json:"in_flight"`
	// Used counts the posts in the budget window ending now.
	Used int64 `json:"used"`
	// Digests and GaveUp count the records kept (pruned after the
	// retention); LastGaveUp is the latest give-up and its reason.
	Digests    int64        `json:"digests"`
	GaveUp     int64        `json:"gave_up"`
	LastGaveUp *FeedFailure `json:"last_gave_up,omitempty"`
	// SummaryDay is the UTC day of the last summary posted ("" none).
	SummaryDay string `json:"summary_day"`
}

// FeedStatus reads net's state without changing anything.
func (s *Store) FeedStatus(ctx context.Context, net string, window time.Duration) (FeedNetStatus, error) {
	st := FeedNetStatus{Network: net}
	now := s.Now()
	pipe := s.rdb.Pipeline()
	q := pipe.ZCard(ctx, KeyTweetsQueue)
	h := pipe.HLen(ctx, KeyFeedState(net))
	a := pipe.HLen(ctx, KeyFeedAttempts(net))
	u := pipe.ZCount(ctx, KeyFeedSent(net), "("+strconv.FormatInt(now.Add(-window).UnixMilli(), 10), "+inf")
	d := pipe.ZCard(ctx, KeyFeedDigests(net))
	f := pipe.ZCard(ctx, KeyFeedFailed(net))
	last := pipe.ZRange(ctx, KeyFeedFailed(net), -1, -1)
	day := pipe.Get(ctx, KeyFeedSummary(net))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return st, wrap("feed status "+net, err)
	}
	st.Queued, st.Handled, st.InFlight, st.Used, st.Digests, st.GaveUp = q.Val(), h.Val(), a.Val(), u.Val(), d.Val(), f.Val()
	if l := last.Val(); len(l) == 1 {
		var ff FeedFailure
		if json.Unmarshal([]byte(l[0]), &ff) == nil {
			st.LastGaveUp = &ff
		}
	}
	st.SummaryDay = day.Val()
	return st, nil
}

// Package tweeter runs the "Archiving URL" feed (see doc/protocol.md,
// Tweets): it queues a text when a job is first seen running, and posts
// queued texts on every configured network — X (API v2 by default, v1.1
// with go-twitter), Mastodon, Bluesky — or, with none configured, a dry
// run that only logs. Each network goes at its own pace, within its own
// posting budget; when the queue outruns a budget, it posts digests that
// carry several texts. It prunes the records of posted texts daily.
//
// Redis is reached only through store.Store. The order of writes is
// what makes a crash safe: each network's attempt (with its key) is
// recorded before posting and resolved after, so a restart finds an
// attempt a crash interrupted and resolves it the network's way (see
// Recoverer): sent again with the same idempotency key (Mastodon), looked
// up by its record key (Bluesky), or recorded as posted (X: at most once).
package tweeter

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/badkeys"
	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/internal/run"
	"github.com/archiveteam/archivebot-go/store"
)

// Network names.
const (
	NetX        = "x"
	NetMastodon = "mastodon"
	NetBluesky  = "bluesky"
	NetDryRun   = "dryrun"
)

// Network is one place the feed posts to.
type Network struct {
	// Name keys its progress in Redis (archivebot:feed:NAME:…).
	Name   string
	Poster Poster
	// Format is how the network counts text (zero: X's).
	Format Format
	// Budget is how many posts it may make per Window (0: no budget).
	Budget int
	Window time.Duration
}

// Config configures a Tweeter. Zero values take the defaults of package
// config (config.DefaultTweeter…).
type Config struct {
	// Interval is how often the queue is looked at .
	Interval time.Duration
	// Delay is the least time between two posts on one network (negative:
	// none).
	Delay time.Duration
	// API is APIv2 (default) or APIv11.
	API string
	// Credentials sign the X API calls. Empty: X is off.
	Credentials Credentials
	// XBudget and XWindow are X's posting budget (0: none).
	XBudget int
	XWindow time.Duration
	// Transport carries the API requests of every network (default
	// http.DefaultTransport); tests point it at fake APIs.
	Transport http.RoundTripper
	// Poster replaces the X poster chosen from API and Credentials.
	Poster Poster
	// Networks are the networks beside X (see MastodonNetwork,
	// BlueskyNetwork). With neither X nor these, the feed is a dry run:
	// texts are logged and recorded as posted.
	Networks []Network

	// DigestSchedule (a cron spec, UTC) is when digests may go out once
	// the queue outruns a network's budget; "" is whenever needed.
	DigestSchedule string
	// SummarySchedule (a cron spec, UTC) is when the daily summary of the
	// previous UTC day is posted; "" is never.
	SummarySchedule string

	// MaxTries bounds the tries of one text before it is given up.
	MaxTries int
	// RetryBackoff is the wait after the first failed try; it doubles after
	// each further one, up to MaxBackoff.
	RetryBackoff, MaxBackoff time.Duration
	// RateLimitPause is how long to hold off after a rate-limit answer
	// that did not say when the limit resets.
	RateLimitPause time.Duration

	// SweepInterval is how often the idents in working are checked, to catch
	// jobs whose updates messages were lost (negative: only on SweepSoon).
	SweepInterval time.Duration
	// PruneInterval is how often old records are pruned, and Retention how
	// old they may get.
	PruneInterval, Retention time.Duration
	// SeenTTL and SeenMax bound the memory of idents already handled: an
	// ident is looked up again after SeenTTL, which costs one lookup and
	// cannot queue its text twice.
	SeenTTL time.Duration
	SeenMax int

	// Logger gets the service's log lines (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock for rate-limit pauses, budgets and delays (default:
	// the store's clock, which also scores the Redis entries).
	Now func() time.Time
}

// MastodonNetwork is the Mastodon network posting as token's account on
// server, with a budget of budget posts per window.
func MastodonNetwork(server, token string, budget int, window time.Duration, transport http.RoundTripper) Network {
	return Network{Name: NetMastodon, Poster: NewMastodonPoster(server, token, transport), Format: MastodonFormat, Budget: budget, Window: window}
}

// BlueskyNetwork is the Bluesky network posting as identifier through
// service, with a budget of budget posts per window.
func BlueskyNetwork(service, identifier, appPassword string, budget int, window time.Duration, transport http.RoundTripper) Network {
	return Network{Name: NetBluesky, Poster: NewBlueskyPoster(service, identifier, appPassword, transport), Format: BlueskyFormat, Budget: budget, Window: window}
}

// Outcome says what RunOnce did.
type Outcome int

// RunOnce outcomes.
const (
	// Idle: nothing was queued.
	Idle Outcome = iota
	// Posted: one post (a text or a digest) went out (or was found already
	// online) and was recorded.
	Posted
	// GaveUp: one text failed permanently or too often; the network's
	// give-up is recorded with its reason.
	GaveUp
	// Paused: a rate limit, the budget or the digest schedule holds
	// posting off; the texts stay queued.
	Paused
	// Interrupted: the context ended mid-post.
	Interrupted
)

func (o Outcome) String() string {
	switch o {
	case Idle:
		return "idle"
	case Posted:
		return "posted"
	case GaveUp:
		return "gave up"
	case Paused:
		return "paused"
	case Interrupted:
		return "interrupted"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// net is a network and its running state.
type net struct {
	Network
	log *slog.Logger

	mu          sync.Mutex // one post at a time on this network
	pausedUntil time.Time  // guarded by mu
	pauseWhy    string     // guarded by mu
	lastPost    time.Time  // guarded by mu
	digestDue   bool       // guarded by mu
	lastErr     string     // guarded by mu
	view        store.FeedView
	wake        chan struct{} // the digest schedule's wake-up
	stats       NetStats      // guarded by mu
}

// NetStats counts what one network did since start.
type NetStats struct {
	Posts, Digests, Summaries, GaveUp, RateLimited int
}

// NetStatus is one network's state, for the operator.
type NetStatus struct {
	Name        string
	PausedUntil time.Time
	PauseReason string
	Pending     int
	Budget      int
	Window      time.Duration
	BudgetLeft  int // -1: no budget
	LastError   string
	Stats       NetStats
}

// Tweeter is the feed service. Start runs it in the background; RunOnce,
// Prune, CheckJob and Sweep run one step each and are safe to call directly
// (tests do), also while it runs.
type Tweeter struct {
	store  Store
	cfg    Config
	nets   []*net
	names  store.FeedNets
	dryRun bool
	log    *slog.Logger
	cron   *cron.Cron

	seenMu  sync.Mutex
	seen    map[string]*list.Element
	order   *list.List          // of seenEntry, oldest first
	pending map[string]struct{} // idents in checks

	checks   chan string   // idents from JobUpdated, for checkJobs
	sweepNow chan struct{} // SweepSoon's wake-up

	// badKeys counts members of working that are not jobs (summarised
	// once per sweep).
	badKeys *badkeys.Summary

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a tweeter over st. It posts on X through cfg.Poster if
// set, else through the API version cfg.API when cfg.Credentials are set;
// and on each of cfg.Networks. With no network at all it is a dry run.
func New(st Store, cfg Config) (*Tweeter, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Interval, config.DefaultTweeterInterval)
	def(&cfg.Delay, config.DefaultTweeterDelay)
	def(&cfg.RetryBackoff, config.DefaultTweeterRetryBackoff)
	def(&cfg.MaxBackoff, config.DefaultTweeterMaxBackoff)
	def(&cfg.RateLimitPause, config.DefaultTweeterRateLimitPause)
	def(&cfg.SweepInterval, config.DefaultTweeterSweepInterval)
	def(&cfg.PruneInterval, config.DefaultTweeterPruneInterval)
	def(&cfg.Retention, config.DefaultTweeterRetention)
	def(&cfg.SeenTTL, config.DefaultTweeterSeenTTL)
	if cfg.MaxTries <= 0 {
		cfg.MaxTries = config.DefaultTweeterMaxTries
	}
	if cfg.SeenMax <= 0 {
		cfg.SeenMax = config.DefaultTweeterSeenMax
	}
	if cfg.API == "" {
		cfg.API = config.DefaultTweeterAPI
	}
	if cfg.Interval < 0 || cfg.PruneInterval < 0 {
		return nil, errors.New("tweeter: interval and prune interval must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = st.Now
	}
	t := &Tweeter{
		store:    st,
		cfg:      cfg,
		log:      cfg.Logger.With("service", "tweeter"),
		seen:     make(map[string]*list.Element),
		order:    list.New(),
		pending:  make(map[string]struct{}),
		checks:   make(chan string, checkBuffer),
		sweepNow: make(chan struct{}, 1),
		badKeys:  newBadWorking(),
	}
	var x Poster
	switch {
	case cfg.Poster != nil:
		x = cfg.Poster
	case cfg.Credentials.Empty():
	case !cfg.Credentials.Complete():
		return nil, errors.New("tweeter: consumer_key, consumer_secret, access_token and access_secret must all be set, or none (X off)")
	case cfg.API == APIv2:
		x = NewV2Poster(OAuth1Client(cfg.Credentials, cfg.Transport))
	case cfg.API == APIv11:
		x = NewV1Poster(OAuth1Client(cfg.Credentials, cfg.Transport))
	default:
		return nil, fmt.Errorf("tweeter: api must be %q or %q, got %q", APIv2, APIv11, cfg.API)
	}
	var networks []Network
	if x != nil {
		networks = append(networks, Network{Name: NetX, Poster: x, Format: XFormat, Budget: cfg.XBudget, Window: cfg.XWindow})
	}
	networks = append(networks, cfg.Networks...)
	if len(networks) == 0 {
		t.dryRun = true
		// X's budget (tweeter.budget) binds the dry run too, so that an
		// operator can preview the digests a budget makes.
		networks = append(networks, Network{Name: NetDryRun, Poster: DryRun{Logger: t.log}, Format: plainFormat, Budget: cfg.XBudget, Window: cfg.XWindow})
	}
	for _, n := range networks {
		if n.Name == "" || n.Poster == nil {
			return nil, errors.New("tweeter: a network needs a name and a poster")
		}
		if n.Format.Length == nil {
			n.Format = XFormat
		}
		if n.Budget < 0 || (n.Budget > 0 && n.Window <= 0) {
			return nil, fmt.Errorf("tweeter: network %s: a budget needs a positive window", n.Name)
		}
		for _, o := range t.nets {
			if o.Name == n.Name {
				return nil, fmt.Errorf("tweeter: network %s configured twice", n.Name)
			}
		}
		t.nets = append(t.nets, &net{Network: n, log: t.log.With("network", n.Name), wake: make(chan struct{}, 1)})
		t.names = append(t.names, n.Name)
		metrics.FeedNetwork(n.Name)
	}
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	for _, spec := range []struct{ key, spec string }{{"digest_schedule", cfg.DigestSchedule}, {"summary_schedule", cfg.SummarySchedule}} {
		if spec.spec == "" {
			continue
		}
		if _, err := parser.Parse(spec.spec); err != nil {
			return nil, fmt.Errorf("tweeter: %s: %w", spec.key, err)
		}
	}
	return t, nil
}

// DryRun reports whether texts are only logged, for lack of networks.
func (t *Tweeter) DryRun() bool { return t.dryRun }

// Networks names the networks posted to, in order.
func (t *Tweeter) Networks() []string { return append([]string(nil), t.names...) }

func (t *Tweeter) net(name string) *net {
	for _, n := range t.nets {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// PausedUntil is when the last rate limit or budget pause among the
// networks lifts (zero when none holds).
func (t *Tweeter) PausedUntil() time.Time {
	var until time.Time
	for _, n := range t.nets {
		n.mu.Lock()
		if n.pausedUntil.After(until) {
			until = n.pausedUntil
		}
		n.mu.Unlock()
	}
	return until
}

// Status is each network's state, for !status and the admin CLI.
func (t *Tweeter) Status() []NetStatus {
	out := make([]NetStatus, 0, len(t.nets))
	for _, n := range t.nets {
		n.mu.Lock()
		st := NetStatus{Name: n.Name, Pending: n.view.Pending, Budget: n.Budget, Window: n.Window,
			BudgetLeft: -1, LastError: n.lastErr, Stats: n.stats}
		if n.pausedUntil.After(t.cfg.Now()) {
			st.PausedUntil, st.PauseReason = n.pausedUntil, n.pauseWhy
		}
		if n.Budget > 0 {
			st.BudgetLeft = max(0, n.Budget-n.view.Used)
		}
		n.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Start runs the tweeter until ctx ends or Stop is called: each network
// drains the queue every Interval (at most one post per Delay), jobs passed
// to JobUpdated are checked, working is swept every SweepInterval, old
// records are pruned every PruneInterval, and the digest and summary
// schedules run. Each periodic loop also runs at once, so texts left by a
// previous run are resolved at startup.
func (t *Tweeter) Start(ctx context.Context) {
	ctx, t.cancel = context.WithCancel(ctx)
	mode := fmt.Sprintf("networks %v", t.names)
	if t.dryRun {
		mode = "dry run (no network configured)"
	}
	t.log.Info("tweeter started", "mode", mode, "interval", t.cfg.Interval, "delay", t.cfg.Delay)
	for _, n := range t.nets {
		n := n
		t.loop(ctx, "post "+n.Name, t.cfg.Interval, n.wake, func(ctx context.Context) { t.drain(ctx, n) })
	}
	t.loop(ctx, "prune", t.cfg.PruneInterval, nil, func(ctx context.Context) {
		if _, err := t.Prune(ctx); err != nil && ctx.Err() == nil {
			t.log.Error("prune failed", "err", err)
		}
	})
	t.loop(ctx, "sweep", t.cfg.SweepInterval, t.sweepNow, func(ctx context.Context) {
		if err := t.Sweep(ctx); err != nil && ctx.Err() == nil {
			t.log.Error("sweep failed", "err", err)
		}
	})
	run.Go(&t.wg, t.log, "job checks", func() { t.checkJobs(ctx) })
	if t.cfg.DigestSchedule != "" || t.cfg.SummarySchedule != "" {
		t.cron = cron.New(cron.WithLocation(time.UTC))
		if t.cfg.DigestSchedule != "" {
			// Checked in New.
			_, _ = t.cron.AddFunc(t.cfg.DigestSchedule, t.DigestsDue)
		}
		if t.cfg.SummarySchedule != "" {
			_, _ = t.cron.AddFunc(t.cfg.SummarySchedule, func() {
				run.Guard(t.log, "summary", func() {
					if err := t.PostSummary(ctx); err != nil && ctx.Err() == nil {
						t.log.Error("summary failed", "err", err)
					}
				})
			})
		}
		t.cron.Start()
	}
}

// Stop ends the loops and waits for them. A post in flight is interrupted;
// its attempt stays recorded unless the network had certainly refused it.
func (t *Tweeter) Stop() {
	if t.cron != nil {
		<-t.cron.Stop().Done()
	}
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

// DigestsDue lets every network post digests now and wakes its posting
// loop (the digest schedule calls it; with no schedule digests are always
// allowed).
func (t *Tweeter) DigestsDue() {
	for _, n := range t.nets {
		n.mu.Lock()
		n.digestDue = true
		n.mu.Unlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// loop runs fn now, then every interval (never when interval is negative)
// and whenever trigger fires, on a goroutine of its own (run.Every).
func (t *Tweeter) loop(ctx context.Context, name string, interval time.Duration, trigger <-chan struct{}, fn func(context.Context)) {
	run.Go(&t.wg, t.log, name, func() {
		run.Every(ctx, t.log, name, run.Schedule{Interval: interval, Now: true, Trigger: trigger}, fn)
	})
}

// drain posts on n, Delay apart, until nothing is left to post, a limit
// holds or ctx ends.
func (t *Tweeter) drain(ctx context.Context, n *net) {
	for ctx.Err() == nil {
		n.mu.Lock()
		wait := time.Duration(0)
		if !n.lastPost.IsZero() && t.cfg.Delay > 0 {
			wait = n.lastPost.Add(t.cfg.Delay).Sub(t.cfg.Now())
		}
		n.mu.Unlock()
		if wait > 0 && !retry.Sleep(ctx, wait) {
			return
		}
		out, err := t.step(ctx, n)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Error("posting failed", "err", err)
			}
			return
		}
		if out != Posted && out != GaveUp {
			return
		}
	}
}

// RunOnce makes at most one post on each network (see RunNetwork) and
// returns the first network's outcome, or Posted/GaveUp if any network
// posted or gave up. It does not wait for Delay; Start's loops do.
func (t *Tweeter) RunOnce(ctx context.Context) (Outcome, error) {
	var best Outcome
	var errs []error
	for i, n := range t.nets {
		out, err := t.step(ctx, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		}
		if i == 0 || out == Posted || (out == GaveUp && best != Posted) {
			best = out
		}
	}
	return best, errors.Join(errs...)
}

// RunNetwork makes at most one post on network name: it first resolves
// attempts a crash left unresolved, then posts the oldest pending text —
// or, when more texts are pending than the budget has posts left, a
// digest of as many as fit (once the digest schedule allows). A failed
// post is retried up to MaxTries times with exponential backoff and then
// given up; a rate-limit answer pauses the network until it lifts.
func (t *Tweeter) RunNetwork(ctx context.Context, name string) (Outcome, error) {
	n := t.net(name)
	if n == nil {
		return Idle, fmt.Errorf("tweeter: no network %q", name)
	}
	return t.step(ctx, n)
}

// viewMax bounds the pending texts read per step: more than any digest
// carries.
const viewMax = 64

func (t *Tweeter) step(ctx context.Context, n *net) (Outcome, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := t.cfg.Now()
	if now.Before(n.pausedUntil) {
		return Paused, nil
	}
	for range 3 {
		v, err := t.store.FeedView(ctx, t.names, n.Name, n.Window, viewMax)
		if err != nil {
			return Idle, err
		}
		n.view = v
		left := -1
		if n.Budget > 0 {
			left = max(0, n.Budget-v.Used)
		}
		metrics.FeedBudget(n.Name, left, v.Pending)
		if len(v.Unresolved) > 0 {
			out, err := t.recover(ctx, n, v.Unresolved[0])
			if err != nil || out != Idle {
				return out, err
			}
			continue
		}
		if len(v.Items) == 0 {
			return Idle, nil
		}
		if left == 0 {
			n.pausedUntil, n.pauseWhy = v.Oldest.Add(n.Window), "budget spent"
			if !n.pausedUntil.After(now) {
				n.pausedUntil = now.Add(time.Second)
			}
			n.log.Info("budget spent: holding posts until the window frees one", "budget", n.Budget, "window", n.Window, "until", n.pausedUntil, "pending", v.Pending)
			return Paused, nil
		}
		a := store.FeedAttempt{Key: NewTID(now), At: now.UnixMilli()}
		var links []Link
		if left < 0 || v.Pending <= left {
			// Caught up: the next overflow waits for the next scheduled
			// digest time.
			n.digestDue = false
		}
		if left > 0 && v.Pending > left {
			// The queue outruns the budget: a digest.
			if t.cfg.DigestSchedule != "" && !n.digestDue {
				n.pausedUntil, n.pauseWhy = time.Time{}, ""
				n.log.Debug("queue outruns the budget: waiting for the digest schedule", "pending", v.Pending, "budget_left", left)
				return Paused, nil
			}
			var k int
			a.Post, links, k = n.Format.digest(v.Items)
			if k > 1 {
				a.Digest = true
				for _, it := range v.Items[:k] {
					a.Items = append(a.Items, it.Text)
				}
			}
		}
		if !a.Digest {
			a.Post, links = n.Format.single(v.Items[0])
			a.Items = []string{v.Items[0].Text}
		}
		a.Links = links
		why, err := t.store.FeedClaim(ctx, n.Name, a, n.Budget, n.Window)
		if err != nil {
			return Idle, err
		}
		switch why {
		case store.FeedBudget:
			continue
		case store.FeedGone:
			continue
		}
		return t.send(ctx, n, a, links, false)
	}
	return Idle, nil
}

// recover resolves an attempt a crash or stop left unresolved. It returns
// Idle when the caller may go on with the queue.
func (t *Tweeter) recover(ctx context.Context, n *net, a store.FeedAttempt) (Outcome, error) {
	how := RecoverPosted
	if r, ok := n.Poster.(Recoverer); ok {
		var err error
		how, err = r.Recover(ctx, a, t.cfg.Now())
		if err != nil {
			if Answered(err) {
				return t.failed(ctx, n, a, err, 1)
			}
			return Idle, fmt.Errorf("%s: finding out about an interrupted post: %w", n.Name, err)
		}
	}
	switch how {
	case RecoverResend:
		n.log.Warn("an earlier post was interrupted (crash or stop mid-post): sending it again with the same key, which the network deduplicates", "key", a.Key, "post", a.Post)
		out, err := t.send(ctx, n, a, a.Links, true)
		if out == Posted || out == GaveUp {
			return out, err
		}
		return out, err
	case RecoverRelease:
		n.log.Warn("an earlier post was interrupted and the network does not have it: posting it again", "key", a.Key, "post", a.Post)
		_, err := t.resolve(ctx, n, a.Key, store.FeedRelease, "")
		return Idle, err
	}
	// The post may be online: never post it twice.
	n.log.Warn("an earlier attempt to post this text was never resolved (crash or stop mid-post); recording it as posted without posting again",
		"post", a.Post, "attempted_at", a.Time())
	_, err := t.resolve(ctx, n, a.Key, store.FeedPosted, "")
	t.count(n, a, Posted)
	return Idle, err
}

// send posts claimed attempt a with retries and resolves it; again says
// a is an attempt an earlier run made (Attempt.Retry from the first try).
func (t *Tweeter) send(ctx context.Context, n *net, a store.FeedAttempt, links []Link, again bool) (Outcome, error) {
	log := n.log.With("post", a.Post)
	var err error
	for try := 1; ; try++ {
		pctx := WithAttempt(ctx, Attempt{Key: a.Key, Retry: again || try > 1})
		if lp, ok := n.Poster.(LinkPoster); ok && n.Format.Links {
			err = lp.PostLinks(pctx, a.Post, links)
		} else {
			err = n.Poster.Post(pctx, a.Post)
		}
		if err == nil || errors.Is(err, ErrDuplicate) {
			n.lastPost = t.cfg.Now()
			n.lastErr = ""
			switch {
			case err != nil:
				log.Info("already online (duplicate answer): recording it as posted", "err", err)
			case t.dryRun:
				log.Debug("recorded as posted (dry run)")
			case a.Digest:
				log.Info("posted a digest", "items", len(a.Items))
			default:
				log.Info("posted")
			}
			if h, ok := n.Poster.(Holder); ok {
				if until := h.HoldUntil(); until.After(t.cfg.Now()) {
					n.pausedUntil, n.pauseWhy = until, "rate limit reached"
					log.Info("the network's rate limit is reached: holding posts until it resets", "until", until)
				}
			}
			_, rerr := t.resolve(ctx, n, a.Key, store.FeedPosted, "")
			t.count(n, a, Posted)
			return Posted, rerr
		}
		n.lastErr = err.Error()
		var rl *RateLimitError
		var pe *PermanentError
		switch {
		case errors.As(err, &rl):
			until := rl.Reset
			if now := t.cfg.Now(); !until.After(now) {
				until = now.Add(t.cfg.RateLimitPause)
			}
			n.pausedUntil, n.pauseWhy = until, "rate limited"
			n.stats.RateLimited++
			metrics.FeedFailure(n.Name, "rate_limited")
			log.Warn("rate limited: holding posts until the limit resets", "until", until, "err", err)
			_, rerr := t.resolve(ctx, n, a.Key, store.FeedRelease, "")
			return Paused, rerr
		case errors.Is(err, ErrV1Forbidden):
			log.Error(`twitter refused the post: this account may not post through API v1.1 (HTTP 403, error 453). Set api = "v2" in the [tweeter] section of the configuration`, "err", err)
			return t.failed(ctx, n, a, err, try)
		case errors.As(err, &pe):
			log.Error("the network refused the post", "err", err)
			return t.failed(ctx, n, a, err, try)
		}
		if ctx.Err() != nil {
			return t.interrupted(n, a, err)
		}
		if try >= t.cfg.MaxTries {
			log.Error("post failed too often", "tries", try, "err", err)
			return t.failed(ctx, n, a, err, try)
		}
		wait := t.backoff(try)
		log.Warn("post failed; retrying", "try", try, "retry_in", wait, "err", err)
		if !retry.Sleep(ctx, wait) {
			return t.interrupted(n, a, err)
		}
	}
}

func (t *Tweeter) failed(ctx context.Context, n *net, a store.FeedAttempt, err error, tries int) (Outcome, error) {
	n.log.Error("gave up; the reason is recorded in archivebot:feed:"+n.Name+":failed", "post", a.Post, "tries", tries)
	n.lastPost = t.cfg.Now()
	_, rerr := t.resolve(ctx, n, a.Key, store.FeedFailed, err.Error())
	t.count(n, a, GaveUp)
	return GaveUp, rerr
}

func (t *Tweeter) count(n *net, a store.FeedAttempt, o Outcome) {
	switch {
	case o == GaveUp:
		n.stats.GaveUp++
		metrics.FeedFailure(n.Name, "gave_up")
		metrics.TweetFailed()
	case a.Digest:
		n.stats.Digests++
		metrics.FeedPosted(n.Name, "digest")
		metrics.TweetPosted()
	default:
		n.stats.Posts++
		metrics.FeedPosted(n.Name, "post")
		metrics.TweetPosted()
	}
}

// resolve records the end of an attempt even when ctx has just ended: the
// post happened (or was refused) and Redis should know.
func (t *Tweeter) resolve(ctx context.Context, n *net, key, outcome, reason string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return t.store.FeedResolve(ctx, t.names, n.Name, key, outcome, reason)
}

// interrupted handles a post cut short by the context. If the last answer
// proved the text was not posted, the attempt is released (the text is
// posted after a restart); otherwise it stays recorded for the restart to
// resolve (see Recoverer).
func (t *Tweeter) interrupted(n *net, a store.FeedAttempt, err error) (Outcome, error) {
	if Answered(err) {
		if _, rerr := t.resolve(context.Background(), n, a.Key, store.FeedRelease, ""); rerr != nil {
			n.log.Warn("could not release the attempt of an interrupted post", "post", a.Post, "err", rerr)
		}
	} else {
		n.log.Warn("post interrupted; it may have gone through, so the restart finds out before posting again", "post", a.Post, "err", err)
	}
	return Interrupted, nil
}

// backoff is the wait before retry try (from 1): the node's one backoff
// (retry.Backoff) from RetryBackoff up to MaxBackoff.
func (t *Tweeter) backoff(try int) time.Duration {
	return retry.Backoff{Min: t.cfg.RetryBackoff, Max: t.cfg.MaxBackoff}.Wait(try - 1)
}

// Prune removes tweets:done and archivebot:tweets:failed entries older than
// Retention (30 days), and each network's digest and give-up records as
// old.
func (t *Tweeter) Prune(ctx context.Context) (store.PrunedTweets, error) {
	p, err := t.store.PruneTweets(ctx, t.cfg.Retention)
	if err != nil {
		return p, err
	}
	for _, n := range t.nets {
		d, f, err := t.store.PruneFeed(ctx, n.Name, t.cfg.Retention, max(n.Window, time.Hour))
		if err != nil {
			return p, err
		}
		if d+f > 0 {
			n.log.Info("pruned old feed records", "digests", d, "failed", f)
		}
	}
	if p != (store.PrunedTweets{}) {
		t.log.Info("pruned old tweet records", "done", p.Done, "failed", p.Failed, "attempts", p.Attempts)
	}
	return p, nil
}

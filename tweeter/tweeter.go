// Package tweeter runs the "Archiving URL" feed (see doc/protocol.md,
// Tweets): it queues a
// text when a job is first seen running, posts queued texts one at a time
// through a Poster (API v2 by default, v1.1 with go-twitter, or a dry run
// that only logs), and prunes the record of posted texts daily.
//
// Redis is reached only through coordinator.Store. The order of writes is
// what makes a crash safe: the attempt is recorded before posting and
// resolved after, so a restart treats a text with an unresolved attempt as
// posted instead of posting it twice.
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

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/run"
)

// Config configures a Tweeter. Zero values take the defaults of package
// config (config.DefaultTweeter…).
type Config struct {
	// Interval is how often the queue is looked at .
	Interval time.Duration
	// Delay is the least time between two posts (negative: none).
	Delay time.Duration
	// API is APIv2 (default) or APIv11.
	API string
	// Credentials sign the API calls. Empty: dry run (texts are logged and
	// recorded as posted).
	Credentials Credentials
	// Transport carries the signed API requests (default
	// http.DefaultTransport); tests point it at a fake API.
	Transport http.RoundTripper
	// Poster replaces the poster chosen from API and Credentials.
	Poster Poster

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
	// Now is the clock for rate-limit pauses and delays (default: the
	// store's clock, which also scores the Redis entries).
	Now func() time.Time
}

// Outcome says what RunOnce did.
type Outcome int

// RunOnce outcomes.
const (
	// Idle: nothing was queued.
	Idle Outcome = iota
	// Posted: one text was posted (or found already online) and recorded
	// in tweets:done.
	Posted
	// GaveUp: one text failed permanently or too often and was recorded in
	// archivebot:tweets:failed.
	GaveUp
	// Paused: a rate limit holds posting off until PausedUntil; the text
	// stays queued.
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

// Tweeter is the feed service. Start runs it in the background; RunOnce,
// Prune, CheckJob and Sweep run one step each and are safe to call directly
// (tests do), also while it runs.
type Tweeter struct {
	store  *store.Store
	cfg    Config
	poster Poster
	dryRun bool
	log    *slog.Logger

	runMu       sync.Mutex // one post at a time
	pausedUntil time.Time  // guarded by runMu
	lastPost    time.Time  // guarded by runMu

	seenMu  sync.Mutex
	seen    map[string]*list.Element
	order   *list.List          // of seenEntry, oldest first
	pending map[string]struct{} // idents in checks

	checks   chan string   // idents from JobUpdated, for checkJobs
	sweepNow chan struct{} // SweepSoon's wake-up

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a tweeter over store. It posts through cfg.Poster if set,
// else logs only (dry run) when cfg.Credentials is empty, else through the
// API version cfg.API.
func New(store *store.Store, cfg Config) (*Tweeter, error) {
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
		cfg.Now = func() time.Time { return store.Now() }
	}
	t := &Tweeter{
		store:    store,
		cfg:      cfg,
		log:      cfg.Logger.With("service", "tweeter"),
		seen:     make(map[string]*list.Element),
		order:    list.New(),
		pending:  make(map[string]struct{}),
		checks:   make(chan string, checkBuffer),
		sweepNow: make(chan struct{}, 1),
	}
	switch {
	case cfg.Poster != nil:
		t.poster = cfg.Poster
	case cfg.Credentials.Empty():
		t.dryRun = true
		t.poster = DryRun{Logger: t.log}
	case !cfg.Credentials.Complete():
		return nil, errors.New("tweeter: consumer_key, consumer_secret, access_token and access_secret must all be set, or none (dry run)")
	case cfg.API == APIv2:
		t.poster = NewV2Poster(OAuth1Client(cfg.Credentials, cfg.Transport))
	case cfg.API == APIv11:
		t.poster = NewV1Poster(OAuth1Client(cfg.Credentials, cfg.Transport))
	default:
		return nil, fmt.Errorf("tweeter: api must be %q or %q, got %q", APIv2, APIv11, cfg.API)
	}
	return t, nil
}

// DryRun reports whether texts are only logged, for lack of credentials.
func (t *Tweeter) DryRun() bool { return t.dryRun }

// PausedUntil is when a rate limit lifts (zero when none holds).
func (t *Tweeter) PausedUntil() time.Time {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	return t.pausedUntil
}

// Start runs the tweeter until ctx ends or Stop is called: the queue is
// drained every Interval (at most one post per Delay), jobs passed to
// JobUpdated are checked, working is swept every SweepInterval, and old
// records are pruned every PruneInterval. Each periodic loop also runs at
// once, so texts left by a previous run are resolved at startup.
func (t *Tweeter) Start(ctx context.Context) {
	ctx, t.cancel = context.WithCancel(ctx)
	mode := "api " + t.cfg.API
	if t.dryRun {
		mode = "dry run (no credentials)"
	} else if t.cfg.Poster != nil {
		mode = fmt.Sprintf("poster %T", t.cfg.Poster)
	}
	t.log.Info("tweeter started", "mode", mode, "interval", t.cfg.Interval, "delay", t.cfg.Delay)
	t.loop(ctx, "post", t.cfg.Interval, nil, t.drain)
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
}

// Stop ends the loops and waits for them. A post in flight is interrupted;
// its attempt stays recorded unless the API had certainly refused it.
func (t *Tweeter) Stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

// loop runs fn now, then every interval (never when interval is negative)
// and whenever trigger fires, on a goroutine of its own (run.Every).
func (t *Tweeter) loop(ctx context.Context, name string, interval time.Duration, trigger <-chan struct{}, fn func(context.Context)) {
	run.Go(&t.wg, t.log, name, func() {
		run.Every(ctx, t.log, name, run.Schedule{Interval: interval, Now: true, Trigger: trigger}, fn)
	})
}

// drain posts queued texts one after another, Delay apart, until the queue
// is empty, a rate limit holds or ctx ends.
func (t *Tweeter) drain(ctx context.Context) {
	for ctx.Err() == nil {
		t.runMu.Lock()
		wait := time.Duration(0)
		if !t.lastPost.IsZero() && t.cfg.Delay > 0 {
			wait = t.lastPost.Add(t.cfg.Delay).Sub(t.cfg.Now())
		}
		t.runMu.Unlock()
		if wait > 0 && !sleep(ctx, wait) {
			return
		}
		out, err := t.RunOnce(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Error("posting failed", "err", err)
			}
			return
		}
		if out != Posted && out != GaveUp {
			return
		}
	}
}

// RunOnce posts at most one queued text: the oldest one not yet in
// tweets:done. Texts whose earlier attempt was never resolved (a crash
// mid-post) are recorded as posted on the way, with a warning. A failed post
// is retried up to MaxTries times with exponential backoff and then given
// up; a rate-limit answer pauses posting until it lifts. RunOnce does not
// wait for Delay; Start's loop does.
func (t *Tweeter) RunOnce(ctx context.Context) (Outcome, error) {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if now := t.cfg.Now(); now.Before(t.pausedUntil) {
		return Paused, nil
	}
	for {
		c, ok, err := t.store.ClaimTweet(ctx)
		if err != nil {
			return Idle, err
		}
		if !ok {
			return Idle, nil
		}
		if c.Unresolved {
			// The text may be online: never post it twice.
			t.log.Warn("an earlier attempt to post this text was never resolved (crash or stop mid-post); recording it as posted without posting again",
				"text", c.Text, "attempted_at", c.AttemptedAt)
			if err := t.store.TweetPosted(ctx, c.Text); err != nil {
				return Idle, err
			}
			continue
		}
		return countTweet(t.post(ctx, c.Text))
	}
}

// post posts a claimed text with retries and resolves the claim.
func (t *Tweeter) post(ctx context.Context, text string) (Outcome, error) {
	log := t.log.With("text", text)
	var err error
	for try := 1; ; try++ {
		err = t.poster.Post(ctx, text)
		if err == nil {
			t.lastPost = t.cfg.Now()
			if t.dryRun {
				log.Debug("recorded as posted (dry run)")
			} else {
				log.Info("posted")
			}
			return Posted, t.resolve(ctx, t.store.TweetPosted, text)
		}
		var rl *RateLimitError
		var pe *PermanentError
		switch {
		case errors.Is(err, ErrDuplicate):
			t.lastPost = t.cfg.Now()
			log.Info("already online (duplicate answer): recording it as posted", "err", err)
			return Posted, t.resolve(ctx, t.store.TweetPosted, text)
		case errors.As(err, &rl):
			until := rl.Reset
			if now := t.cfg.Now(); !until.After(now) {
				until = now.Add(t.cfg.RateLimitPause)
			}
			t.pausedUntil = until
			log.Warn("rate limited: holding posts until the limit resets", "until", until, "err", err)
			return Paused, t.resolve(ctx, t.store.ReleaseTweet, text)
		case errors.Is(err, ErrV1Forbidden):
			log.Error(`twitter refused the post: this account may not post through API v1.1 (HTTP 403, error 453). Set api = "v2" in the [tweeter] section of the configuration`, "err", err)
			return t.giveUp(ctx, log, text, try)
		case errors.As(err, &pe):
			log.Error("twitter refused the post", "err", err)
			return t.giveUp(ctx, log, text, try)
		}
		if ctx.Err() != nil {
			return t.interrupted(text, err)
		}
		if try >= t.cfg.MaxTries {
			log.Error("post failed too often", "tries", try, "err", err)
			return t.giveUp(ctx, log, text, try)
		}
		wait := t.backoff(try)
		log.Warn("post failed; retrying", "try", try, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return t.interrupted(text, err)
		}
	}
}

func (t *Tweeter) giveUp(ctx context.Context, log *slog.Logger, text string, tries int) (Outcome, error) {
	log.Error("gave up on text; recorded in archivebot:tweets:failed", "tries", tries)
	t.lastPost = t.cfg.Now()
	return GaveUp, t.resolve(ctx, t.store.TweetFailed, text)
}

// resolve records the end of an attempt even when ctx has just ended: the
// post happened (or was refused) and Redis should know.
func (t *Tweeter) resolve(ctx context.Context, fn func(context.Context, string) error, text string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return fn(ctx, text)
}

// interrupted handles a post cut short by the context. If the last answer
// proved the text was not posted, the attempt is released (the text is
// posted after a restart); otherwise it stays recorded and the text counts
// as posted after a restart.
func (t *Tweeter) interrupted(text string, err error) (Outcome, error) {
	if Answered(err) {
		if rerr := t.resolve(context.Background(), t.store.ReleaseTweet, text); rerr != nil {
			t.log.Warn("could not release the attempt of an interrupted post", "text", text, "err", rerr)
		}
	} else {
		t.log.Warn("post interrupted; it may have gone through, so it will not be posted again", "text", text, "err", err)
	}
	return Interrupted, nil
}

func (t *Tweeter) backoff(try int) time.Duration {
	d := t.cfg.RetryBackoff
	for i := 1; i < try && d < t.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, t.cfg.MaxBackoff)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// Prune removes tweets:done and archivebot:tweets:failed entries older than
// Retention (30 days).
func (t *Tweeter) Prune(ctx context.Context) (store.PrunedTweets, error) {
	p, err := t.store.PruneTweets(ctx, t.cfg.Retention)
	if err != nil {
		return p, err
	}
	if p != (store.PrunedTweets{}) {
		t.log.Info("pruned old tweet records", "done", p.Done, "failed", p.Failed, "attempts", p.Attempts)
	}
	return p, nil
}

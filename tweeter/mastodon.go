package tweeter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-mastodon"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/store"
)

// Attempt is what a poster knows of the attempt it sends: Key is unique
// per claimed post and stays the same when the same post is sent again
// (a retry, or a restart after a crash between send and record); Retry
// says the post may have been sent before.
type Attempt struct {
	Key   string
	Retry bool
}

type attemptCtxKey struct{}

// WithAttempt passes a to the poster through ctx.
func WithAttempt(ctx context.Context, a Attempt) context.Context {
	return context.WithValue(ctx, attemptCtxKey{}, a)
}

// AttemptFrom is the attempt ctx carries (zero when none).
func AttemptFrom(ctx context.Context) Attempt {
	a, _ := ctx.Value(attemptCtxKey{}).(Attempt)
	return a
}

// Recovery is what to do with an attempt found unresolved at startup.
type Recovery int

const (
	// RecoverPosted: record it as posted without sending it again (the
	// default: at most once).
	RecoverPosted Recovery = iota
	// RecoverResend: send it again with the same key; the network drops
	// the copy if the first got through.
	RecoverResend
	// RecoverRelease: the network says it was never posted: it is pending
	// again.
	RecoverRelease
)

// Recoverer is a poster that can tell what became of an attempt a crash
// left unresolved.
type Recoverer interface {
	Recover(ctx context.Context, a store.FeedAttempt, now time.Time) (Recovery, error)
}

// Holder is a poster that learns from the network's rate-limit headers
// that it may not post before a time (zero: it may).
type Holder interface {
	HoldUntil() time.Time
}

// MastodonIdempotencyTTL is how long Mastodon remembers an Idempotency-Key
// (one hour; a little less to be safe): an unresolved attempt younger than
// this is sent again with its key, an older one is recorded as posted.
const MastodonIdempotencyTTL = 55 * time.Minute

// MastodonPoster posts statuses with go-mastodon (POST /api/v1/statuses,
// bearer token). Every post carries the attempt's key as Idempotency-Key,
// so a post sent again after a lost answer or a crash is not duplicated.
type MastodonPoster struct {
	client *mastodon.Client
	hold   holdTime
}

// NewMastodonPoster returns a poster for the account of token on server
// (the instance's base URL), sending through base (nil: the default
// transport).
func NewMastodonPoster(server, token string, base http.RoundTripper) *MastodonPoster {
	p := &MastodonPoster{}
	c := mastodon.NewClient(&mastodon.Config{Server: strings.TrimRight(server, "/"), AccessToken: token})
	// The transport answers every non-2xx with a typed error, so that
	// go-mastodon's own 429 retry loop (up to an hour of sleeping) never
	// runs: the tweeter honours the reset headers itself.
	c.Client = http.Client{Transport: &mastodonTransport{base: base, hold: &p.hold}, Timeout: requestTimeout}
	c.UserAgent = "archivebot-go"
	p.client = c
	return p
}

// Post posts text as a public status.
func (p *MastodonPoster) Post(ctx context.Context, text string) error {
	_, err := p.client.PostStatus(ctx, &mastodon.Toot{Status: text, Visibility: "public"})
	if err == nil {
		return nil
	}
	var rl *RateLimitError
	var pe *PermanentError
	var te *TemporaryError
	switch {
	case errors.As(err, &rl):
		return rl
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &te):
		return te
	}
	return err
}

// HoldUntil is when the rate limit the last answer reported resets, if
// that answer left none.
func (p *MastodonPoster) HoldUntil() time.Time { return p.hold.get() }

// Recover sends a young attempt again (same Idempotency-Key: Mastodon
// answers with the status it made the first time) and records an older
// one as posted.
func (p *MastodonPoster) Recover(_ context.Context, a store.FeedAttempt, now time.Time) (Recovery, error) {
	if now.Sub(a.Time()) < MastodonIdempotencyTTL {
		return RecoverResend, nil
	}
	return RecoverPosted, nil
}

type mastodonTransport struct {
	base http.RoundTripper
	hold *holdTime
}

func (t *mastodonTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if a := AttemptFrom(req.Context()); a.Key != "" && req.Method == http.MethodPost {
		req = req.Clone(req.Context())
		req.Header.Set("Idempotency-Key", a.Key)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	reset := mastodonReset(resp.Header)
	if rem := resp.Header.Get("X-RateLimit-Remaining"); resp.StatusCode/100 == 2 && strings.TrimSpace(rem) == "0" {
		t.hold.set(reset)
	} else if resp.StatusCode/100 == 2 {
		t.hold.set(time.Time{})
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var ans struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	msg := snippet(raw)
	if json.Unmarshal(raw, &ans) == nil && ans.Error != "" {
		msg = strings.TrimSpace(ans.Error + " " + ans.Description)
	}
	return nil, classifyHTTP(APIMastodon, resp.StatusCode, reset, msg)
}

// mastodonReset reads X-RateLimit-Reset (an ISO 8601 time), else
// Retry-After.
func mastodonReset(h http.Header) time.Time {
	if v := strings.TrimSpace(h.Get("X-RateLimit-Reset")); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	at, _ := retry.After(h, time.Now())
	return at
}

// classifyHTTP turns a non-2xx answer of Mastodon or Bluesky into a typed
// error: 429 a *RateLimitError, other 4xx a *PermanentError, the rest a
// *TemporaryError.
func classifyHTTP(api string, status int, reset time.Time, msg string) error {
	switch {
	case status == http.StatusTooManyRequests:
		return &RateLimitError{API: api, Reset: reset, Message: msg}
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		return &PermanentError{API: api, Status: status, Message: msg}
	}
	return &TemporaryError{API: api, Status: status, Message: msg}
}

// holdTime is a time guarded by a mutex.
type holdTime struct {
	mu sync.Mutex
	t  time.Time
}

func (h *holdTime) set(t time.Time) {
	h.mu.Lock()
	h.t = t
	h.mu.Unlock()
}

func (h *holdTime) get() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t
}

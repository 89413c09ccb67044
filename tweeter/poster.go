package tweeter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/dghubble/go-twitter/twitter"
	"github.com/dghubble/oauth1"
)

// Poster publishes one text on the feed.
//
// Post returns nil once the text is online. Errors that say more than
// "try again" are typed: *RateLimitError (wait until its Reset) and
// *PermanentError (retrying cannot help; errors.Is tells ErrDuplicate — the
// text is online already — and ErrV1Forbidden — the account may not post
// through API v1.1). Anything else is worth retrying with backoff.
type Poster interface {
	Post(ctx context.Context, text string) error
}

// LinkPoster is a poster that takes the links of a post (Bluesky's facets)
// instead of finding them in the text.
type LinkPoster interface {
	PostLinks(ctx context.Context, text string, links []Link) error
}

// API versions for Config.API.
const (
	APIv2  = "v2"
	APIv11 = "v1.1"
)

// The other networks' names in errors (RateLimitError.API…).
const (
	APIMastodon = "mastodon"
	APIBluesky  = "bluesky"
)

// apiName names the network of an API in errors.
func apiName(api string) string {
	if api == APIv2 || api == APIv11 {
		return "twitter " + api
	}
	return api
}

// Endpoints. go-twitter has the v1.1 base URL built in; tests reach a fake
// server through the HTTP transport instead (Config.Transport).
const (
	v2TweetsURL = "https://api.twitter.com/2/tweets"
	// requestTimeout bounds one API call.
	requestTimeout = 30 * time.Second
)

var (
	// ErrDuplicate is wrapped by the *PermanentError Twitter answers for a
	// text the account already posted (v1.1 code 187, v2 "duplicate
	// content"): a retry after a lost answer found the first post online.
	ErrDuplicate = errors.New("the same text is already posted")
	// ErrV1Forbidden is wrapped by the *PermanentError API v1.1 answers with
	// HTTP 403 and error code 453: since 2023 most accounts may no longer
	// post through v1.1 and must use api = "v2".
	ErrV1Forbidden = errors.New(`API v1.1 posting is not available to this account (error 453); set api = "v2" in the [tweeter] section`)
)

// RateLimitError is an HTTP 429 answer (or v1.1 code 185, daily limit).
type RateLimitError struct {
	API string
	// Reset is when the limit resets, from the x-rate-limit-reset family of
	// headers; zero when the answer did not say.
	Reset   time.Time
	Message string
}

func (e *RateLimitError) Error() string {
	s := apiName(e.API) + ": rate limited"
	if !e.Reset.IsZero() {
		s += " until " + e.Reset.UTC().Format(time.RFC3339)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// PermanentError is an answer that retrying the same text cannot change
// (HTTP 4xx other than 429: bad credentials, forbidden, too long…).
type PermanentError struct {
	API    string
	Status int
	// Code is Twitter's error code (v1.1), 0 when none.
	Code    int
	Message string
	// Kind is ErrDuplicate, ErrV1Forbidden or nil.
	Kind error
}

func (e *PermanentError) Error() string {
	s := answerText(e.API, e.Status, e.Code, e.Message)
	if e.Kind != nil {
		s += " (" + e.Kind.Error() + ")"
	}
	return s
}

// Unwrap returns Kind, so errors.Is(err, ErrDuplicate) works.
func (e *PermanentError) Unwrap() error { return e.Kind }

// TemporaryError is an answer worth retrying (HTTP 5xx, an unreadable
// answer). Network errors are returned as they are.
type TemporaryError struct {
	API     string
	Status  int
	Code    int
	Message string
}

func (e *TemporaryError) Error() string { return answerText(e.API, e.Status, e.Code, e.Message) }

// answerText is "API: HTTP status[ code N][: message]", how both kinds of
// error name the answer.
func answerText(api string, status, code int, message string) string {
	s := fmt.Sprintf("%s: HTTP %d", apiName(api), status)
	if code != 0 {
		s += fmt.Sprintf(" code %d", code)
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// Answered reports whether err came with an answer from the API, so the
// text was certainly not posted. A network error (timeout, reset
// connection) may have happened after Twitter accepted the post.
func Answered(err error) bool {
	var rl *RateLimitError
	var pe *PermanentError
	var te *TemporaryError
	return errors.As(err, &rl) || errors.As(err, &pe) || errors.As(err, &te)
}

// Credentials are the OAuth1 user-context keys of the feed's account. They
// never show in logs or formatted output.
type Credentials struct {
	ConsumerKey, ConsumerSecret string
	AccessToken, AccessSecret   string
}

// Empty reports whether no credentials are set (dry run).
func (c Credentials) Empty() bool {
	return c.ConsumerKey == "" && c.ConsumerSecret == "" && c.AccessToken == "" && c.AccessSecret == ""
}

// Complete reports whether all four values are set.
func (c Credentials) Complete() bool {
	return c.ConsumerKey != "" && c.ConsumerSecret != "" && c.AccessToken != "" && c.AccessSecret != ""
}

// Format prints "[redacted]" (or "[none]") for every verb, %#v included.
func (c Credentials) Format(f fmt.State, _ rune) { io.WriteString(f, c.redacted()) }

// LogValue keeps secrets out of slog output.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.redacted()) }

func (c Credentials) redacted() string {
	if c.Empty() {
		return "[none]"
	}
	return "[redacted]"
}

// OAuth1Client returns an HTTP client that signs every request with creds
// (OAuth1 HMAC-SHA1, user context) and sends it through base
// (http.DefaultTransport when nil).
func OAuth1Client(creds Credentials, base http.RoundTripper) *http.Client {
	cfg := oauth1.NewConfig(creds.ConsumerKey, creds.ConsumerSecret)
	ctx := context.Background()
	if base != nil {
		ctx = context.WithValue(ctx, oauth1.HTTPClient, &http.Client{Transport: base})
	}
	c := cfg.Client(ctx, oauth1.NewToken(creds.AccessToken, creds.AccessSecret))
	c.Timeout = requestTimeout
	return c
}

// V1Poster posts through API v1.1 statuses/update with go-twitter, as the
// upstream bot did.
type V1Poster struct {
	client *http.Client
}

// NewV1Poster returns a v1.1 poster over client, an OAuth1-signing client
// (see OAuth1Client).
func NewV1Poster(client *http.Client) *V1Poster { return &V1Poster{client: client} }

// Post tweets text with statuses/update.
func (p *V1Poster) Post(ctx context.Context, text string) error {
	// go-twitter takes no context: give it a client whose requests carry
	// ours, so that Stop interrupts a hanging call.
	c := &http.Client{
		Transport: ctxTransport{ctx: ctx, base: p.client.Transport},
		Timeout:   p.client.Timeout,
	}
	_, resp, err := twitter.NewClient(c).Statuses.Update(text, nil)
	if resp == nil {
		if err == nil {
			err = errors.New("no answer")
		}
		return fmt.Errorf("twitter v1.1: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		// Accepted; an unreadable body does not unpost it.
		return nil
	}
	var code int
	var msg string
	var apiErr twitter.APIError
	if errors.As(err, &apiErr) && len(apiErr.Errors) > 0 {
		code, msg = apiErr.Errors[0].Code, apiErr.Errors[0].Message
	} else if err != nil {
		msg = err.Error()
	}
	return classify(APIv11, resp, code, msg)
}

// ctxTransport attaches a context to requests made by code that takes none.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t ctxTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req.WithContext(t.ctx))
}

// V2Poster posts through API v2 POST /2/tweets, signed with the same OAuth1
// user context. This is the default: most accounts can only post here.
type V2Poster struct {
	client   *http.Client
	endpoint string
}

// NewV2Poster returns a v2 poster over client, an OAuth1-signing client
// (see OAuth1Client).
func NewV2Poster(client *http.Client) *V2Poster {
	return &V2Poster{client: client, endpoint: v2TweetsURL}
}

// v2Answer covers the success and problem shapes of POST /2/tweets.
type v2Answer struct {
	Data *struct {
		ID string `json:"id"`
	} `json:"data"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
	Errors []struct {
		Message string `json:"message"`
		Detail  string `json:"detail"`
		Title   string `json:"title"`
		Code    int    `json:"code"`
	} `json:"errors"`
}

func (a *v2Answer) message() string {
	var parts []string
	for _, s := range []string{a.Title, a.Detail, a.Reason} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	for _, e := range a.Errors {
		for _, s := range []string{e.Title, e.Message, e.Detail} {
			if s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "; ")
}

func (a *v2Answer) code() int {
	for _, e := range a.Errors {
		if e.Code != 0 {
			return e.Code
		}
	}
	return 0
}

// Post creates a post with text.
func (p *V2Poster) Post(ctx context.Context, text string) error {
	body, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("twitter v2: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("twitter v2: %w", err)
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var ans v2Answer
	jsonErr := json.Unmarshal(raw, &ans)
	if resp.StatusCode/100 == 2 {
		if ans.Data == nil && len(ans.Errors) > 0 {
			return &PermanentError{API: APIv2, Status: resp.StatusCode, Code: ans.code(), Message: ans.message()}
		}
		return nil
	}
	msg := ans.message()
	if msg == "" {
		switch {
		case readErr != nil:
			msg = readErr.Error()
		case jsonErr != nil:
			msg = snippet(raw)
		}
	}
	return classify(APIv2, resp, ans.code(), msg)
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// classify turns a non-2xx answer into a typed error.
func classify(api string, resp *http.Response, code int, msg string) error {
	status := resp.StatusCode
	switch {
	case status == http.StatusTooManyRequests || code == 88 || code == 185:
		return &RateLimitError{API: api, Reset: rateLimitReset(resp.Header), Message: msg}
	case code == 187 || (api == APIv2 && status == http.StatusForbidden && strings.Contains(strings.ToLower(msg), "duplicate")):
		return &PermanentError{API: api, Status: status, Code: code, Message: msg, Kind: ErrDuplicate}
	case api == APIv11 && code == 453:
		return &PermanentError{API: api, Status: status, Code: code, Message: msg, Kind: ErrV1Forbidden}
	case status >= 500 || code == 130 || code == 131:
		return &TemporaryError{API: api, Status: status, Code: code, Message: msg}
	case status >= 400:
		return &PermanentError{API: api, Status: status, Code: code, Message: msg}
	}
	// 1xx/3xx: nothing was posted and nothing says why; try again later.
	return &TemporaryError{API: api, Status: status, Code: code, Message: msg}
}

// rateLimitReset reads when a 429 lifts. API v2 posting has per-user and
// per-app daily limits besides the 15-minute window; each has its own
// remaining/reset headers, and the latest exhausted one wins. Falls back to
// Retry-After. Zero when none is given.
func rateLimitReset(h http.Header) time.Time {
	var reset time.Time
	for _, family := range []string{"x-user-limit-24hour", "x-app-limit-24hour", "x-rate-limit"} {
		t := unixHeader(h.Get(family + "-reset"))
		if t.IsZero() {
			continue
		}
		if rem := h.Get(family + "-remaining"); rem != "" && rem != "0" && family != "x-rate-limit" {
			continue
		}
		if t.After(reset) {
			reset = t
		}
	}
	if reset.IsZero() {
		reset, _ = retry.After(h, time.Now())
	}
	return reset
}

func unixHeader(v string) time.Time {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// DryRun is the poster used with no network configured: it logs each text and
// reports it posted, so the feed logic runs everywhere.
type DryRun struct {
	Logger *slog.Logger
}

// Post logs text.
func (d DryRun) Post(_ context.Context, text string) error {
	l := d.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Info("dry run (no network configured): would post", "text", text)
	return nil
}

package tweeter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/store"
)

// DefaultBlueskyService is the PDS entryway used when none is configured.
const DefaultBlueskyService = config.DefaultTweeterBlueskyService

// BlueskyPoster posts app.bsky.feed.post records through the AT Protocol's
// XRPC over HTTP: com.atproto.server.createSession logs in with an app
// password, refreshSession renews an expired access token, and
// com.atproto.repo.createRecord writes the post with link facets.
//
// The record key (rkey) is the attempt's key, a TID: a post sent again
// after a lost answer or a crash first asks com.atproto.repo.getRecord
// whether that record exists, so it is never written twice.
type BlueskyPoster struct {
	service, identifier, password string
	client                        *http.Client
	now                           func() time.Time
	hold                          holdTime

	mu               sync.Mutex
	access, refresh  string
	did              string
	sessionsCreated  int
	sessionsRefreshd int
}

// NewBlueskyPoster returns a poster for identifier (handle or DID) logging
// in with an app password at service (a PDS base URL; "" is
// DefaultBlueskyService), sending through base (nil: the default
// transport).
func NewBlueskyPoster(service, identifier, appPassword string, base http.RoundTripper) *BlueskyPoster {
	if service == "" {
		service = DefaultBlueskyService
	}
	return &BlueskyPoster{
		service:    strings.TrimRight(service, "/"),
		identifier: identifier,
		password:   appPassword,
		client:     &http.Client{Transport: base, Timeout: requestTimeout},
		now:        time.Now,
	}
}

// xrpcError is an XRPC error answer.
type xrpcError struct {
	Status  int
	Name    string // "ExpiredToken", "RecordNotFound"…
	Message string
	Reset   time.Time
}

func (e *xrpcError) Error() string {
	return fmt.Sprintf("bluesky: HTTP %d: %s: %s", e.Status, e.Name, e.Message)
}

func (e *xrpcError) typed() error {
	msg := strings.TrimSpace(e.Name + ": " + e.Message)
	return classifyHTTP(APIBluesky, e.Status, e.Reset, msg)
}

// xrpc calls method (a procedure when body is not nil or post is set, else
// a query with params) with token as bearer ("" none) and decodes a 2xx
// answer into out. A non-2xx answer is an *xrpcError.
func (p *BlueskyPoster) xrpc(ctx context.Context, post bool, method, token string, params url.Values, body, out any) error {
	u := p.service + "/xrpc/" + method
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	verb := http.MethodGet
	if post {
		verb = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, verb, u, rd)
	if err != nil {
		return fmt.Errorf("bluesky: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("bluesky %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		if rem := resp.Header.Get("RateLimit-Remaining"); strings.TrimSpace(rem) == "0" {
			p.hold.set(blueskyReset(resp.Header))
		} else if post && method == "com.atproto.repo.createRecord" {
			p.hold.set(time.Time{})
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return &TemporaryError{API: APIBluesky, Status: resp.StatusCode, Message: "unreadable answer: " + snippet(raw)}
			}
		}
		return nil
	}
	e := &xrpcError{Status: resp.StatusCode, Reset: blueskyReset(resp.Header)}
	var ans struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &ans) == nil {
		e.Name, e.Message = ans.Error, ans.Message
	} else {
		e.Message = snippet(raw)
	}
	return e
}

// blueskyReset reads RateLimit-Reset (UNIX seconds), else Retry-After.
func blueskyReset(h http.Header) time.Time {
	if t := unixHeader(h.Get("RateLimit-Reset")); !t.IsZero() {
		return t
	}
	at, _ := retry.After(h, time.Now())
	return at
}

type session struct {
	AccessJwt  string `json:"accessJwt"`
	RefreshJwt string `json:"refreshJwt"`
	Did        string `json:"did"`
}

func (p *BlueskyPoster) setSession(s session) {
	p.access, p.refresh = s.AccessJwt, s.RefreshJwt
	if s.Did != "" {
		p.did = s.Did
	}
}

// login creates a session with the app password. The caller holds mu.
func (p *BlueskyPoster) login(ctx context.Context) error {
	var s session
	err := p.xrpc(ctx, true, "com.atproto.server.createSession", "", nil,
		map[string]string{"identifier": p.identifier, "password": p.password}, &s)
	if err != nil {
		var xe *xrpcError
		if errors.As(err, &xe) {
			if xe.Status == http.StatusBadRequest || xe.Status == http.StatusUnauthorized {
				// A wrong identifier or password: retrying cannot help.
				return &PermanentError{API: APIBluesky, Status: xe.Status, Message: "login failed: " + strings.TrimSpace(xe.Name+": "+xe.Message)}
			}
			return xe.typed()
		}
		return err
	}
	if s.AccessJwt == "" || s.Did == "" {
		return &TemporaryError{API: APIBluesky, Status: http.StatusOK, Message: "createSession answered without a token or DID"}
	}
	p.sessionsCreated++
	p.setSession(s)
	return nil
}

// renew refreshes the session, or logs in again if the refresh token is
// no longer good. The caller holds mu.
func (p *BlueskyPoster) renew(ctx context.Context) error {
	if p.refresh != "" {
		var s session
		err := p.xrpc(ctx, true, "com.atproto.server.refreshSession", p.refresh, nil, nil, &s)
		if err == nil && s.AccessJwt != "" {
			p.sessionsRefreshd++
			p.setSession(s)
			return nil
		}
		var xe *xrpcError
		if err != nil && !errors.As(err, &xe) {
			return err
		}
	}
	return p.login(ctx)
}

func expired(err error) bool {
	var xe *xrpcError
	return errors.As(err, &xe) && (xe.Name == "ExpiredToken" || xe.Name == "InvalidToken" ||
		(xe.Status == http.StatusUnauthorized && xe.Name != "AuthenticationRequired" && xe.Name != "AuthMissing"))
}

// authed runs call with the access token, logging in first if needed and
// renewing the session once if the token has expired.
func (p *BlueskyPoster) authed(ctx context.Context, call func(token, did string) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.access == "" {
		if err := p.login(ctx); err != nil {
			return err
		}
	}
	err := call(p.access, p.did)
	if expired(err) {
		if rerr := p.renew(ctx); rerr != nil {
			return rerr
		}
		err = call(p.access, p.did)
	}
	var xe *xrpcError
	if errors.As(err, &xe) {
		return xe.typed()
	}
	return err
}

// Sessions counts the sessions created and refreshed (for tests and the
// operator's view).
func (p *BlueskyPoster) Sessions() (created, refreshed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessionsCreated, p.sessionsRefreshd
}

// Post posts text, linking every http(s) URL in it.
func (p *BlueskyPoster) Post(ctx context.Context, text string) error {
	return p.PostLinks(ctx, text, findLinks(text))
}

// findLinks links every http(s) word of text to itself.
func findLinks(text string) []Link {
	var out []Link
	off := 0
	for _, w := range strings.SplitAfter(text, " ") {
		word := strings.TrimRight(w, " ")
		lw := strings.ToLower(word)
		if strings.HasPrefix(lw, "http://") || strings.HasPrefix(lw, "https://") {
			out = append(out, Link{Start: off, End: off + len(word), URI: word})
		}
		off += len(w)
	}
	return out
}

type facet struct {
	Index struct {
		ByteStart int `json:"byteStart"`
		ByteEnd   int `json:"byteEnd"`
	} `json:"index"`
	Features []map[string]string `json:"features"`
}

// PostLinks posts text with a link facet for each of links (UTF-8 byte
// offsets into text). The record key is the attempt's key when it is a
// TID; when the attempt may have been sent before, getRecord is asked
// first and an existing record counts as posted.
func (p *BlueskyPoster) PostLinks(ctx context.Context, text string, links []Link) error {
	a := AttemptFrom(ctx)
	rkey := a.Key
	if !ValidTID(rkey) {
		rkey = NewTID(p.now())
	}
	record := map[string]any{
		"$type":     "app.bsky.feed.post",
		"text":      text,
		"createdAt": p.now().UTC().Format("2006-01-02T15:04:05.000Z"),
	}
	var facets []facet
	for _, l := range links {
		if l.Start < 0 || l.End > len(text) || l.Start >= l.End {
			continue
		}
		var f facet
		f.Index.ByteStart, f.Index.ByteEnd = l.Start, l.End
		f.Features = []map[string]string{{"$type": "app.bsky.richtext.facet#link", "uri": l.URI}}
		facets = append(facets, f)
	}
	if len(facets) > 0 {
		record["facets"] = facets
	}
	return p.authed(ctx, func(token, did string) error {
		if a.Retry {
			found, err := p.exists(ctx, token, did, rkey)
			if err != nil {
				return err
			}
			if found {
				return nil
			}
		}
		return p.xrpc(ctx, true, "com.atproto.repo.createRecord", token, nil, map[string]any{
			"repo":       did,
			"collection": "app.bsky.feed.post",
			"rkey":       rkey,
			"record":     record,
		}, nil)
	})
}

// exists asks whether the post record rkey is in the account's repo.
func (p *BlueskyPoster) exists(ctx context.Context, token, did, rkey string) (bool, error) {
	err := p.xrpc(ctx, false, "com.atproto.repo.getRecord", token, url.Values{
		"repo": {did}, "collection": {"app.bsky.feed.post"}, "rkey": {rkey},
	}, nil, nil)
	var xe *xrpcError
	if errors.As(err, &xe) && xe.Name == "RecordNotFound" {
		return false, nil
	}
	return err == nil, err
}

// Recover asks the PDS whether the attempt's record exists: posted if it
// does, pending again if not.
func (p *BlueskyPoster) Recover(ctx context.Context, a store.FeedAttempt, _ time.Time) (Recovery, error) {
	if !ValidTID(a.Key) {
		return RecoverPosted, nil
	}
	var found bool
	err := p.authed(ctx, func(token, did string) error {
		var err error
		found, err = p.exists(ctx, token, did, a.Key)
		return err
	})
	if err != nil {
		return RecoverPosted, err
	}
	if found {
		return RecoverPosted, nil
	}
	return RecoverRelease, nil
}

// HoldUntil is when the rate limit the last answer reported resets, if
// that answer left none.
func (p *BlueskyPoster) HoldUntil() time.Time { return p.hold.get() }

const tidAlphabet = "234567abcdefghijklmnopqrstuvwxyz"

var tidMu sync.Mutex
var tidLast int64

// NewTID returns a TID (the AT Protocol's timestamp identifier: 53 bits of
// microseconds, 10 bits of clock id, base32-sortable) for now, strictly
// greater than any this process returned before, so keys made under one
// (fake or coarse) clock never collide.
func NewTID(now time.Time) string {
	tidMu.Lock()
	us := now.UnixMicro()
	if us <= tidLast {
		us = tidLast + 1
	}
	tidLast = us
	tidMu.Unlock()
	n := uint64(us)<<10 | uint64(tidClock)
	n &^= 1 << 63
	var b [13]byte
	for i := 12; i >= 0; i-- {
		b[i] = tidAlphabet[n&31]
		n >>= 5
	}
	return string(b[:])
}

// tidClock is this process's clock id.
var tidClock = time.Now().UnixNano() & 1023

// ValidTID reports whether s is a TID.
func ValidTID(s string) bool {
	if len(s) != 13 || strings.IndexByte("234567abcdefghij", s[0]) < 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(tidAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

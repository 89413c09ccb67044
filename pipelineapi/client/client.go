// Package client calls the node's pipeline API v1 (doc/pipeline-api.md):
// it signs every request with the pipeline's Ed25519 key and decodes the
// answers. The bridge and the simulator's API mode use it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/internal/retry"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// Client calls one node as one pipeline key. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	key     string
	priv    ed25519.PrivateKey
	hc      *http.Client
	now     func() time.Time
	nonceFn func() string
	retry   Retry
	// oldNodeUntil (UnixNano): until then takes go without take_id, the
	// node having refused the field (a node older than take_id).
	oldNodeUntil atomic.Int64
}

// Retry bounds how Take sends a take again whose outcome it does not know
// (doc/pipeline-api.md, A lost answer): Attempts sends in all (1: no
// retry), waiting Min, then twice as long each time up to Max between
// two (the module's one backoff, internal/retry; a 503's Retry-After,
// when given, instead, at most Max).
type Retry struct {
	Attempts int
	Min, Max time.Duration
}

// DefaultTakeRetry is Take's retry unless WithTakeRetry says otherwise:
// four sends over about two seconds, and the caller's context bounds them.
var DefaultTakeRetry = Retry{Attempts: 4, Min: 250 * time.Millisecond, Max: 2 * time.Second}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient uses hc (its Timeout must allow long polls: a take waits
// up to its WaitMS, and the control stream never ends by itself).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithClock signs with now instead of time.Now (tests of stale timestamps).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithTakeRetry sets how Take retries a take whose outcome is unknown.
func WithTakeRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// New returns a client of the node at base (the pipelines.listen address,
// or the proxy in front of it, as an http:// or https:// URL with no path:
// the path is signed as the node receives it, so a proxy must pass paths
// through unchanged) signing as keyName with priv.
func New(base string, keyName string, priv ed25519.PrivateKey, opts ...Option) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// "127.0.0.1:8080" is a parse error ("first path segment in URL
		// cannot contain colon"), "node:8080" a URL of scheme "node".
		return nil, fmt.Errorf("node URL %q: want http://HOST:PORT or https://HOST[:PORT], the node's pipelines.listen address (or the proxy in front of it)", base)
	}
	if !wire.ValidKeyName(keyName) {
		return nil, fmt.Errorf("key name %q: 1-64 of A-Za-z0-9._-", keyName)
	}
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("private key: not an Ed25519 private key")
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("node URL %q: no path or query (the API's paths are fixed)", base)
	}
	u.Path, u.RawPath = "", ""
	c := &Client{base: u, key: keyName, priv: priv, hc: &http.Client{Transport: newTransport()}, now: time.Now, nonceFn: RandomNonce, retry: DefaultTakeRetry}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// IdleConnsPerNode is how many idle connections to the node a client
// keeps for reuse. A pipeline's calls are concurrent (each job's updates
// and heartbeats, a long-poll take per free slot, the control stream, and
// a bridge's for all its pipelines), and net/http's default of 2 closed
// the rest after each call: every other request paid a new TCP
// connection, on the pipeline, any proxy and the node (the chaos soak's
// profile, doc/soak.md).
const IdleConnsPerNode = 64

// newTransport is http.DefaultTransport's settings with IdleConnsPerNode.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = IdleConnsPerNode
	t.MaxIdleConns = IdleConnsPerNode
	return t
}

// KeyName is the key the client signs as.
func (c *Client) KeyName() string { return c.key }

// RandomNonce is 16 bytes from crypto/rand in hex.
func RandomNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// NewTakeID is a fresh wire.TakeRequest.TakeID: 16 bytes from
// crypto/rand in hex.
func NewTakeID() string { return RandomNonce() }

// Error is a refusal from the node.
type Error struct {
	Status int
	// Code and Reason are the answer's body (wire.Error).
	Code, Reason string
	// RetryAfter is the Retry-After of a 429 or 503, else 0.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("pipeline API: %d %s: %s", e.Status, e.Code, e.Reason)
}

// FromAPI says whether the refusal came from a pipeline API: its codes
// are snake_case words (wire.Error). Anything else (a web server's 405,
// a proxy's 502 page) means the address is not the API's.
func (e *Error) FromAPI() bool {
	if e.Code == "" || strings.HasPrefix(e.Code, "http_") {
		return false
	}
	for _, r := range e.Code {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return true
}

// IsCode reports whether err is a refusal with code (wire.Error codes).
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// NewRequest builds a signed request for path (wire.Path…, with the
// query if any) and body (nil for none). Exposed for tests that alter a
// signed request.
func (c *Client) NewRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	u := *c.base
	p, q := wire.SplitRequestURI(path)
	u.Path = ""
	u.RawPath = ""
	if err := setEscapedPath(&u, p); err != nil {
		return nil, err
	}
	u.RawQuery = q
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	sp, sq := wire.SplitRequestURI(req.URL.RequestURI())
	s := wire.Sign(c.priv, c.key, method, sp, sq, body, c.now(), c.nonceFn())
	req.Header.Set(wire.HeaderKey, s.Key)
	req.Header.Set(wire.HeaderTimestamp, s.Timestamp)
	req.Header.Set(wire.HeaderNonce, s.Nonce)
	req.Header.Set(wire.HeaderSignature, s.Signature)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func setEscapedPath(u *url.URL, escaped string) error {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return fmt.Errorf("path %q: %w", escaped, err)
	}
	u.Path = p
	u.RawPath = escaped
	return nil
}

// Do sends a signed request and decodes a 2xx JSON answer into out (nil:
// ignore the body). A refusal is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	req, err := c.NewRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	return c.send(req, out)
}

func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("pipeline API: %s %s: answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// Send sends an already signed request (from NewRequest) and decodes as
// Do does.
func (c *Client) Send(req *http.Request, out any) error { return c.send(req, out) }

func readError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode}
	var w wire.Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &w) == nil && w.Error != "" {
		e.Code, e.Reason = w.Error, w.Reason
	} else {
		e.Code, e.Reason = "http_"+strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(b))
	}
	now := time.Now()
	if at, ok := retry.After(resp.Header, now); ok {
		e.RetryAfter = max(at.Sub(now), 0)
	}
	return e
}

func jobPath(ident, op string) string {
	p := wire.PathJobs + url.PathEscape(ident)
	if op != "" {
		p += "/" + op
	}
	return p
}

// Take asks for a job; it returns nil, nil when none came within
// req.WaitMS.
//
// A take is idempotent by its req.TakeID (NewTakeID when empty): when
// its outcome is unknown (the request or its answer was lost, a timeout,
// a 5xx such as 503 retry) Take sends the same take again, signed anew,
// as the client's Retry allows; the node answers the job the first send
// took, if it did, instead of taking another, so no job is left held by
// the key while the pipeline does not know it. A refusal (4xx) is
// definite and returned at once. A caller that retries a failed Take
// itself should pass the same TakeID again (until Take answers or
// refuses).
func (c *Client) Take(ctx context.Context, req wire.TakeRequest) (*wire.Job, error) {
	if req.TakeID == "" {
		req.TakeID = NewTakeID()
	}
	if time.Now().UnixNano() < c.oldNodeUntil.Load() {
		req.TakeID = ""
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	r := c.retry
	backoff := retry.Backoff{Min: r.Min, Max: r.Max}
	for attempt := 1; ; attempt++ {
		var out wire.TakeResponse
		hr, err := c.NewRequest(ctx, http.MethodPost, wire.PathTake, body)
		if err != nil {
			return nil, err
		}
		err = c.send(hr, &out)
		if err == nil {
			return out.Job, nil
		}
		if req.TakeID != "" && takeIDUnknown(err) {
			// A node older than take_id refused the field: nothing was
			// taken. Take without it (as before take_id) for a while,
			// then try again, the node may have been updated.
			c.oldNodeUntil.Store(time.Now().Add(OldNodeRecheck).UnixNano())
			req.TakeID = ""
			if body, err = json.Marshal(req); err != nil {
				return nil, err
			}
			attempt--
			continue
		}
		if attempt >= r.Attempts || ctx.Err() != nil || !OutcomeUnknown(err) {
			return nil, err
		}
		d := backoff.Wait(attempt - 1)
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			d = min(e.RetryAfter, r.Max)
		}
		if !retry.Sleep(ctx, d) {
			return nil, err
		}
	}
}

// OldNodeRecheck is how long a client takes without take_id after a
// node refused the field as unknown (a node older than take_id).
var OldNodeRecheck = 5 * time.Minute

// takeIDUnknown says whether err is a node's refusal of the take_id field
// itself: a node older than take_id decodes bodies strictly.
func takeIDUnknown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusBadRequest && e.Code == "bad_request" &&
		strings.Contains(e.Reason, `unknown field "take_id"`)
}

// OutcomeUnknown says whether a request that failed with err may have
// been carried out by the node: its answer was lost (a transport error, a
// timeout, an answer cut short) or the node or a proxy answered 5xx (a
// 503 retry can come after the store ran the write, its reply lost). A
// refusal of 4xx is definite: nothing was done.
func OutcomeUnknown(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return !errors.Is(err, context.Canceled)
}

// Job reads a held job's record and ignore set.
func (c *Client) Job(ctx context.Context, ident string) (*wire.Job, error) {
	var out wire.Job
	if err := c.Do(ctx, http.MethodGet, jobPath(ident, ""), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Update sends heartbeats, counters, fields and log entries of a held job.
func (c *Client) Update(ctx context.Context, ident string, req wire.UpdateRequest) (wire.UpdateResponse, error) {
	var out wire.UpdateResponse
	err := c.Do(ctx, http.MethodPost, jobPath(ident, "update"), req, &out)
	return out, err
}

// Heartbeat adds 1 to a held job's heartbeat.
func (c *Client) Heartbeat(ctx context.Context, ident string) (wire.UpdateResponse, error) {
	return c.Update(ctx, ident, wire.UpdateRequest{Heartbeat: 1})
}

// Abort marks a held job aborted (upstream's mark_aborted).
func (c *Client) Abort(ctx context.Context, ident string) (wire.DoneResponse, error) {
	var out wire.DoneResponse
	err := c.Do(ctx, http.MethodPost, jobPath(ident, "abort"), struct{}{}, &out)
	return out, err
}

// Done finishes a held job (upstream's mark_done).
func (c *Client) Done(ctx context.Context, ident string) (wire.DoneResponse, error) {
	var out wire.DoneResponse
	err := c.Do(ctx, http.MethodPost, jobPath(ident, "done"), struct{}{}, &out)
	return out, err
}

// Report writes the pipeline's record.
func (c *Client) Report(ctx context.Context, fields map[string]string) (wire.PipelineResponse, error) {
	var out wire.PipelineResponse
	err := c.Do(ctx, http.MethodPut, wire.PathPipeline, wire.PipelineReport{Fields: fields}, &out)
	return out, err
}

// Unregister deletes the pipeline's record.
func (c *Client) Unregister(ctx context.Context) (wire.PipelineResponse, error) {
	var out wire.PipelineResponse
	err := c.Do(ctx, http.MethodDelete, wire.PathPipeline, nil, &out)
	return out, err
}

// WhoAmI asks the node which key it verifies this client's signature
// with (GET /v1/pipeline), and its clock.
func (c *Client) WhoAmI(ctx context.Context) (wire.WhoAmI, error) {
	var out wire.WhoAmI
	err := c.Do(ctx, http.MethodGet, wire.PathPipeline, nil, &out)
	return out, err
}

// Event is one control stream event.
type Event struct {
	// Name is wire.EventSettings, wire.EventReleased or wire.EventBye.
	Name string
	// Data is the event's JSON.
	Data json.RawMessage
}

// Settings decodes a settings event.
func (e Event) Settings() (wire.Settings, error) {
	var s wire.Settings
	err := json.Unmarshal(e.Data, &s)
	return s, err
}

// Control opens the control stream and calls fn for each event until ctx
// ends, the node closes the stream (a bye event, then io.EOF) or fn
// returns an error. Reconnecting is the caller's (after RetryAfter on a
// 503).
func (c *Client) Control(ctx context.Context, fn func(Event) error) error {
	req, err := c.NewRequest(ctx, http.MethodGet, wire.PathControl, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), wire.MaxBody)
	var ev Event
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				if ev.Name == "" {
					ev.Name = "message"
				}
				ev.Data = json.RawMessage(bytes.Clone(data))
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = Event{}, data[:0]
		case strings.HasPrefix(line, ":"):
			// comment (keep-alive)
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

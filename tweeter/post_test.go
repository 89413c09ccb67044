package tweeter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

var apis = []string{tweeter.APIv2, tweeter.APIv11}

// rig is a tweeter on a test backend with a settable clock.
type rig struct {
	tw    *tweeter.Tweeter
	store *store.Store
	c     *redis.Client
	log   *logBuffer
	now   time.Time
	// storeNow is the store's clock (r.now unless a test sets it).
	storeNow func() time.Time
}

// newRig builds a tweeter on b. Zero config fields take test defaults:
// quick retries, and no background loops unless the test starts them.
func newRig(t *testing.T, b *redistest.Backend, cfg tweeter.Config) *rig {
	t.Helper()
	ctx := context.Background()
	if err := b.Client.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	r := &rig{c: b.Client, now: time.Unix(1_700_000_000, 0)}
	r.storeNow = func() time.Time { return r.now }
	r.store = store.New(b.Client, store.WithClock(func() time.Time { return r.storeNow() }))
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = time.Millisecond
	}
	cfg.Logger, r.log = newLogger(t)
	tw, err := tweeter.New(r.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.tw = tw
	return r
}

// eachRig runs fn with a fresh rig of cfg on each backend
// (redistest.Each) and a background context.
func eachRig(t *testing.T, cfg tweeter.Config, fn func(t *testing.T, r *rig, ctx context.Context)) {
	t.Helper()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) { fn(t, newRig(t, b, cfg), context.Background()) })
}

// fakeRig is a rig posting to a fake Twitter through the real posters.
func fakeRig(t *testing.T, b *redistest.Backend, api string, fake *fakeTwitter) *rig {
	return newRig(t, b, tweeter.Config{API: api, Credentials: testCreds, Transport: fake.transport()})
}

func (r *rig) queue(t *testing.T, texts ...string) {
	t.Helper()
	for i, text := range texts {
		// Oldest first, in the order given.
		if err := r.c.ZAdd(context.Background(), store.KeyTweetsQueue, redis.Z{Score: float64(r.now.Unix() - int64(len(texts)-i)), Member: text}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *rig) members(t *testing.T, key string) []string {
	t.Helper()
	m, err := r.c.ZRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (r *rig) attempts(t *testing.T) map[string]string {
	t.Helper()
	m, err := r.c.HGetAll(context.Background(), store.KeyFeedAttempts(r.net())).Result()
	if err != nil {
		t.Fatal(err)
	}
	// text -> attempt key, like the one-network attempt hash of old.
	out := map[string]string{}
	for k, v := range m {
		var a store.FeedAttempt
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			t.Fatal(err)
		}
		for _, it := range a.Items {
			out[it] = k
		}
	}
	return out
}

// net is the rig's only network.
func (r *rig) net() string { return r.tw.Networks()[0] }

// state is where texts are in Redis.
type state struct {
	Queued, Done, Failed []string
	Attempts             map[string]string
}

func (r *rig) state(t *testing.T) state {
	return state{
		Queued:   r.members(t, store.KeyTweetsQueue),
		Done:     r.members(t, store.KeyTweetsDone),
		Failed:   r.members(t, store.KeyTweetsFailed),
		Attempts: r.attempts(t),
	}
}

func (r *rig) runOnce(t *testing.T) tweeter.Outcome {
	t.Helper()
	out, err := r.tw.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	return out
}

// mustRun runs the tweeter once and stops the test unless the outcome is
// want.
func (r *rig) mustRun(t *testing.T, want tweeter.Outcome) {
	t.Helper()
	if out := r.runOnce(t); out != want {
		t.Fatalf("RunOnce = %v, want %v", out, want)
	}
}

// wantState checks where texts are in Redis; when names the moment in a
// test that checks more than once ("" for the end).
func (r *rig) wantState(t *testing.T, when string, want state) {
	t.Helper()
	if when != "" {
		when = " " + when
	}
	if diff := cmp.Diff(want, r.state(t), cmpEmpty); diff != "" {
		t.Errorf("redis%s (-want +got):\n%s", when, diff)
	}
}

// noneTwice fails the test if the fake accepted a text twice.
func noneTwice(t *testing.T, fake *fakeTwitter) {
	t.Helper()
	_, posted := fake.snapshot()
	seen := map[string]bool{}
	for _, p := range posted {
		if seen[p] {
			t.Errorf("%q posted twice: %q", p, posted)
		}
		seen[p] = true
	}
}

func v1Error(status, code int, msg string) answer {
	return answer{status: status, body: fmt.Sprintf(`{"errors":[{"code":%d,"message":%q}]}`, code, msg)}
}

func v2Problem(status int, title, detail string) answer {
	return answer{status: status, body: fmt.Sprintf(`{"title":%q,"detail":%q,"type":"about:blank","status":%d}`, title, detail, status)}
}

const text1 = "Archiving https://example.com/"

func TestPost(t *testing.T) {
	five := func(a answer) []answer { return []answer{a, a, a, a, a} }
	tests := []struct {
		name    string
		only    string // run for this API only
		answers map[string][]answer
		runs    []tweeter.Outcome
		// requests is the number of calls the fake got; posted those it
		// accepted.
		requests, posted int
		want             state
		logHas           string
	}{
		{
			name: "success",
			runs: []tweeter.Outcome{tweeter.Posted, tweeter.Idle}, requests: 1, posted: 1,
			want: state{Done: []string{text1}},
		},
		{
			name: "5xx then success",
			answers: map[string][]answer{
				tweeter.APIv11: {v1Error(503, 130, "Over capacity"), {status: 502, body: "<html>Bad Gateway</html>"}},
				tweeter.APIv2:  {v2Problem(503, "Service Unavailable", "Service Unavailable"), {status: 500}},
			},
			runs: []tweeter.Outcome{tweeter.Posted, tweeter.Idle}, requests: 3, posted: 1,
			want:   state{Done: []string{text1}},
			logHas: "retrying",
		},
		{
			name: "5xx until given up",
			answers: map[string][]answer{
				tweeter.APIv11: five(v1Error(500, 131, "Internal error")),
				tweeter.APIv2:  five(v2Problem(500, "Internal Server Error", "oops")),
			},
			runs: []tweeter.Outcome{tweeter.GaveUp, tweeter.Idle}, requests: 5,
			want:   state{Failed: []string{text1}},
			logHas: "post failed too often",
		},
		{
			name: "permanent failure",
			answers: map[string][]answer{
				tweeter.APIv11: {v1Error(401, 89, "Invalid or expired token.")},
				tweeter.APIv2:  {v2Problem(401, "Unauthorized", "Unauthorized")},
			},
			runs: []tweeter.Outcome{tweeter.GaveUp, tweeter.Idle}, requests: 1,
			want:   state{Failed: []string{text1}},
			logHas: "refused the post",
		},
		{
			name: "403 error 453 on v1.1", only: tweeter.APIv11,
			answers: map[string][]answer{
				tweeter.APIv11: {v1Error(403, 453, "You currently have access to a subset of Twitter API v2 endpoints and limited v1.1 endpoints only.")},
			},
			runs: []tweeter.Outcome{tweeter.GaveUp, tweeter.Idle}, requests: 1,
			want:   state{Failed: []string{text1}},
			logHas: `Set api = \"v2\" in the [tweeter] section`,
		},
		{
			name: "v2 client not enrolled", only: tweeter.APIv2,
			answers: map[string][]answer{
				tweeter.APIv2: {{status: 403, body: `{"title":"Client Forbidden","detail":"When authenticating requests to the Twitter API v2 endpoints, you must use keys and tokens from a Twitter developer App that is attached to a Project.","reason":"client-not-enrolled","type":"https://api.twitter.com/2/problems/client-forbidden"}`}},
			},
			runs: []tweeter.Outcome{tweeter.GaveUp, tweeter.Idle}, requests: 1,
			want:   state{Failed: []string{text1}},
			logHas: "client-not-enrolled",
		},
		{
			// A retry whose first try went through unanswered.
			name: "duplicate answer",
			answers: map[string][]answer{
				tweeter.APIv11: {v1Error(403, 187, "Status is a duplicate.")},
				tweeter.APIv2:  {v2Problem(403, "Forbidden", "You are not allowed to create a Tweet with duplicate content.")},
			},
			runs: []tweeter.Outcome{tweeter.Posted, tweeter.Idle}, requests: 1,
			want:   state{Done: []string{text1}},
			logHas: "already online",
		},
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range tests {
			for _, api := range apis {
				if tc.only != "" && api != tc.only {
					continue
				}
				t.Run(tc.name+"/"+api, func(t *testing.T) {
					fake := newFakeTwitter(t)
					fake.reply(tc.answers[api]...)
					r := fakeRig(t, b, api, fake)
					r.queue(t, text1)
					var runs []tweeter.Outcome
					for range tc.runs {
						runs = append(runs, r.runOnce(t))
					}
					if diff := cmp.Diff(tc.runs, runs); diff != "" {
						t.Errorf("RunOnce outcomes (-want +got):\n%s", diff)
					}
					requests, posted := fake.snapshot()
					if len(requests) != tc.requests || len(posted) != tc.posted {
						t.Errorf("fake API got %d requests and accepted %d, want %d and %d: %q",
							len(requests), len(posted), tc.requests, tc.posted, requests)
					}
					for _, req := range requests {
						if req != api+" "+text1 {
							t.Errorf("request %q, want %q", req, api+" "+text1)
						}
					}
					if tc.want.Attempts == nil {
						tc.want.Attempts = map[string]string{}
					}
					r.wantState(t, "", tc.want)
					if !strings.Contains(r.log.String(), tc.logHas) {
						t.Errorf("log lacks %q", tc.logHas)
					}
					noneTwice(t, fake)
				})
			}
		}
	})
}

// cmpEmpty equates nil and empty slices and maps.
var cmpEmpty = cmpopts.EquateEmpty()

// Several texts, some failing: each ends in tweets:done or the failed
// record exactly once, oldest first.
func TestPostQueueInOrder(t *testing.T) {
	texts := []string{"Archiving https://a.example/", "Archiving https://b.example/", "Archiving https://c.example/", "Archiving https://d.example/"}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, api := range apis {
			t.Run(api, func(t *testing.T) {
				fake := newFakeTwitter(t)
				r := fakeRig(t, b, api, fake)
				r.queue(t, texts...)
				// a: posted after one 5xx. b: refused. c, d: posted.
				fake.reply(answer{status: 500}, answer{status: 201, body: `{"data":{"id":"1"}}`}, answer{status: 400, body: `{"errors":[{"code":44,"message":"bad"}]}`})
				var runs []tweeter.Outcome
				for out := r.runOnce(t); out != tweeter.Idle; out = r.runOnce(t) {
					runs = append(runs, out)
					if len(runs) > 10 {
						t.Fatal("RunOnce never idles")
					}
				}
				want := []tweeter.Outcome{tweeter.Posted, tweeter.GaveUp, tweeter.Posted, tweeter.Posted}
				if diff := cmp.Diff(want, runs); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				requests, posted := fake.snapshot()
				wantReq := []string{api + " " + texts[0], api + " " + texts[0], api + " " + texts[1], api + " " + texts[2], api + " " + texts[3]}
				if diff := cmp.Diff(wantReq, requests); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{texts[0], texts[2], texts[3]}, posted); diff != "" {
					t.Errorf("posted (-want +got):\n%s", diff)
				}
				wantState := state{Done: []string{texts[0], texts[2], texts[3]}, Failed: []string{texts[1]}}
				r.wantState(t, "", wantState)
				noneTwice(t, fake)
			})
		}
	})
}

func TestPostRateLimited(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, api := range apis {
			t.Run(api, func(t *testing.T) {
				fake := newFakeTwitter(t)
				r := fakeRig(t, b, api, fake)
				r.queue(t, text1)
				reset := r.now.Add(15 * time.Minute)
				a := v2Problem(429, "Too Many Requests", "Too Many Requests")
				if api == tweeter.APIv11 {
					a = v1Error(429, 88, "Rate limit exceeded")
				}
				a.header = map[string]string{
					"x-rate-limit-limit":     "200",
					"x-rate-limit-remaining": "0",
					"x-rate-limit-reset":     fmt.Sprint(reset.Unix()),
				}
				fake.reply(a)

				r.mustRun(t, tweeter.Paused)
				if got := r.tw.PausedUntil(); !got.Equal(reset) {
					t.Errorf("PausedUntil = %v, want %v", got, reset)
				}
				// The text waits in the queue, its attempt released.
				r.wantState(t, "", state{Queued: []string{text1}})
				// Before the reset nothing is sent.
				r.now = reset.Add(-time.Second)
				if out := r.runOnce(t); out != tweeter.Paused {
					t.Errorf("RunOnce before the reset = %v, want paused", out)
				}
				if req, _ := fake.snapshot(); len(req) != 1 {
					t.Errorf("%d requests before the reset, want 1", len(req))
				}
				r.now = reset.Add(time.Second)
				if out := r.runOnce(t); out != tweeter.Posted {
					t.Errorf("RunOnce after the reset = %v, want posted", out)
				}
				r.wantState(t, "", state{Done: []string{text1}})
				noneTwice(t, fake)
			})
		}
	})
}

// API v2's daily limits answer 429 with their own reset headers; the
// latest exhausted one wins. Without any, RateLimitPause applies.
func TestPostRateLimitHeaders(t *testing.T) {
	b := redistest.Mini(t)
	tests := []struct {
		name   string
		header func(now time.Time) map[string]string
		want   time.Duration
	}{
		{
			name: "user daily limit",
			header: func(now time.Time) map[string]string {
				return map[string]string{
					"x-rate-limit-remaining":         "99",
					"x-rate-limit-reset":             fmt.Sprint(now.Add(10 * time.Minute).Unix()),
					"x-user-limit-24hour-limit":      "17",
					"x-user-limit-24hour-remaining":  "0",
					"x-user-limit-24hour-reset":      fmt.Sprint(now.Add(20 * time.Hour).Unix()),
					"x-app-limit-24hour-remaining":   "1000",
					"x-app-limit-24hour-reset":       fmt.Sprint(now.Add(23 * time.Hour).Unix()),
					"x-app-limit-24hour-limit":       "1500",
					"x-user-limit-24hour-limit-note": "not a reset",
				}
			},
			want: 20 * time.Hour,
		},
		{
			name:   "no reset header",
			header: func(time.Time) map[string]string { return nil },
			want:   7 * time.Minute,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeTwitter(t)
			r := newRig(t, b, tweeter.Config{Credentials: testCreds, Transport: fake.transport(), RateLimitPause: 7 * time.Minute})
			// Reset headers are wall-clock times.
			r.now = time.Now().Truncate(time.Second)
			r.queue(t, text1)
			a := v2Problem(429, "Too Many Requests", "Too Many Requests")
			a.header = tc.header(r.now)
			fake.reply(a)
			r.mustRun(t, tweeter.Paused)
			if got := r.tw.PausedUntil().Sub(r.now); got != tc.want {
				t.Errorf("paused for %v, want %v", got, tc.want)
			}
		})
	}
}

// A crash between posting and recording leaves the attempt behind: the next
// run records the text as posted and does not post it again.
func TestPostAfterCrash(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		fake := newFakeTwitter(t)
		r := fakeRig(t, b, tweeter.APIv2, fake)
		r.queue(t, text1, "Archiving https://next.example/")
		// The crashed process claimed the text (and maybe posted it).
		now := r.now.UnixMilli()
		a := store.FeedAttempt{Key: tweeter.NewTID(r.now), At: now, Post: text1, Items: []string{text1}}
		if why, err := r.store.FeedClaim(context.Background(), tweeter.NetX, a, 0, time.Hour); err != nil || why != "" {
			t.Fatal(why, err)
		}
		if out := r.runOnce(t); out != tweeter.Posted {
			t.Errorf("RunOnce = %v, want posted (the next text)", out)
		}
		requests, _ := fake.snapshot()
		if diff := cmp.Diff([]string{"v2 Archiving https://next.example/"}, requests); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		want := state{Done: []string{text1, "Archiving https://next.example/"}}
		r.wantState(t, "", want)
		if !strings.Contains(r.log.String(), "never resolved") {
			t.Error("the unresolved attempt was not logged")
		}
	})
}

// blockingPoster answers like a hanging API until the context ends.
type blockingPoster struct{ started chan string }

func (p blockingPoster) Post(ctx context.Context, text string) error {
	p.started <- text
	<-ctx.Done()
	return fmt.Errorf("post: %w", ctx.Err())
}

// failingPoster always answers with a retryable HTTP error.
type failingPoster struct{ tries chan string }

func (p failingPoster) Post(_ context.Context, text string) error {
	p.tries <- text
	return &tweeter.TemporaryError{API: "v2", Status: 503}
}

// Stopped mid-post: unanswered, the attempt stays (the text counts as
// posted); answered with an error, the attempt is released (the text is
// posted later).
func TestPostInterrupted(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		t.Run("unanswered", func(t *testing.T) {
			p := blockingPoster{started: make(chan string, 1)}
			r := newRig(t, b, tweeter.Config{Poster: p})
			r.queue(t, text1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan tweeter.Outcome)
			go func() {
				out, err := r.tw.RunOnce(ctx)
				if err != nil {
					t.Error(err)
				}
				done <- out
			}()
			<-p.started
			cancel()
			if out := <-done; out != tweeter.Interrupted {
				t.Errorf("RunOnce = %v, want interrupted", out)
			}
			st := r.state(t)
			if len(st.Attempts) != 1 || len(st.Queued) != 1 {
				t.Errorf("after an unanswered post, redis = %+v; want the text queued with its attempt", st)
			}
		})
		t.Run("answered", func(t *testing.T) {
			p := failingPoster{tries: make(chan string, 1)}
			r := newRig(t, b, tweeter.Config{Poster: p, RetryBackoff: time.Hour})
			r.queue(t, text1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan tweeter.Outcome)
			go func() {
				out, err := r.tw.RunOnce(ctx)
				if err != nil {
					t.Error(err)
				}
				done <- out
			}()
			<-p.tries // now waiting an hour to retry
			cancel()
			if out := <-done; out != tweeter.Interrupted {
				t.Errorf("RunOnce = %v, want interrupted", out)
			}
			r.wantState(t, "", state{Queued: []string{text1}})
		})
	})
}

func TestErrorKinds(t *testing.T) {
	perm := &tweeter.PermanentError{API: "v1.1", Status: 403, Code: 453, Kind: tweeter.ErrV1Forbidden}
	if !errors.Is(fmt.Errorf("wrapped: %w", perm), tweeter.ErrV1Forbidden) {
		t.Error("a 453 PermanentError is not ErrV1Forbidden")
	}
	if !tweeter.Answered(perm) || tweeter.Answered(context.Canceled) {
		t.Error("Answered misclassifies")
	}
	if s := fmt.Sprintf("%v %+v %#v %s", testCreds, testCreds, testCreds, testCreds); strings.Contains(s, "SECRET") || strings.Contains(s, testCreds.ConsumerKey) {
		t.Errorf("credentials formatted as %q", s)
	}
}

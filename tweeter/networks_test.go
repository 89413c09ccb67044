package tweeter_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

func mastoNet(f *fakeMastodon, budget int, tr http.RoundTripper) tweeter.Network {
	return tweeter.MastodonNetwork(f.srv.URL, mastodonToken, budget, time.Hour, tr)
}

func bskyNet(f *fakeBluesky, budget int, tr http.RoundTripper) tweeter.Network {
	return tweeter.BlueskyNetwork(f.srv.URL, bskyHandle, bskyPassword, budget, time.Hour, tr)
}

// onMastodon is a rig posting only to a new fake Mastodon, with cfg's
// other settings.
func onMastodon(t *testing.T, b *redistest.Backend, cfg tweeter.Config) (*fakeMastodon, *rig) {
	f := newFakeMastodon(t)
	cfg.Networks = []tweeter.Network{mastoNet(f, 0, nil)}
	return f, newRig(t, b, cfg)
}

// onBluesky is a rig posting only to a new fake Bluesky, with cfg's other
// settings.
func onBluesky(t *testing.T, b *redistest.Backend, cfg tweeter.Config) (*fakeBluesky, *rig) {
	f := newFakeBluesky(t)
	cfg.Networks = []tweeter.Network{bskyNet(f, 0, nil)}
	return f, newRig(t, b, cfg)
}

// queueURL queues "Archiving URL" for u the way CheckJob does (text and
// URL), oldest first in call order.
func (r *rig) queueURL(t *testing.T, urls ...string) []string {
	t.Helper()
	ctx := context.Background()
	var texts []string
	for i, u := range urls {
		text := tweeter.ArchivingText(u)
		if err := r.c.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: float64(r.store.Now().Unix()) + float64(i)/10000, Member: text}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.c.HSet(ctx, store.KeyFeedURLs, text, u).Err(); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, text)
	}
	return texts
}

func (r *rig) failures(t *testing.T, net string) []store.FeedFailure {
	t.Helper()
	f, err := r.store.FeedFailures(context.Background(), net)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMastodonPostShape(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f, r := onMastodon(t, b, tweeter.Config{})
		texts := r.queueURL(t, "https://example.com/")
		r.mustRun(t, tweeter.Posted)
		got := f.posted()
		if len(got) != 1 || got[0].Text != "Archiving https://example.com/" || got[0].Visibility != "public" || !tweeter.ValidTID(got[0].Key) {
			t.Fatalf("posted %+v; want one public status with a TID Idempotency-Key", got)
		}
		r.wantState(t, "", state{Done: texts})
		if strings.Contains(r.log.String(), mastodonToken) {
			t.Error("the access token reached the log")
		}
	})
}

// eachLostAnswer runs a subtest for each way the answer to a post can be
// lost after the send (a timeout, the connection lost): setup gives the
// network answering so and a check of what the network received. The one
// queued text must end posted and done.
func eachLostAnswer(t *testing.T, b *redistest.Backend, setup func(t *testing.T, a fakeAnswer) (tweeter.Network, func(t *testing.T))) {
	for _, tc := range []struct {
		name string
		a    fakeAnswer
	}{{"timeout after the send", fakeAnswer{slow: 3 * time.Second}}, {"connection lost after the send", fakeAnswer{hangup: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			n, check := setup(t, tc.a)
			r := newRig(t, b, tweeter.Config{Networks: []tweeter.Network{n}})
			texts := r.queueURL(t, "https://example.com/")
			r.mustRun(t, tweeter.Posted)
			check(t)
			r.wantState(t, "", state{Done: texts})
		})
	}
}

func TestMastodonErrors(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		t.Run("401", func(t *testing.T) {
			f, r := onMastodon(t, b, tweeter.Config{})
			texts := r.queueURL(t, "https://example.com/")
			f.reply(fakeAnswer{status: 401, body: `{"error":"The access token is invalid"}`})
			r.mustRun(t, tweeter.GaveUp)
			fl := r.failures(t, tweeter.NetMastodon)
			if len(fl) != 1 || fl[0].Text != texts[0] || !strings.Contains(fl[0].Reason, "HTTP 401") || !strings.Contains(fl[0].Reason, "access token is invalid") {
				t.Errorf("failures = %+v, want the 401 recorded", fl)
			}
			r.wantState(t, "", state{Failed: texts})
		})
		t.Run("429", func(t *testing.T) {
			f, r := onMastodon(t, b, tweeter.Config{})
			texts := r.queueURL(t, "https://example.com/")
			reset := r.now.Add(17 * time.Minute).UTC()
			f.reply(fakeAnswer{status: 429, header: map[string]string{
				"X-RateLimit-Limit": "300", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset.Format("2006-01-02T15:04:05.000Z"),
			}, body: `{"error":"Too many requests"}`})
			r.mustRun(t, tweeter.Paused)
			if got := r.tw.PausedUntil(); !got.Equal(reset) {
				t.Errorf("paused until %v, want the reset %v", got, reset)
			}
			if out := r.runOnce(t); out != tweeter.Paused || f.requests != 1 {
				t.Errorf("before the reset: %v after %d requests, want paused after 1", out, f.requests)
			}
			r.wantState(t, "while paused", state{Queued: texts})
			r.now = reset.Add(time.Second)
			if out := r.runOnce(t); out != tweeter.Posted || len(f.posted()) != 1 {
				t.Errorf("after the reset: %v, %d posted", out, len(f.posted()))
			}
		})
		t.Run("429 Retry-After", func(t *testing.T) {
			f, r := onMastodon(t, b, tweeter.Config{Now: time.Now})
			r.queueURL(t, "https://example.com/")
			f.reply(fakeAnswer{status: 429, header: map[string]string{"Retry-After": "120"}})
			before := time.Now()
			r.mustRun(t, tweeter.Paused)
			if got := r.tw.PausedUntil(); got.Before(before.Add(119*time.Second)) || got.After(time.Now().Add(121*time.Second)) {
				t.Errorf("paused until %v, want about 120 s from now", got)
			}
		})
		t.Run("5xx", func(t *testing.T) {
			f, r := onMastodon(t, b, tweeter.Config{MaxTries: 3})
			texts := r.queueURL(t, "https://example.com/", "https://second.example/")
			f.reply(fakeAnswer{status: 503}, fakeAnswer{status: 502})
			if out := r.runOnce(t); out != tweeter.Posted || len(f.posted()) != 1 || f.requests != 3 {
				t.Errorf("after two 5xx: %v, %d posted in %d requests; want posted on the third", out, len(f.posted()), f.requests)
			}
			f.reply(fakeAnswer{status: 500}, fakeAnswer{status: 500}, fakeAnswer{status: 500})
			if out := r.runOnce(t); out != tweeter.GaveUp {
				t.Errorf("after MaxTries 5xx: %v, want gave up", out)
			}
			fl := r.failures(t, tweeter.NetMastodon)
			if len(fl) != 1 || fl[0].Text != texts[1] || !strings.Contains(fl[0].Reason, "HTTP 500") {
				t.Errorf("failures = %+v", fl)
			}
		})
		eachLostAnswer(t, b, func(t *testing.T, a fakeAnswer) (tweeter.Network, func(t *testing.T)) {
			f := newFakeMastodon(t)
			f.reply(a)
			return mastoNet(f, 0, deadline{d: 300 * time.Millisecond}), func(t *testing.T) {
				if got := f.posted(); len(got) != 1 || f.requests != 2 {
					t.Errorf("%d statuses from %d requests; want the retry (same Idempotency-Key) to make none", len(got), f.requests)
				}
			}
		})
	})
}

// A stop between send and record leaves the attempt; the restarted
// tweeter sends it again with the same Idempotency-Key, which Mastodon
// deduplicates: one status. (The kill -9 of a real node is in
// cmd/archivebot's TestFeedKillMastodon.)
func TestMastodonRestartAfterSend(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f, r := onMastodon(t, b, tweeter.Config{})
		texts := r.queueURL(t, "https://example.com/")
		f.reply(fakeAnswer{slow: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for len(f.posted()) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		out, err := r.tw.RunOnce(ctx)
		if err != nil || out != tweeter.Interrupted {
			t.Fatalf("RunOnce = %v, %v; want interrupted", out, err)
		}
		if len(r.attempts(t)) != 1 {
			t.Fatalf("the attempt is not left behind: %v", r.attempts(t))
		}
		// The restart: a new tweeter over the same Redis.
		cfg := tweeter.Config{Networks: []tweeter.Network{mastoNet(f, 0, nil)}, Now: func() time.Time { return r.now }}
		cfg.Logger, _ = newLogger(t)
		tw, err := tweeter.New(r.store, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := tw.RunOnce(context.Background()); err != nil || out != tweeter.Posted {
			t.Fatalf("after restart: %v, %v", out, err)
		}
		if got := f.posted(); len(got) != 1 || f.requests != 2 {
			t.Errorf("%d statuses from %d requests; want 1 from 2", len(got), f.requests)
		}
		r.wantState(t, "", state{Done: texts})
	})
}

func facetsOf(t *testing.T, rec map[string]any) (text string, links []tweeter.Link) {
	t.Helper()
	text, _ = rec["text"].(string)
	fs, _ := rec["facets"].([]any)
	for _, f := range fs {
		fm := f.(map[string]any)
		idx := fm["index"].(map[string]any)
		feats := fm["features"].([]any)
		if len(feats) != 1 {
			t.Errorf("facet with %d features", len(feats))
			continue
		}
		feat := feats[0].(map[string]any)
		if feat["$type"] != "app.bsky.richtext.facet#link" {
			t.Errorf("facet feature %v: only links are expected", feat)
			continue
		}
		links = append(links, tweeter.Link{Start: int(idx["byteStart"].(float64)), End: int(idx["byteEnd"].(float64)), URI: feat["uri"].(string)})
	}
	return text, links
}

func TestBlueskyPostShape(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		f, r := onBluesky(t, b, tweeter.Config{})
		u := "https://例え.jp/ünïcode?q=🙂"
		texts := r.queueURL(t, u)
		r.mustRun(t, tweeter.Posted)
		posts := f.posts()
		if len(posts) != 1 {
			t.Fatalf("%d posts", len(posts))
		}
		text, links := facetsOf(t, posts[0])
		if text != "Archiving 例え.jp/ünïcode?q=🙂" {
			t.Errorf("text %q", text)
		}
		want := []tweeter.Link{{Start: len("Archiving "), End: len(text), URI: u}}
		if diff := cmp.Diff(want, links); diff != "" {
			t.Errorf("facets (-want +got):\n%s", diff)
		}
		if got := text[links[0].Start:links[0].End]; got != "例え.jp/ünïcode?q=🙂" {
			t.Errorf("the facet's bytes cover %q", got)
		}
		// The access token expires: createRecord answers ExpiredToken, the
		// poster refreshes the session and posts.
		f.expire()
		r.queueURL(t, "https://second.example/")
		if out := r.runOnce(t); out != tweeter.Posted || len(f.posts()) != 2 {
			t.Fatalf("after expiry: %v, %d posts", out, len(f.posts()))
		}
		wantCalls := []string{"com.atproto.server.createSession", "com.atproto.repo.createRecord",
			"com.atproto.repo.createRecord", "com.atproto.server.refreshSession", "com.atproto.repo.createRecord"}
		if diff := cmp.Diff(wantCalls, f.callList()); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		r.wantState(t, "", state{Done: append([]string{"Archiving https://second.example/"}, texts...)})
		if strings.Contains(r.log.String(), bskyPassword) {
			t.Error("the app password reached the log")
		}
	})
}

func TestBlueskyErrors(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		t.Run("401 login", func(t *testing.T) {
			f := newFakeBluesky(t)
			n := tweeter.BlueskyNetwork(f.srv.URL, bskyHandle, "wrong", 0, time.Hour, nil)
			r := newRig(t, b, tweeter.Config{Networks: []tweeter.Network{n}})
			texts := r.queueURL(t, "https://example.com/")
			r.mustRun(t, tweeter.GaveUp)
			fl := r.failures(t, tweeter.NetBluesky)
			if len(fl) != 1 || !strings.Contains(fl[0].Reason, "HTTP 401") || !strings.Contains(fl[0].Reason, "login failed") {
				t.Errorf("failures = %+v", fl)
			}
			r.wantState(t, "", state{Failed: texts})
		})
		t.Run("429", func(t *testing.T) {
			f, r := onBluesky(t, b, tweeter.Config{})
			texts := r.queueURL(t, "https://example.com/")
			reset := r.now.Add(40 * time.Minute)
			f.reply(fakeAnswer{status: 429, header: map[string]string{
				"RateLimit-Limit": "5000", "RateLimit-Remaining": "0", "RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10), "RateLimit-Policy": "5000;w=3600",
			}, body: `{"error":"RateLimitExceeded","message":"Rate Limit Exceeded"}`})
			r.mustRun(t, tweeter.Paused)
			if got := r.tw.PausedUntil(); !got.Equal(reset) {
				t.Errorf("paused until %v, want %v", got, reset)
			}
			r.wantState(t, "", state{Queued: texts})
			r.now = reset
			if out := r.runOnce(t); out != tweeter.Posted {
				t.Errorf("after the reset: %v", out)
			}
		})
		t.Run("5xx", func(t *testing.T) {
			f, r := onBluesky(t, b, tweeter.Config{MaxTries: 2})
			r.queueURL(t, "https://example.com/", "https://second.example/")
			f.reply(fakeAnswer{status: 502, body: "<html>bad gateway</html>"})
			if out := r.runOnce(t); out != tweeter.Posted || len(f.posts()) != 1 {
				t.Errorf("after a 502: %v, %d posts", out, len(f.posts()))
			}
			f.reply(fakeAnswer{status: 500, body: `{"error":"InternalServerError"}`}, fakeAnswer{status: 503})
			if out := r.runOnce(t); out != tweeter.GaveUp {
				t.Errorf("after MaxTries 5xx: %v", out)
			}
			if fl := r.failures(t, tweeter.NetBluesky); len(fl) != 1 || !strings.Contains(fl[0].Reason, "HTTP 503") {
				t.Errorf("failures = %+v", fl)
			}
		})
		eachLostAnswer(t, b, func(t *testing.T, a fakeAnswer) (tweeter.Network, func(t *testing.T)) {
			f := newFakeBluesky(t)
			f.reply(a)
			return bskyNet(f, 0, deadline{d: 300 * time.Millisecond}), func(t *testing.T) {
				if n := len(f.posts()); n != 1 {
					t.Errorf("%d posts, want 1: the retry asks getRecord first", n)
				}
				calls := f.callList()
				if calls[len(calls)-1] != "com.atproto.repo.getRecord" {
					t.Errorf("calls %v: the retry should find the record with getRecord", calls)
				}
			}
		})
	})
}

// One network failing does not hold up the others; the text leaves the
// queue once the failing one gives up, with its reason recorded.
func TestNetworksIndependent(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		fx := newFakeTwitter(t)
		fm := newFakeMastodon(t)
		fb := newFakeBluesky(t)
		r := newRig(t, b, tweeter.Config{Credentials: testCreds, Transport: fx.transport(),
			Networks: []tweeter.Network{mastoNet(fm, 0, nil), bskyNet(fb, 0, nil)}, MaxTries: 2, RetryBackoff: time.Millisecond})
		texts := r.queueURL(t, "https://example.com/")
		fm.reply(fakeAnswer{status: 503}, fakeAnswer{status: 503})
		if _, err := r.tw.RunNetwork(context.Background(), tweeter.NetX); err != nil {
			t.Fatal(err)
		}
		if _, err := r.tw.RunNetwork(context.Background(), tweeter.NetBluesky); err != nil {
			t.Fatal(err)
		}
		if _, posted := fx.snapshot(); len(posted) != 1 || len(fb.posts()) != 1 {
			t.Fatalf("x posted %d, bluesky %d; want 1 each", len(posted), len(fb.posts()))
		}
		r.wantState(t, "before mastodon is done", state{Queued: texts})
		if out, _ := r.tw.RunNetwork(context.Background(), tweeter.NetMastodon); out != tweeter.GaveUp {
			t.Errorf("mastodon: %v", out)
		}
		r.wantState(t, "after", state{Done: texts})
		st := r.tw.Status()
		if len(st) != 3 || st[1].Name != tweeter.NetMastodon || !strings.Contains(st[1].LastError, "503") || st[1].Stats.GaveUp != 1 {
			t.Errorf("status = %+v", st)
		}
	})
}

// Job URLs are untrusted: no control characters, and nothing in them
// mentions an account or tags a post, on any network.
func TestInjection(t *testing.T) {
	urls := []string{
		"https://example.com/ @everyone #breaking",
		"http://10.0.0.1/@admin#tag",
		"https://example.com/a\u202e\x07\nb",
		"ftp://files.example/#free @support",
		"https://example.com/profile/@user#section",
	}
	// A word that can mention or tag: "@x" or "#x" at the start of a word,
	// or after punctuation twitter-text accepts before a mention.
	dangerous := func(text string) string {
		for _, w := range strings.Fields(text) {
			if tweeter.Linked(w) {
				continue
			}
			if strings.ContainsAny(w, "@#＠＃") {
				return w
			}
		}
		for _, r := range text {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return fmt.Sprintf("control %U", r)
			}
		}
		return ""
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		// postAll posts a text for each of urls through cfg's network.
		postAll := func(t *testing.T, cfg tweeter.Config) {
			t.Helper()
			r := newRig(t, b, cfg)
			r.queueURL(t, urls...)
			for range urls {
				r.runOnce(t)
			}
		}
		t.Run("x", func(t *testing.T) {
			fx := newFakeTwitter(t)
			postAll(t, tweeter.Config{Credentials: testCreds, Transport: fx.transport()})
			_, posted := fx.snapshot()
			if len(posted) != len(urls) {
				t.Fatalf("posted %q", posted)
			}
			for _, p := range posted {
				if d := dangerous(p); d != "" {
					t.Errorf("%q: %s", p, d)
				}
			}
			if posted[1] != "Archiving http://10.0.0.1/%40admin%23tag" {
				t.Errorf("posted %q", posted[1])
			}
		})
		t.Run("mastodon", func(t *testing.T) {
			f := newFakeMastodon(t)
			postAll(t, tweeter.Config{Networks: []tweeter.Network{mastoNet(f, 0, nil)}})
			posted := f.posted()
			if len(posted) != len(urls) {
				t.Fatalf("posted %+v", posted)
			}
			for _, p := range posted {
				if d := dangerous(p.Text); d != "" {
					t.Errorf("%q: %s", p.Text, d)
				}
			}
			if posted[0].Text != "Archiving https://example.com/%20@everyone%20#breaking" {
				t.Errorf("posted %q", posted[0].Text)
			}
		})
		t.Run("bluesky", func(t *testing.T) {
			f := newFakeBluesky(t)
			postAll(t, tweeter.Config{Networks: []tweeter.Network{bskyNet(f, 0, nil)}})
			posts := f.posts()
			if len(posts) != len(urls) {
				t.Fatalf("%d posts", len(posts))
			}
			for _, p := range posts {
				// facetsOf fails on any facet but a link: Bluesky only
				// mentions or tags what a facet marks.
				text, links := facetsOf(t, p)
				if strings.ContainsFunc(text, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
					t.Errorf("%q has control characters", text)
				}
				for _, l := range links {
					if strings.ContainsFunc(l.URI, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }) {
						t.Errorf("link %q has control or space characters", l.URI)
					}
				}
			}
		})
	})
}

// loseFirst sends the first request, then drops its answer: the post went
// through and the poster never heard.
type loseFirst struct {
	base http.RoundTripper
	done atomic.Bool
}

func (l *loseFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err == nil && l.done.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, fmt.Errorf("read tcp: i/o timeout (the answer was lost after the send)")
	}
	return resp, err
}

// X has no idempotency key: a post whose answer was lost is sent again,
// and X's v2 refuses the same text as duplicate content, which counts as
// posted. (After a crash in that instant the text is recorded as posted
// without sending: at most once.)
func TestXAnswerLostAfterSend(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		fake := newFakeTwitter(t)
		r := newRig(t, b, tweeter.Config{API: tweeter.APIv2, Credentials: testCreds, Transport: &loseFirst{base: fake.transport()}})
		r.queue(t, text1)
		fake.reply(answer{status: 201, body: `{"data":{"id":"1","text":"x"}}`},
			v2Problem(403, "Forbidden", "You are not allowed to create a Tweet with duplicate content."))
		r.mustRun(t, tweeter.Posted)
		requests, posted := fake.snapshot()
		if len(requests) != 2 || len(posted) != 1 {
			t.Errorf("requests %q, posted %q; want the text posted once in two requests", requests, posted)
		}
		r.wantState(t, "", state{Done: []string{text1}})
	})
}

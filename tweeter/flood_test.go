package tweeter_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rivo/uniseg"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// fakeClock is a clock tests move by hand, safe across goroutines.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration)     { c.ns.Add(int64(d)) }
func newClock(t time.Time) *fakeClock        { c := &fakeClock{}; c.ns.Store(t.UnixNano()); return c }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) Since(t time.Time) int64 { return c.Now().Sub(t).Milliseconds() }

// recordingPoster keeps what it posted and when (X in the flood).
type recordingPoster struct {
	clock *fakeClock
	mu    sync.Mutex
	posts []timedPost
}

type timedPost struct {
	at   time.Time
	text string
	urls []string
}

func (p *recordingPoster) Post(_ context.Context, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts = append(p.posts, timedPost{at: p.clock.Now(), text: text, urls: httpWords(text)})
	return nil
}

func httpWords(text string) []string {
	var out []string
	for _, w := range strings.Fields(text) {
		if strings.HasPrefix(w, "http://") || strings.HasPrefix(w, "https://") {
			out = append(out, w)
		}
	}
	return out
}

// A flood of 2,000 queued texts against budgets of 30 posts an hour on
// three networks: every text is in exactly one post or digest per network,
// none is lost, each post fits its network, and no hour holds more than 30
// posts. The clock is fake: the simulated hours take no time. Under the
// race detector the flood is 500 texts: the race detector looks for
// races, which do not need the full flood, and 2,000 took 45 s there (the
// plain run, on miniredis and the real server, keeps 2,000).
func TestFlood(t *testing.T) {
	items, budget := 2000, 30
	if raceDetector {
		items = 500
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		clock := newClock(time.Unix(1_700_000_000, 0))
		xp := &recordingPoster{clock: clock}
		fm := newFakeMastodon(t)
		fm.now = clock.Now
		fb := newFakeBluesky(t)
		fb.now = clock.Now
		r := newRig(t, b, tweeter.Config{
			Poster: xp, XBudget: budget, XWindow: time.Hour,
			Networks: []tweeter.Network{mastoNet(fm, budget, nil), bskyNet(fb, budget, nil)},
			Now:      clock.Now,
		})
		r.storeNow = clock.Now
		urls := make([]string, items)
		for i := range urls {
			urls[i] = fmt.Sprintf("https://site%04d.example/", i)
			if i%97 == 0 {
				urls[i] += strings.Repeat("long/path/", 15) + "ü"
			}
		}
		r.queueURL(t, urls...)
		ctx := context.Background()
		start := clock.Now()
		for step := 0; ; step++ {
			if step > 20000 {
				t.Fatal("the flood did not drain")
			}
			progress := false
			for _, n := range r.tw.Networks() {
				out, err := r.tw.RunNetwork(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				if out == tweeter.Posted || out == tweeter.GaveUp {
					progress = true
				}
			}
			if n, _ := r.c.ZCard(ctx, store.KeyTweetsQueue).Result(); n == 0 {
				break
			}
			if !progress {
				clock.Add(time.Minute)
			}
		}
		t.Logf("drained %d texts in %v of fake time", items, clock.Now().Sub(start))
		if got := r.members(t, store.KeyTweetsDone); len(got) != items {
			t.Errorf("%d texts in tweets:done, want %d", len(got), items)
		}
		if f := r.members(t, store.KeyTweetsFailed); len(f) != 0 {
			t.Errorf("failed: %q", f)
		}

		var mposts, bposts []timedPost
		for _, s := range fm.posted() {
			mposts = append(mposts, timedPost{at: s.At, text: s.Text, urls: httpWords(s.Text)})
		}
		for _, rec := range fb.posts() {
			text, links := facetsOf(t, rec)
			p := timedPost{text: text}
			for _, l := range links {
				p.urls = append(p.urls, l.URI)
			}
			bposts = append(bposts, p)
		}
		for i, rkey := range fb.order {
			bposts[i].at = fb.at[rkey]
		}
		for _, net := range []struct {
			name   string
			posts  []timedPost
			length func(string) int
			max    int
		}{
			{tweeter.NetX, xp.posts, tweeter.Length, 280},
			{tweeter.NetMastodon, mposts, tweeter.MastodonLength, 500},
			{tweeter.NetBluesky, bposts, uniseg.GraphemeClusterCount, 300},
		} {
			t.Run(net.name, func(t *testing.T) {
				seen := map[string]int{}
				for _, p := range net.posts {
					if n := net.length(p.text); n > net.max {
						t.Errorf("post of length %d > %d: %q", n, net.max, p.text)
					}
					for _, u := range p.urls {
						seen[u]++
					}
				}
				for _, u := range urls {
					if seen[u] != 1 {
						t.Errorf("%s is in %d posts, want 1", u, seen[u])
					}
					delete(seen, u)
				}
				if len(seen) != 0 {
					t.Errorf("posts link URLs never queued: %v", seen)
				}
				// No hour holds more than the budget.
				times := make([]time.Time, len(net.posts))
				for i, p := range net.posts {
					times[i] = p.at
				}
				sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
				for i := range times {
					j := sort.Search(len(times), func(j int) bool { return times[j].After(times[i].Add(-time.Hour)) })
					if n := i - j + 1; n > budget {
						t.Fatalf("%d posts in the hour up to %v, budget %d", n, times[i], budget)
					}
				}
				// Digests record the texts they carried: the same as their URLs.
				digests, err := r.store.FeedDigests(ctx, net.name)
				if err != nil {
					t.Fatal(err)
				}
				if len(digests) == 0 || len(net.posts) >= items {
					t.Errorf("%d digests in %d posts: the flood should have been digested", len(digests), len(net.posts))
				}
				byPost := map[string][]string{}
				for _, p := range net.posts {
					byPost[p.text] = p.urls
				}
				carried := 0
				for _, d := range digests {
					posted, ok := byPost[d.Post]
					if !ok {
						t.Errorf("digest %s was not posted: %q", d.Key, d.Post)
						continue
					}
					if len(posted) != len(d.Items) {
						t.Errorf("digest %q carries %d texts but links %d", d.Post, len(d.Items), len(posted))
					}
					if !strings.HasPrefix(d.Post, fmt.Sprintf("%d more sites queued for archiving: ", len(d.Items))) {
						t.Errorf("digest text %q", d.Post)
					}
					carried += len(d.Items)
				}
				t.Logf("%d posts, %d digests carrying %d texts", len(net.posts), len(digests), carried)
			})
		}
	})
}

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// `archivebot feed` shows each configured network's state.
func TestAdminFeed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := writeTemp(t, "archivebot.toml", `[tweeter.mastodon]
server = "http://127.0.0.1:1"
access_token = "t"
[tweeter.bluesky]
identifier = "a.test"
app_password = "p"
budget = 0
`)
		b.Client.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: 1, Member: "Archiving https://a.example/"}, redis.Z{Score: 2, Member: "Archiving https://b.example/"})
		nets := store.FeedNets{"mastodon", "bluesky"}
		now := time.Now()
		for i, text := range []string{"Archiving https://a.example/", "Archiving https://b.example/"} {
			key := []string{"k1", "k2"}[i]
			if why, err := s.FeedClaim(ctx, "mastodon", store.FeedAttempt{Key: key, At: now.UnixMilli(), Post: text, Items: []string{text}}, 300, 3*time.Hour); err != nil || why != "" {
				t.Fatal(why, err)
			}
		}
		if _, err := s.FeedResolve(ctx, nets, "mastodon", "k1", store.FeedFailed, "HTTP 422: Validation failed"); err != nil {
			t.Fatal(err)
		}
		var got []struct {
			Network string
			Budget  int
			Pending int64
			State   store.FeedNetStatus
		}
		adminJSON(t, b, &got, "feed", "-config", cfg)
		if len(got) != 2 || got[0].Network != "mastodon" || got[1].Network != "bluesky" {
			t.Fatalf("feed = %+v", got)
		}
		m := got[0]
		if m.Pending != 0 || m.State.InFlight != 1 || m.State.Used != 2 || m.State.GaveUp != 1 || m.Budget != 300 ||
			m.State.LastGaveUp == nil || m.State.LastGaveUp.Reason != "HTTP 422: Validation failed" {
			t.Errorf("mastodon = %+v", m)
		}
		if bs := got[1]; bs.Pending != 2 || bs.Budget != 0 {
			t.Errorf("bluesky = %+v", bs)
		}
		code, out, errs := admin(t, b, "feed", "-config", cfg)
		if code != 0 || !strings.Contains(out, "2/300 per 3h0m0s") || !strings.Contains(out, "HTTP 422") {
			t.Errorf("feed: exit %d\n%s%s", code, out, errs)
		}
	})
}

// After 6 posts on the dry run, `archivebot feed -json` says 6 were used
// and none are pending; it no longer shows "handled": 0, the
// texts still queued that this network was done with, which is 0 once the
// queue has drained and read as "nothing handled".
func TestAdminFeedJSONAfterPosts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		cfg := writeTemp(t, "archivebot.toml", "[tweeter]\nbudget = 17\n")
		nets := store.FeedNets{"dryrun"}
		now := time.Now()
		for i := range 6 {
			text := fmt.Sprintf("Archiving https://%d.example/", i)
			b.Client.ZAdd(ctx, store.KeyTweetsQueue, redis.Z{Score: float64(now.Unix()), Member: text})
			key := fmt.Sprintf("k%d", i)
			if why, err := s.FeedClaim(ctx, "dryrun", store.FeedAttempt{Key: key, At: now.UnixMilli(), Post: text, Items: []string{text}}, 17, 24*time.Hour); err != nil || why != "" {
				t.Fatal(why, err)
			}
			if _, err := s.FeedResolve(ctx, nets, "dryrun", key, store.FeedPosted, ""); err != nil {
				t.Fatal(err)
			}
		}
		var got []struct {
			Network string
			Budget  int
			Pending int64
			State   map[string]any
		}
		adminJSON(t, b, &got, "feed", "-config", cfg)
		if len(got) != 1 || got[0].Network != "dryrun" {
			t.Fatalf("feed = %+v", got)
		}
		d := got[0]
		if d.Pending != 0 || d.Budget != 17 || d.State["used"] != float64(6) {
			t.Errorf("dryrun = %+v; want 6 used of a budget of 17, none pending", d)
		}
		if h, ok := d.State["handled"]; ok {
			t.Errorf(`state has "handled": %v after 6 posts`, h)
		}
	})
}

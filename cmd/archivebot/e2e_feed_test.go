package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// The node is killed (SIGKILL) after it sent a post to Mastodon
// and before it recorded it. The restarted node sends it again with the
// same Idempotency-Key, which Mastodon answers with the status it already
// made: one status, and the text recorded in tweets:done.
func TestE2EFeedKillMastodon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the node twice")
	}
	b := redistest.Mini(t)
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	ctx := context.Background()

	// A Mastodon that keeps statuses by Idempotency-Key and, the first
	// time, never answers: the node is killed while it waits.
	var mu sync.Mutex
	statuses := map[string]string{} // key -> status text
	var keys []string
	sent := make(chan struct{}, 1)
	first := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/statuses" || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.ParseForm()
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		keys = append(keys, key)
		if _, ok := statuses[key]; !ok {
			statuses[key] = r.PostForm.Get("status")
		}
		hang := first
		first = false
		mu.Unlock()
		if hang {
			sent <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": "1", "content": statuses[key]})
	}))
	t.Cleanup(srv.Close)

	text := "Archiving https://example.com/"
	b.Client.ZAdd(ctx, "tweets:queue", redis.Z{Score: float64(time.Now().Unix()), Member: text})
	b.Client.HSet(ctx, "archivebot:feed:urls", text, "https://example.com/")

	cfg := nodeConfig{ircURL: irc.URL(), channels: []string{"#archivebot"}, redisURL: b.URL}.write(t)
	raw, _ := os.ReadFile(cfg)
	conf := strings.Replace(string(raw), "[tweeter]\ninterval = \"1h\"\n",
		fmt.Sprintf("[tweeter]\ninterval = \"1h\"\n\n[tweeter.mastodon]\nserver = %q\naccess_token = \"tok\"\n", srv.URL), 1)
	cfg = writeTemp(t, "feed.toml", conf)

	c1 := startChild(t, cfg)
	select {
	case <-sent:
	case <-time.After(irctest.WaitFor):
		t.Fatalf("the node did not post:\n%s", c1.log.tail(50))
	}
	c1.kill()
	attempts, _ := b.Client.HLen(ctx, "archivebot:feed:mastodon:attempts").Result()
	if attempts != 1 {
		t.Fatalf("after the kill, %d attempts recorded; want the one sent", attempts)
	}

	c2 := startChild(t, cfg)
	testproc.Eventually(t, "the restarted node records the post", func() bool {
		n, _ := b.Client.ZCard(ctx, "tweets:done").Result()
		return n == 1
	})
	c2.kill()
	mu.Lock()
	defer mu.Unlock()
	if len(statuses) != 1 || len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("statuses %v from requests with keys %v; want one status, sent twice with one key", statuses, keys)
	}
	if q, _ := b.Client.ZCard(ctx, "tweets:queue").Result(); q != 0 {
		t.Errorf("%d texts still queued", q)
	}
}

package redistest

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRealRedisDatabasePerTest: backends held at once on the real server
// (as by tests that run in parallel) are different databases, see none of
// each other's keys, and each is flushed when its test ends. The old
// RealRedis gave the whole test process one database, flushed by every
// test that started: the second backend emptied the first one's.
func TestRealRedisDatabasePerTest(t *testing.T) {
	if RealRedis(t) == nil {
		t.Skipf("%s not set: no real redis-server", EnvURL)
	}
	ctx := context.Background()
	const n = 3
	urls := map[string]string{}
	t.Run("held", func(t *testing.T) {
		var bs []*Backend
		for i := range n {
			b := RealRedis(t)
			key := fmt.Sprintf("pooltest:%d", i)
			if err := b.Client.Set(ctx, key, i, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, dup := urls[b.URL]; dup {
				t.Errorf("two backends held at once are both %s", b.URL)
			}
			urls[b.URL] = key
			bs = append(bs, b)
		}
		for i, b := range bs {
			keys, err := b.Client.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("pooltest:%d", i); len(keys) != 1 || keys[0] != want {
				t.Errorf("backend %d (%s) holds keys %v; want only %s", i, b.URL, keys, want)
			}
		}
	})
	for url, key := range urls {
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opt)
		defer c.Close()
		if got, err := c.Exists(ctx, key).Result(); err != nil || got != 0 {
			t.Errorf("%s after its test ended: %s exists (%d, %v); want it flushed on release", url, key, got, err)
		}
	}
}

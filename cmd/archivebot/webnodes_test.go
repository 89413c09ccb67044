package main

import (
	"context"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// An HA node records its dashboard address under archivebot:web:nodes at
// start and removes it when it shuts down cleanly (SIGTERM), so a node
// taken out of service leaves no address behind.
func TestNodeURLRemovedOnCleanShutdown(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		s := store.New(b.Client)
		// Another node's entry stays.
		if err := s.SetNodeURL(ctx, "node-other", "https://other.example/"); err != nil {
			t.Fatal(err)
		}
		cfg := writeTemp(t, "ha.toml", `[irc]
server = "irc://127.0.0.1:1"
channels = ["#a"]

[redis]
url = "`+b.URL+`"

[ha]
enabled = true
node_id = "node-gone"

[http]
listen = "127.0.0.1:0"
stream_listen = "127.0.0.1:0"
public_url = "https://gone.example/"
`)
		c := startChild(t, cfg)
		deadline := time.Now().Add(testproc.WaitFor)
		for {
			u, err := s.NodeURL(ctx, "node-gone")
			if err != nil {
				t.Fatal(err)
			}
			if u == "https://gone.example/" {
				break
			}
			if time.Now().After(deadline) || !c.running() {
				t.Fatalf("the node did not record its address (got %q)", u)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if code, _ := c.term(); code != 0 {
			t.Fatalf("SIGTERM: exit %d", code)
		}
		if u, err := s.NodeURL(ctx, "node-gone"); err != nil || u != "" {
			t.Fatalf("after a clean shutdown archivebot:web:nodes still names node-gone: %q, %v", u, err)
		}
		if u, _ := s.NodeURL(ctx, "node-other"); u != "https://other.example/" {
			t.Fatalf("another node's entry: %q", u)
		}
	})
}

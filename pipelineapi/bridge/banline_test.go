package bridge_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/store"
)

// TestBanLineThroughBridge: upstream's pipeline behind the bridge writes
// its log with its log script; the node sees the entries as API updates
// and, when the first N responses are errors, queues the ban line once.
func TestBanLineThroughBridge(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.New(b.Client)
		hs := apitest.Serve(t, pipelineapi.Options{Store: st, Sink: &sink{}, BanCheck: 3})
		c := apitest.Client(t, st, hs.URL, "pipe-a")
		br := bridge.New(bridge.Config{Node: c})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go br.Serve(ln)
		t.Cleanup(func() { br.Close() })
		rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		n := &schedNode{t: t, b: b, st: st, url: hs.URL, ctx: ctx}
		n.queue("job1", "erin", "https://shop.squarespace.com/")
		if id, err := rc.RPopLPush(ctx, "pending", "working").Result(); err != nil || id != "job1" {
			t.Fatalf("take through the bridge: %q %v", id, err)
		}
		entry := `{"type":"download","url":"https://shop.squarespace.com/x","response_code":403,"is_error":true}`
		for range 5 {
			if err := rc.EvalSha(ctx, bridge.SHALog, []string{"job1"}, entry, "updates", "job1_log").Err(); err != nil && err != redis.Nil {
				t.Fatalf("log through the bridge: %v", err)
			}
		}
		want := store.AdminNotice{Channel: "#ab",
			Text: "Job job1 on pipe-a: the first 3 responses were errors (3× 403); pipe-a may be banned from squarespace.com"}
		notices := func() []store.AdminNotice {
			var out []store.AdminNotice
			for _, s := range b.Client.LRange(ctx, store.KeyAdminNotices, 0, -1).Val() {
				var a store.AdminNotice
				if err := json.Unmarshal([]byte(s), &a); err != nil {
					t.Fatal(err)
				}
				out = append(out, a)
			}
			return out
		}
		testproc.Eventually(t, "the ban line", func() bool { return len(notices()) > 0 })
		for range 3 {
			if err := rc.EvalSha(ctx, bridge.SHALog, []string{"job1"}, entry, "updates", "job1_log").Err(); err != nil && err != redis.Nil {
				t.Fatalf("log through the bridge: %v", err)
			}
		}
		if got := notices(); len(got) != 1 || got[0] != want {
			t.Fatalf("notices %+v, want one %+v", got, want)
		}
	})
}

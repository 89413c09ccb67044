package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// dropSubscriber cuts the listener's connection: miniredis is restarted
// on the same address; on a real server the connection named name is
// killed (and only it: other test processes share the server).
func dropSubscriber(t *testing.T, b *redistest.Backend, name string) {
	t.Helper()
	ctx := context.Background()
	if b.Mini != nil {
		b.Mini.Close()
		if err := b.Mini.Restart(); err != nil {
			t.Fatal(err)
		}
		return
	}
	list, err := b.Client.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := b.Client.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
					t.Fatal(err)
				}
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no connection named %s in CLIENT LIST", name)
	}
}

// TestUpdatesReconnect: the listener delivers idents to every callback
// (a panicking one does not stop the others), and after its connection
// drops it subscribes again and goes on delivering.
func TestUpdatesReconnect(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		name := fmt.Sprintf("updates-test-%d", time.Now().UnixNano())
		opt, err := redis.ParseURL(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		opt.ClientName = name
		c := redis.NewClient(opt)
		defer c.Close()

		u := NewUpdates(store.New(c), svcLog(t))
		u.MinBackoff = 5 * time.Millisecond
		prefix := name + ":"
		got := make(chan string, 100)
		u.OnUpdate(func(_ context.Context, id string) {
			if strings.HasPrefix(id, prefix) && strings.HasSuffix(id, "panic") {
				panic("callback bug")
			}
		})
		u.OnUpdate(func(_ context.Context, id string) {
			if strings.HasPrefix(id, prefix) { // other test processes publish too
				got <- strings.TrimPrefix(id, prefix)
			}
		})
		subscribed := make(chan struct{}, 10)
		u.OnSubscribe(func(context.Context) { subscribed <- struct{}{} })
		var wg sync.WaitGroup
		wg.Go(func() { u.Run(ctx) })
		defer wg.Wait()
		defer cancel()

		expect := func(want string) {
			t.Helper()
			select {
			case id := <-got:
				if id != want {
					t.Fatalf("got ident %q, want %q", id, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no update %q", want)
			}
		}
		wait := func() {
			t.Helper()
			select {
			case <-subscribed:
			case <-time.After(10 * time.Second):
				t.Fatal("not subscribed")
			}
		}
		pub := func(id string) {
			t.Helper()
			if err := b.Client.Publish(context.Background(), store.ChannelUpdates, prefix+id).Err(); err != nil {
				t.Fatal(err)
			}
		}
		wait()
		pub("one")
		pub("two-panic")
		pub("three")
		expect("one")
		expect("two-panic")
		expect("three")

		dropSubscriber(t, b, name)
		wait()
		pub("after")
		expect("after")
	})
}

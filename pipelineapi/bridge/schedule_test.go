package bridge_test

// The take rule (doc/pipeline-api.md, The take rule) through the API and
// through the bridge: each test runs once with pipelines that call the
// API themselves and once with pipelines that speak upstream's Redis
// commands to a bridge, against the same node.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/bridge"
	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// schedNode is a node (store and API server) on one backend.
type schedNode struct {
	t   *testing.T
	b   *redistest.Backend
	st  *store.Store
	url string
	ctx context.Context
}

// taker takes one job the way a pipeline of one kind does; "" for none.
type taker func() string

// way makes a pipeline of key name.
type way struct {
	name string
	make func(n *schedNode, key string) (taker, *client.Client)
}

var ways = []way{
	{"api", func(n *schedNode, key string) (taker, *client.Client) {
		c := apitest.Client(n.t, n.st, n.url, key)
		return func() string {
			j, err := c.Take(n.ctx, wire.TakeRequest{})
			if err != nil {
				n.t.Errorf("take by %s: %v", key, err)
				return ""
			}
			if j == nil {
				return ""
			}
			return j.Ident
		}, c
	}},
	{"bridge", func(n *schedNode, key string) (taker, *client.Client) {
		c := apitest.Client(n.t, n.st, n.url, key)
		br := bridge.New(bridge.Config{Node: c})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			n.t.Fatal(err)
		}
		go br.Serve(ln)
		n.t.Cleanup(func() { br.Close() })
		rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
		n.t.Cleanup(func() { rc.Close() })
		// upstream's reserve_job: SCAN pending:*, then each queue in turn.
		return func() string {
			iter := rc.Scan(n.ctx, 0, "pending:*", 0).Iterator()
			for iter.Next(n.ctx) {
			}
			for _, q := range []string{"pending", "pending-ao"} {
				id, err := rc.RPopLPush(n.ctx, q, "working").Result()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					n.t.Errorf("RPOPLPUSH through the bridge of %s: %v", key, err)
					return ""
				}
				return id
			}
			return ""
		}, c
	}},
}

// eachWay runs fn for each kind of pipeline on each backend.
func eachWay(t *testing.T, fn func(t *testing.T, n *schedNode, w way)) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				st := store.New(b.Client)
				hs := apitest.Serve(t, pipelineapi.Options{Store: st, Sink: &sink{}})
				fn(t, &schedNode{t: t, b: b, st: st, url: hs.URL, ctx: context.Background()}, w)
			})
		})
	}
}

func (n *schedNode) queue(ident, nick, url string) {
	n.t.Helper()
	err := n.st.Register(n.ctx, store.NewJob{Ident: ident, URL: url, FetchDepth: "inf", Slug: "x",
		StartedBy: nick, NickKey: strings.ToLower(nick), StartedIn: "#ab", DelayMin: 250, DelayMax: 375,
		Concurrency: 3, Queue: store.KeyPending})
	if err != nil {
		n.t.Fatalf("register %s: %v", ident, err)
	}
}

func TestScheduleUserLimitDoesNotBlockOthers(t *testing.T) {
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		n.st.SetTakeRules(store.TakeRules{PerUserRunning: 3})
		take, _ := w.make(n, "pipe-a")
		for i := range 5 {
			n.queue(fmt.Sprintf("erin%d", i), "erin", fmt.Sprintf("http://e%d.example.com/", i))
		}
		n.queue("bob0", "bob", "http://b.example.com/")
		var got []string
		for range 5 {
			if id := take(); id != "" {
				got = append(got, id)
			}
		}
		if want := []string{"erin0", "erin1", "erin2", "bob0"}; !slices.Equal(got, want) {
			t.Fatalf("took %v, want %v (erin has 3 running, limit 3; bob's job is next)", got, want)
		}
		left, _ := n.b.Client.LRange(n.ctx, store.KeyPending, 0, -1).Result()
		if !slices.Equal(left, []string{"erin4", "erin3"}) {
			t.Fatalf("pending = %v: skipped jobs lost their place", left)
		}
	})
}

func TestSchedulePausedQueueGivesNothing(t *testing.T) {
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		take, _ := w.make(n, "pipe-a")
		for i := range 3 {
			n.queue(fmt.Sprintf("j%d", i), "erin", fmt.Sprintf("http://j%d.example.com/", i))
		}
		if err := n.st.PauseQueue(n.ctx, store.PauseAll, "JAA", "deploy"); err != nil {
			t.Fatal(err)
		}
		if id := take(); id != "" {
			t.Fatalf("%s pipeline took %q from a paused queue", w.name, id)
		}
		// A direct-Redis pipeline (upstream's RPOPLPUSH) gets nothing either.
		if id, err := n.b.Client.RPopLPush(n.ctx, store.KeyPending, store.KeyWorking).Result(); err != redis.Nil {
			t.Fatalf("direct RPOPLPUSH from a paused queue: %q %v", id, err)
		}
		n.queue("j3", "bob", "http://j3.example.com/")
		if err := n.st.ResumeQueue(n.ctx, store.PauseAll); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 4 {
			got = append(got, take())
		}
		if want := []string{"j0", "j1", "j2", "j3"}; !slices.Equal(got, want) {
			t.Fatalf("after resume took %v, want %v", got, want)
		}
	})
}

func TestScheduleAvoidedSiteGoesElsewhere(t *testing.T) {
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		takeA, ca := w.make(n, "pipe-a")
		takeB, _ := w.make(n, "pipe-b")
		// pipe-a's own report says what it must not crawl.
		if _, err := ca.Report(n.ctx, map[string]string{"avoid": "*.squarespace.com"}); err != nil {
			t.Fatal(err)
		}
		n.queue("sq", "erin", "https://shop.squarespace.com/")
		n.queue("ok", "erin", "https://example.org/")
		if id := takeA(); id != "ok" {
			t.Fatalf("pipe-a took %q, want ok", id)
		}
		if id := takeA(); id != "" {
			t.Fatalf("pipe-a took %q, want nothing", id)
		}
		if id := takeB(); id != "sq" {
			t.Fatalf("pipe-b took %q, want sq", id)
		}
		// Reports may not name a non-domain, nor set targeted_only.
		_, err := ca.Report(n.ctx, map[string]string{"avoid": "*.com"})
		if !client.IsCode(err, "bad_request") {
			t.Fatalf("avoid=*.com: %v, want bad_request", err)
		}
		_, err = ca.Report(n.ctx, map[string]string{"targeted_only": "1"})
		if !client.IsCode(err, "forbidden_field") {
			t.Fatalf("targeted_only in a report: %v, want forbidden_field", err)
		}
	})
}

func TestScheduleTargetedOnly(t *testing.T) {
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		take, _ := w.make(n, "pipe-a")
		if err := n.st.SetPipelineKeyTargetedOnly(n.ctx, "pipe-a", true); err != nil {
			t.Fatal(err)
		}
		n.queue("plain", "erin", "http://plain.example.com/")
		err := n.st.Register(n.ctx, store.NewJob{Ident: "mine", URL: "http://mine.example.com/", FetchDepth: "inf",
			Slug: "x", StartedBy: "erin", NickKey: "erin", StartedIn: "#ab", Queue: store.KeyPendingNamed("pipe-a")})
		if err != nil {
			t.Fatal(err)
		}
		if id := take(); id != "mine" {
			t.Fatalf("took %q, want mine (pending:pipe-a)", id)
		}
		if id := take(); id != "" {
			t.Fatalf("a targeted-only pipeline took %q from pending", id)
		}
	})
}

// Two pipelines racing for the last job a user's limit allows: exactly
// one gets it, every round.
func TestScheduleRaceForLastAllowedJob(t *testing.T) {
	rounds := 30
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		n.st.SetTakeRules(store.TakeRules{PerUserRunning: 1})
		takeA, _ := w.make(n, "pipe-a")
		takeB, _ := w.make(n, "pipe-b")
		for r := range rounds {
			n.b.Client.Del(n.ctx, store.KeyWorking, store.KeyPending)
			n.queue(fmt.Sprintf("r%d-a", r), "erin", fmt.Sprintf("http://r%da.example.com/", r))
			n.queue(fmt.Sprintf("r%d-b", r), "erin", fmt.Sprintf("http://r%db.example.com/", r))
			got := make([]string, 2)
			var wg sync.WaitGroup
			for i, tk := range []taker{takeA, takeB} {
				wg.Add(1)
				go func() { defer wg.Done(); got[i] = tk() }()
			}
			wg.Wait()
			if n := len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s == "" })); n != 1 {
				t.Fatalf("round %d: %v took, want exactly one", r, got)
			}
		}
	})
}

// A rerouted job goes back to the head of its queue: the pipeline it was
// taken from (now avoiding the site) skips it, and another takes it next,
// whether the pipelines call the API or speak upstream's Redis to a bridge.
func TestScheduleRerouteGoesToAnotherPipeline(t *testing.T) {
	eachWay(t, func(t *testing.T, n *schedNode, w way) {
		takeA, _ := w.make(n, "pipe-a")
		takeB, _ := w.make(n, "pipe-b")
		n.queue("jb", "erin", "https://www.example.com/")
		n.queue("other", "erin", "https://example.org/")
		n.queue("third", "erin", "https://example.net/")
		if id := takeA(); id != "jb" {
			t.Fatalf("pipe-a took %q, want jb", id)
		}
		r, err := n.st.Reroute(n.ctx, "jb", "", "op")
		if err != nil || r.From != "pipe-a" || r.Rule != "example.com" {
			t.Fatalf("reroute: %+v %v", r, err)
		}
		if id := takeA(); id != "other" {
			t.Fatalf("pipe-a took %q, want other (it avoids example.com now)", id)
		}
		if id := takeB(); id != "jb" {
			t.Fatalf("pipe-b took %q, want jb (at the head of pending)", id)
		}
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// viewer is a client of a node's live stream: our protocol's
// (/stream?v=2) or upstream's (/stream), recording what it gets of one
// job: the scores of its entries (v2), how many entries (upstream's), its
// events (v2) and the dropped frames (v2).
type viewer struct {
	mu      sync.Mutex
	scores  []float64
	n       int
	events  []string
	dropped int
	closed  error
	hello   chan struct{}
}

// watch connects to addr's stream (v2 or upstream's) and records ident's
// entries and events until the test ends; it returns once the node took
// the client (the hello frame; upstream's protocol has none, so its
// handshake).
func watch(t *testing.T, addr, ident string, v2 bool) *viewer {
	t.Helper()
	u := "ws://" + addr + "/stream"
	if v2 {
		u += "?v=2"
	}
	c, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	v := &viewer{hello: make(chan struct{})}
	if !v2 {
		close(v.hello)
	}
	go func() {
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				v.mu.Lock()
				v.closed = err
				v.mu.Unlock()
				return
			}
			var f struct {
				Hello   json.RawMessage `json:"hello"`
				Dropped int             `json:"dropped"`
				Entries []struct {
					Ident string  `json:"ident"`
					Score float64 `json:"score"`
				} `json:"entries"`
				Events []struct {
					Ident string `json:"ident"`
					Event string `json:"event"`
				} `json:"events"`
				JobData struct {
					Ident string `json:"ident"`
				} `json:"job_data"`
			}
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			v.mu.Lock()
			if f.Hello != nil {
				close(v.hello)
			}
			v.dropped += f.Dropped
			for _, e := range f.Entries {
				if e.Ident == ident {
					v.scores = append(v.scores, e.Score)
				}
			}
			for _, e := range f.Events {
				if e.Ident == ident {
					v.events = append(v.events, e.Event)
				}
			}
			if !v2 && f.JobData.Ident == ident {
				v.n++
			}
			v.mu.Unlock()
		}
	}()
	select {
	case <-v.hello:
	case <-time.After(irctest.WaitFor):
		t.Fatalf("%s: no hello frame", u)
	}
	return v
}

func (v *viewer) get() (scores []float64, n int, events []string, dropped int, closed error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.scores), v.n, slices.Clone(v.events), v.dropped, v.closed
}

// waitAll waits until v got n entries of its job and its finished event.
func (v *viewer) waitAll(t *testing.T, name string, n int, v2 bool) {
	t.Helper()
	testproc.Eventually(t, fmt.Sprintf("%s to carry the job's %d entries and its end", name, n), func() bool {
		s, k, ev, _, _ := v.get()
		if !v2 {
			return k >= n
		}
		return len(s) >= n && slices.Contains(ev, "finished")
	})
}

// contiguous says what is wrong with scores, which should be 1..n, each
// once, in order ("" when nothing).
func contiguous(scores []float64, n int) string {
	if len(scores) != n {
		return fmt.Sprintf("%d entries, want %d: %v", len(scores), n, scores)
	}
	for i, s := range scores {
		if s != float64(i+1) {
			return fmt.Sprintf("entry %d has score %v (scores %v)", i+1, s, scores)
		}
	}
	return ""
}

// getBody is GET url's status and body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHAFollowerStreamsDirectJobs: a follower (a node that does not hold
// the lease) serves the same stream as the leader. Before the relay, only
// the leader ran the firehose (it moves the broadcast bookmarks, a
// write), so a follower's viewers got no line of a job whose pipeline
// logs straight to Redis, and no job event. Two nodes, one Redis (each
// backend): while such a job logs through pipelinesim, the follower's
// /stream?v=2 carries every entry once, in order, the same as the
// leader's, and the job's started and finished events; its upstream
// /stream carries every entry; its /jobs lists the job; its /readyz
// answers 200 and says it is not the leader.
func TestHAFollowerStreamsDirectJobs(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#hafollow"
		op, _, _ := rolesIn(t, irc, ch)
		webA, webB := freeAddr(t), freeAddr(t)
		a := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, "node-a", webA, freeAddr(t)))
		a.log.waitFor(t, 0, "took the leader lease")
		op.WaitBotIn(botNick, ch)
		nb := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, "node-b", webB, freeAddr(t)))
		nb.log.waitFor(t, 0, "standby: another node leads")

		// Ready once its stream reads the relay (a load balancer sends
		// it viewers then), and it says it does not lead.
		var code int
		var body string
		testproc.Eventually(t, "the follower's /readyz to answer 200", func() bool {
			code, body = getBody(t, "http://"+webB+"/readyz")
			return code == http.StatusOK
		})
		var ready struct {
			Ready  bool   `json:"ready"`
			Role   string `json:"role"`
			Note   string `json:"note"`
			Stream *struct {
				OK bool `json:"ok"`
			} `json:"stream"`
		}
		_ = json.Unmarshal([]byte(body), &ready)
		if !ready.Ready || ready.Role != "standby" || !strings.Contains(ready.Note, "not the leader") || ready.Stream == nil || !ready.Stream.OK {
			t.Errorf("the follower's /readyz: %d %s; want ready, role standby, a note that it is not the leader, its stream ok", code, body)
		}

		url, id := identOf(t, "http://hafollow.example/")
		if r := ask(op, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		leader, follower := watch(t, webA, id, true), watch(t, webB, id, true)
		upstream := watch(t, webB, id, false)
		const n = 40 // download entries; the job logs at least these
		sim := runSim(t, b.Client, pipelinesim.Config{Nickname: "followpipe"}, fastRun(n, 20*time.Millisecond, 0))
		sim.waitEvent(t, pipelinesim.EventTake, id)
		testproc.Eventually(t, "the follower's /jobs to list the job", func() bool {
			_, body := getBody(t, "http://"+webB+"/jobs")
			return strings.Contains(body, id)
		})
		sim.waitEvent(t, pipelinesim.EventDone, id)
		logged := logScore(t, b, id)

		leader.waitAll(t, "the leader's stream", logged, true)
		follower.waitAll(t, "the follower's stream", logged, true)
		upstream.waitAll(t, "the follower's upstream stream", logged, false)
		ls, _, lev, _, _ := leader.get()
		fs, _, fev, fdrop, _ := follower.get()
		_, un, _, _, _ := upstream.get()
		if p := contiguous(fs, logged); p != "" {
			t.Errorf("the follower's stream: %s", p)
		}
		if !slices.Equal(fs, ls) {
			t.Errorf("the follower's entries %v differ from the leader's %v", fs, ls)
		}
		for _, e := range []string{"started", "finished"} {
			if !slices.Contains(fev, e) || !slices.Contains(lev, e) {
				t.Errorf("event %s: the follower got %v, the leader %v", e, fev, lev)
			}
		}
		if un != logged || fdrop != 0 {
			t.Errorf("the follower's upstream stream carried %d entries (want %d); its v2 stream said %d dropped", un, logged, fdrop)
		}
		t.Logf("leader and follower: %d entries each, events %v / %v; upstream: %d", len(ls), lev, fev, un)
	})
}

// logScore is how many entries job id logged (its log_score).
func logScore(t *testing.T, b *redistest.Backend, id string) int {
	t.Helper()
	n, err := b.Client.HGet(context.Background(), id, "log_score").Int()
	if err != nil || n <= 0 {
		t.Fatalf("log_score of %s: %d %v", id, n, err)
	}
	return n
}

// TestHAFollowerStreamThroughLeaderChange: a viewer of a follower sees
// nothing stop when the leader changes. Three nodes, one Redis (each
// backend); viewers on both followers while a direct-Redis job logs; the
// leader is killed (SIGKILL: no release, the lease runs out); one
// follower becomes the leader and the other stays a follower. Both
// viewers, still connected, get every entry the job logged once, in
// order (none lost or repeated across the change: the old leader moved
// the bookmarks with its last append, the new one resumes from them),
// its finished event, and no dropped frame.
func TestHAFollowerStreamThroughLeaderChange(t *testing.T) {
	t.Parallel()
	redistest.EachParallel(t, func(t *testing.T, b *redistest.Backend) {
		irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
		const ch = "#hachange"
		op, _, _ := rolesIn(t, irc, ch)
		webs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
		a := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, "node-a", webs[0], freeAddr(t)))
		a.log.waitFor(t, 0, "took the leader lease")
		op.WaitBotIn(botNick, ch)
		var followers []*child
		for i, node := range []string{"node-b", "node-c"} {
			c := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, node, webs[i+1], freeAddr(t)))
			c.log.waitFor(t, 0, "standby: another node leads")
			testproc.Eventually(t, node+"'s /readyz to answer 200", func() bool {
				code, _ := getBody(t, "http://"+webs[i+1]+"/readyz")
				return code == http.StatusOK
			})
			followers = append(followers, c)
		}

		url, id := identOf(t, "http://hachange.example/")
		if r := ask(op, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
			t.Fatalf("!a: %q", r)
		}
		vb, vc := watch(t, webs[1], id, true), watch(t, webs[2], id, true)
		ub := watch(t, webs[1], id, false)
		// About 5 s of logging: the lease (3 s) runs out in the middle.
		sim := runSim(t, b.Client, pipelinesim.Config{Nickname: "changepipe"}, fastRun(200, 25*time.Millisecond, 0))
		sim.waitEvent(t, pipelinesim.EventTake, id)
		testproc.Eventually(t, "the followers' viewers to get 20 entries", func() bool {
			s1, _, _, _, _ := vb.get()
			s2, _, _, _, _ := vc.get()
			return len(s1) >= 20 && len(s2) >= 20
		})
		a.kill()
		before, _, _, _, _ := vb.get()
		if b.Mini != nil {
			// miniredis expires keys on its own clock: run the lease out.
			b.Mini.FastForward(4 * time.Second)
		}
		var newLeader string
		testproc.Eventually(t, "a follower to take the lease", func() bool {
			for i, c := range followers {
				if role, _ := readyRole(t, c); role == "leader" {
					newLeader = []string{"node-b", "node-c"}[i]
					return true
				}
			}
			return false
		})
		sim.waitEvent(t, pipelinesim.EventDone, id)
		logged := logScore(t, b, id)
		vb.waitAll(t, "node-b's viewer", logged, true)
		vc.waitAll(t, "node-c's viewer", logged, true)
		ub.waitAll(t, "node-b's upstream viewer", logged, false)
		for _, v := range []struct {
			name string
			v    *viewer
		}{{"node-b", vb}, {"node-c", vc}} {
			s, _, ev, dropped, closed := v.v.get()
			if p := contiguous(s, logged); p != "" {
				t.Errorf("%s's viewer: %s", v.name, p)
			}
			if !slices.Contains(ev, "finished") || dropped != 0 || closed != nil {
				t.Errorf("%s's viewer: events %v, %d dropped, closed: %v", v.name, ev, dropped, closed)
			}
		}
		if _, n, _, _, _ := ub.get(); n != logged {
			t.Errorf("node-b's upstream viewer: %d entries, want %d", n, logged)
		}
		t.Logf("%s took over; the viewers had %d of %d entries when the leader was killed, then all", newLeader, len(before), logged)
	})
}

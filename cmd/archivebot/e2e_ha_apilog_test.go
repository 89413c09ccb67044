package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// haAPINodeConfig is a node of TestHAStandbyStreamsAPILog: ha.enabled on
// a plain Redis URL, the web server and the pipeline API on addresses of
// the test's.
func haAPINodeConfig(t testing.TB, ircURL, channel, redisURL, node, web, api string) string {
	t.Helper()
	return writeTemp(t, "archivebot.toml", fmt.Sprintf(`[irc]
server = %q
nick = %q
channels = [%q]
messages_per_second = 20
burst = 5
commands_per_minute = 1000

[redis]
url = %q

[ha]
enabled = true
lease_ttl = "3s"
node_id = %q

[tweeter]
interval = "1h"

[http]
listen = %q
stream_listen = ""

[pipelines]
listen = %q
`, ircURL, botNick, channel, redisURL, node, web, api))
}

// v2Scores follows /stream?v=2 at addr and records the score of every
// log entry of ident it gets.
type v2Scores struct {
	mu     sync.Mutex
	scores []float64
}

func followV2(t *testing.T, addr, ident string) *v2Scores {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/stream?v=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &v2Scores{}
	go func() {
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			var f struct {
				Entries []struct {
					Ident string  `json:"ident"`
					Score float64 `json:"score"`
				} `json:"entries"`
			}
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			s.mu.Lock()
			for _, e := range f.Entries {
				if e.Ident == ident {
					s.scores = append(s.scores, e.Score)
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *v2Scores) get() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]float64(nil), s.scores...)
}

// TestHAStandbyStreamsAPILog: "the live header
// said 0 lines/s while an API job was logging". Under ha.enabled an API
// pipeline's log entries reach the leader only (the standby answers the
// API with 503), and they are not in Redis lists: a standby's dashboard,
// fed from Redis, showed none of them. Two nodes, one Redis: while the
// job logs through the leader's API, both nodes' /stream?v=2 carry every
// entry once, in order, and both dashboards count lines per second.
func TestHAStandbyStreamsAPILog(t *testing.T) {
	t.Parallel()
	b := redistest.RealOrMini(t)
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	const ch = "#haapilog"
	op, _, _ := rolesIn(t, irc, ch)
	webA, webB, apiA := freeAddr(t), freeAddr(t), freeAddr(t)
	a := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, "node-a", webA, apiA))
	a.log.waitFor(t, 0, "took the leader lease")
	op.WaitBotIn(botNick, ch)
	nb := startChild(t, haAPINodeConfig(t, irc.URL(), ch, b.URL, "node-b", webB, freeAddr(t)))
	nb.log.waitFor(t, 0, "standby: another node leads")

	bg := context.Background()
	st := store.New(b.Client)
	c := apitest.Client(t, st, "http://"+apiA, "hapipe")
	raw := "http://haapilog.example/"
	url, id := identOf(t, raw)
	if r := ask(op, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
		t.Fatalf("!a: %q", r)
	}
	j, err := c.Take(bg, wire.TakeRequest{})
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %+v %v (want %s)", j, err, id)
	}
	leader, standby := followV2(t, webA, id), followV2(t, webB, id)
	time.Sleep(300 * time.Millisecond) // both clients said hello

	// The job logs "line N" ten times a second until stopped.
	var mu sync.Mutex
	sent := 0
	lctx, stopLog := context.WithCancel(bg)
	logging := make(chan struct{})
	go func() {
		defer close(logging)
		for i := 1; lctx.Err() == nil; i++ {
			e, _ := json.Marshal(map[string]any{"type": "stdout", "message": fmt.Sprintf("line %d\n", i), "ts": time.Now().Unix()})
			if _, err := c.Update(lctx, id, wire.UpdateRequest{Heartbeat: 1, Log: []json.RawMessage{e}}); err != nil {
				if lctx.Err() == nil {
					t.Errorf("update: %v", err)
				}
				return
			}
			mu.Lock()
			sent = i
			mu.Unlock()
			select {
			case <-lctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopLog(); <-logging })

	// Both dashboards show the lines and count them.
	ctx := browser(t)
	dir := t.TempDir()
	sel := fmt.Sprintf("#job-%s .log .line-stdout", id)
	for _, n := range []struct{ name, addr string }{{"standby", webB}, {"leader", webA}} {
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+n.addr+"/")); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, n.name+"'s stream", `document.getElementById("status").textContent.startsWith("live")`)
		waitJS(t, ctx, n.name+": the API job's lines", fmt.Sprintf(`document.querySelectorAll(%q).length >= 5`, sel))
		// Ten lines a second: the header says so (give or take the
		// second's edges).
		waitJS(t, ctx, n.name+": about 10 lines/s in the header", `/^live · (8|9|10|11|12) lines\/s/.test(document.getElementById("status").textContent)`)
		screenshot(t, ctx, dir, "ha-apilog-"+n.name)
	}

	stopLog()
	<-logging
	mu.Lock()
	total := sent
	mu.Unlock()
	for _, f := range []struct {
		name string
		s    *v2Scores
	}{{"leader", leader}, {"standby", standby}} {
		testproc.Eventually(t, f.name+"'s stream to carry entry "+fmt.Sprint(total), func() bool {
			s := f.s.get()
			return len(s) > 0 && s[len(s)-1] >= float64(total)
		})
		s := f.s.get()
		if len(s) != total || s[0] != 1 {
			t.Errorf("%s: %d entries streamed, scores from %v; %d sent, from 1", f.name, len(s), s[0], total)
		}
		for i := 1; i < len(s); i++ {
			if s[i] != s[i-1]+1 {
				t.Errorf("%s: scores %v…: %v then %v", f.name, s[0], s[i-1], s[i])
				break
			}
		}
		t.Logf("%s: %d entries streamed (scores %v to %v), %d sent", f.name, len(s), s[0], s[len(s)-1], total)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
)

// benchNodeConfig is a node of BenchmarkViewersOverThreeNodes: ha.enabled
// on a real redis-server, the web server on web, enough connections from
// one address for the benchmark's viewers.
func benchNodeConfig(t testing.TB, ircURL, redisURL, node, web string) string {
	t.Helper()
	return writeTemp(t, "archivebot.toml", fmt.Sprintf(`[irc]
server = %q
nick = %q
channels = ["#bench"]

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
max_conns = 2000
max_conns_per_addr = 2000
`, ircURL, botNick, redisURL, node, web))
}

// benchViewer is one /stream?v=2 client: how many log entries it got (the
// frames' "n"), their latency (now minus the entry's own ts), and the
// entries the node said it dropped.
type benchViewer struct {
	mu      sync.Mutex
	n       int
	dropped int
	lat     []float64
}

var (
	nKey       = []byte(`"n":`)
	droppedKey = []byte(`"dropped":`)
)

// intAfter is the integer after key in msg (-1 when absent).
func intAfter(msg, key []byte) int {
	k := bytes.Index(msg, key)
	if k < 0 {
		return -1
	}
	rest := msg[k+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return -1
	}
	v, err := strconv.Atoi(string(rest[:end]))
	if err != nil {
		return -1
	}
	return v
}

func dialBenchViewer(tb testing.TB, url string) *benchViewer {
	d := websocket.Dialer{EnableCompression: true}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	v := &benchViewer{}
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			now := float64(time.Now().UnixNano()) / 1e9
			n := intAfter(msg, nKey)
			v.mu.Lock()
			if d := intAfter(msg, droppedKey); d > 0 {
				v.dropped += d
			}
			if n > 0 {
				v.n += n
				// Each entry carries its own numeric "ts"; job hashes'
				// ts is a string and is skipped.
				for rest := msg; ; {
					k := bytes.Index(rest, tsKey)
					if k < 0 {
						break
					}
					rest = rest[k+len(tsKey):]
					if len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
						continue
					}
					end := bytes.IndexAny(rest, ",}")
					if end < 0 {
						break
					}
					if ts, err := strconv.ParseFloat(string(rest[:end]), 64); err == nil {
						v.lat = append(v.lat, now-ts)
					}
				}
			}
			v.mu.Unlock()
		}
	}()
	return v
}

// BenchmarkViewersOverThreeNodes: a leader and two followers (child
// processes, ha.enabled, one real redis-server) serve 500 v2 viewers
// between them (167, 167, 166) while 10 direct-Redis jobs log 1,000
// entries/s in all (pipelines' log script: HINCRBY, ZADD, PUBLISH). It
// reports the p50, p99 and worst latency of every entry every viewer got
// (now minus the entry's own ts: Redis, the leader's firehose and relay,
// each node's reader, hub and socket), entries lost (written but not
// received, summed over the viewers, after the stream went quiet; the
// node's dropped frames are reported apart) and each node's CPU. One
// run per iteration; run it with -benchtime=1x.
//
//	ARCHIVEBOT_TEST_REDIS          the redis-server (needed)
//	ARCHIVEBOT_BENCH_SECONDS       how long the jobs log (default 20)
//	ARCHIVEBOT_BENCH_RATE          entries/s (default 1000)
//	ARCHIVEBOT_BENCH_VIEWERS       viewers (default 500)
func BenchmarkViewersOverThreeNodes(b *testing.B) {
	rb := redistest.RealRedis(b)
	if rb == nil {
		b.Skip("needs a real redis-server (ARCHIVEBOT_TEST_REDIS)")
	}
	env := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	secs, rate, viewers := env("ARCHIVEBOT_BENCH_SECONDS", 20), env("ARCHIVEBOT_BENCH_RATE", 1000), env("ARCHIVEBOT_BENCH_VIEWERS", 500)
	irc := irctest.StartNgircd(b, irctest.NgircdOptions{})
	webs := []string{freeAddr(b), freeAddr(b), freeAddr(b)}
	var nodes []*child
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		c := startChild(b, benchNodeConfig(b, irc.URL(), rb.URL, name, webs[i]))
		if i == 0 {
			c.log.waitFor(b, 0, "took the leader lease")
		} else {
			c.log.waitFor(b, 0, "standby: another node leads")
		}
		testproc.Eventually(b, name+"'s /readyz to answer 200", func() bool {
			r, err := http.Get("http://" + webs[i] + "/readyz")
			if err != nil {
				return false
			}
			r.Body.Close()
			return r.StatusCode == http.StatusOK || i == 0 // the leader's IRC may still be joining
		})
		nodes = append(nodes, c)
	}
	ctx := context.Background()
	st := store.New(rb.Client)
	for it := 0; it < b.N; it++ {
		idents := make([]string, 10)
		for i := range idents {
			idents[i] = fmt.Sprintf("benchjob%d%04d", it, i)
			if err := st.Register(ctx, store.NewJob{Ident: idents[i], URL: fmt.Sprintf("http://bench%d-%d.example/", it, i),
				FetchDepth: "inf", Slug: "x", StartedBy: "bench", StartedIn: "#bench", DelayMin: 250, DelayMax: 375,
				Concurrency: 3, SettingsAge: 1, Queue: "pending"}); err != nil {
				b.Fatal(err)
			}
			rb.Client.RPush(ctx, "working", idents[i])
		}
		vs := make([]*benchViewer, viewers)
		for i := range vs {
			vs[i] = dialBenchViewer(b, "ws://"+webs[i%3]+"/stream?v=2")
		}
		cpu0 := make([]time.Duration, 3)
		for i, c := range nodes {
			cpu0[i] = procCPU(c.Pid())
		}
		b.ResetTimer()
		writeEntries(ctx, rb.Client, idents, rate, time.Duration(secs)*time.Second, 300)
		written := 0
		for _, id := range idents {
			n, _ := rb.Client.HGet(ctx, id, "log_score").Int()
			written += n
		}
		// Wait until every viewer has them all, or nothing came for 5 s.
		last, lastAt := -1, time.Now()
		for time.Since(lastAt) < 5*time.Second {
			got := 0
			all := true
			for _, v := range vs {
				v.mu.Lock()
				got += v.n
				all = all && v.n >= written
				v.mu.Unlock()
			}
			if all {
				break
			}
			if got != last {
				last, lastAt = got, time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.StopTimer()
		var lat []float64
		lost, dropped, worstLost := 0, 0, 0
		for _, v := range vs {
			v.mu.Lock()
			lat = append(lat, v.lat...)
			l := max(written-v.n, 0)
			lost += l
			worstLost = max(worstLost, l)
			dropped += v.dropped
			v.mu.Unlock()
		}
		slices.Sort(lat)
		q := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return lat[min(int(p*float64(len(lat))), len(lat)-1)] * 1000
		}
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(q(1), "max-ms")
		b.ReportMetric(float64(lost), "lost")
		b.ReportMetric(float64(dropped), "dropped")
		for i, c := range nodes {
			b.ReportMetric((procCPU(c.Pid())-cpu0[i]).Seconds()/float64(secs)*100, fmt.Sprintf("cpu%%-%s", []string{"leader", "follower1", "follower2"}[i]))
		}
		b.Logf("%d viewers over 3 nodes, %d entries/s for %d s: %d entries written, %d latency samples; lost %d (worst viewer %d), dropped %d",
			viewers, rate, secs, written, len(lat), lost, worstLost, dropped)
		for _, id := range idents {
			rb.Client.LRem(ctx, "working", 0, id)
		}
	}
}

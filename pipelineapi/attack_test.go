package pipelineapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAttackMeasure attacks a running node's pipeline API on 127.0.0.1
// and logs the node's descriptors, goroutines and RSS (from its /metrics)
// during each attack, before and after the bounds doc/pipeline-api.md describes.
// doc/measure-api-attack.sh starts the node and runs it:
//
//	ARCHIVEBOT_API_ATTACK=1 ATTACK_API=127.0.0.1:P ATTACK_WEB=127.0.0.1:W \
//	  ATTACK_REDIS=redis://127.0.0.1:R/0 ATTACK_SOCKETS=1000 \
//	  go test ./pipelineapi/ -run TestAttackMeasure -v -timeout 10m
//
// It asserts nothing: it prints what it saw.
func TestAttackMeasure(t *testing.T) {
	r := newAttackRig(t, "ARCHIVEBOT_API_ATTACK")
	api, web, rdb, st, ctx := r.api, os.Getenv("ATTACK_WEB"), r.rdb, r.st, r.ctx
	sockets := attackEnvInt("ATTACK_SOCKETS", 1000)
	newKey := func(name string) *client.Client {
		return r.newKey(name, &http.Transport{MaxIdleConnsPerHost: 2000})
	}
	sample := func(what string) {
		t.Logf("%-58s %s", what, nodeFigures(web))
	}
	sample("idle")

	// Headers of a take announcing a 4 MiB body, then one
	// byte every 5 s.
	newKey("slowpipe")
	conns := openConns(t, api, sockets, func(c net.Conn) {
		fmt.Fprint(c, headOnly("slowpipe", time.Now(), wire.MaxBody))
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Second):
				}
				if _, err := c.Write([]byte("{")); err != nil {
					return
				}
			}
		}()
	}
	for _, at := range []int{2, 15, 25} {
		sleepUntil(at)
		sample(fmt.Sprintf("slow body, %d sockets, %2ds: open %d", len(conns), at, countOpen(conns)))
	}
	close(stop)
	wg.Wait()
	closeAll(conns)
	time.Sleep(2 * time.Second)

	// Idle keep-alive sockets after one request.
	conns = openConns(t, api, sockets, func(c net.Conn) {
		fmt.Fprint(c, "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		c.SetReadDeadline(time.Time{})
	})
	for _, at := range []int{2, 15} {
		sleepUntil(at)
		sample(fmt.Sprintf("idle keep-alive, %d sockets, %2ds: open %d", len(conns), at, countOpen(conns)))
	}
	closeAll(conns)
	time.Sleep(2 * time.Second)
	sample("after the socket attacks")

	// Many long-poll takes of one key; Redis commands per
	// second while they wait.
	pollKey := newKey("pollpipe")
	polls := min(sockets, 500)
	var outcomes sync.Map // outcome -> *atomic.Int64
	count := func(m *sync.Map, k string) {
		v, _ := m.LoadOrStore(k, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	show := func(m *sync.Map) string {
		var parts []string
		m.Range(func(k, v any) bool {
			parts = append(parts, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
			return true
		})
		return strings.Join(parts, ", ")
	}
	outcome := func(err error) string {
		var e *client.Error
		switch {
		case err == nil:
			return "answered"
		case errorsAs(err, &e):
			return e.Code
		}
		return "connection refused or reset"
	}
	pctx, pcancel := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	for range polls {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			_, err := pollKey.Take(pctx, wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
			if pctx.Err() == nil {
				count(&outcomes, outcome(err))
			}
		}()
	}
	time.Sleep(3 * time.Second)
	c0 := redisCommands(rdb)
	time.Sleep(5 * time.Second)
	c1 := redisCommands(rdb)
	sample(fmt.Sprintf("%d long polls of one key: Redis %d cmd/s", polls, (c1-c0)/5))
	t.Logf("  polls ended before the 8 s: %s (the rest waited)", show(&outcomes))
	pcancel()
	pwg.Wait()
	time.Sleep(time.Second)

	// 20 takes waiting, the key revoked, then 5 jobs queued.
	revKey := newKey("revpipe")
	type result struct {
		ident string
		err   error
		at    time.Time
	}
	results := make(chan result, 20)
	for range 20 {
		go func() {
			j, err := revKey.Take(ctx, wire.TakeRequest{WaitMS: wire.MaxTakeWaitMS})
			r := result{err: err, at: time.Now()}
			if j != nil {
				r.ident = j.Ident
			}
			results <- r
		}()
	}
	time.Sleep(2 * time.Second)
	sample("20 long polls of revpipe waiting")
	revoked := time.Now()
	if err := st.RevokePipelineKey(ctx, "revpipe"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	for i := range 5 {
		id := fmt.Sprintf("attackjob%d%d", time.Now().UnixNano()%100000, i)
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: "http://example.com/" + id, FetchDepth: "inf",
			Slug: "example.com-inf", StartedBy: "attacker", StartedIn: "#test", Queue: store.KeyPending}); err != nil {
			t.Fatal(err)
		}
	}
	took, ended := 0, time.Duration(0)
	var revOutcomes sync.Map
	waited := 0
	for range 20 {
		r := <-results
		if r.ident != "" {
			took++
		}
		if d := r.at.Sub(revoked); d > 0 {
			waited++
			ended = max(ended, d)
			count(&revOutcomes, outcome(r.err))
		} else {
			count(&revOutcomes, "before the revocation: "+outcome(r.err))
		}
	}
	sample(fmt.Sprintf("revocation: polls took %d of 5 jobs; %d waiting ended by %.2fs after", took, waited, ended.Seconds()))
	t.Logf("  the 20 polls: %s", show(&revOutcomes))
}

func errorsAs(err error, e **client.Error) bool {
	ce, ok := err.(*client.Error)
	if ok {
		*e = ce
	}
	return ok
}

// nodeFigures reads the node's open descriptors, goroutines and RSS from
// its /metrics.
func nodeFigures(web string) string {
	res, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer res.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			switch f[0] {
			case "process_open_fds", "go_goroutines", "process_resident_memory_bytes":
				v[f[0]], _ = strconv.ParseFloat(f[1], 64)
			}
		}
	}
	return fmt.Sprintf("fds %5.0f  goroutines %5.0f  RSS %4.0f MB", v["process_open_fds"], v["go_goroutines"], v["process_resident_memory_bytes"]/(1<<20))
}

var attackStart time.Time

// sleepUntil sleeps until at seconds after the last openConns.
func sleepUntil(at int) { time.Sleep(time.Until(attackStart.Add(time.Duration(at) * time.Second))) }

func openConns(t *testing.T, addr string, n int, first func(net.Conn)) []net.Conn {
	var mu sync.Mutex
	var out []net.Conn
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			first(c)
			mu.Lock()
			out = append(out, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	attackStart = time.Now()
	return out
}

// countOpen is how many of conns the node has not closed (a read that
// times out at once: still open).
func countOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [512]byte
		_, err := c.Read(b[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			n++
		}
		c.SetReadDeadline(time.Time{})
	}
	return n
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

func redisCommands(rdb *redis.Client) int64 {
	info, _ := rdb.Info(context.Background(), "stats").Result()
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

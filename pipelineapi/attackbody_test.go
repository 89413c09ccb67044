package pipelineapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAttackBodies attacks a running node's pipeline API as strangers
// who know a key's name: CONNS connections from 9 loopback addresses
// (127.0.0.1–9), each sending an update's headers and a 4 MiB body with
// a forged signature, again and again for SECONDS. Meanwhile a pipeline
// takes a job every half second over a fresh connection (from
// 127.0.0.200). It logs the node's RSS (idle, the peak above idle, after)
// from /proc/PID/status, the attackers' answers and the takes' times.
// doc/measure-api-body-attack.sh starts the node and runs it:
//
//	ARCHIVEBOT_API_BODY_ATTACK=1 ATTACK_API=127.0.0.1:P ATTACK_PID=PID \
//	  ATTACK_REDIS=redis://127.0.0.1:R/0 go test ./pipelineapi/ -run TestAttackBodies -v
//
// It asserts nothing: it prints what it saw.
func TestAttackBodies(t *testing.T) {
	r := newAttackRig(t, "ARCHIVEBOT_API_BODY_ATTACK")
	api, st, ctx, pid := r.api, r.st, r.ctx, os.Getenv("ATTACK_PID")
	conns := attackEnvInt("ATTACK_CONNS", 512)
	seconds := attackEnvInt("ATTACK_SECONDS", 20)
	rss := func(field string) float64 {
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			return -1
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, field+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				return kb / 1024
			}
		}
		return -1
	}
	legitTransport := &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.200")}}).DialContext}
	newKey := func(name string) *client.Client { return r.newKey(name, legitTransport) }
	newKey("bodypipe") // the name the strangers use
	legit := newKey("legit")
	for i := range 200 {
		id := fmt.Sprintf("bodyjob%d%03d", time.Now().UnixNano()%100000, i)
		if err := st.Register(ctx, store.NewJob{Ident: id, URL: "http://example.com/" + id, FetchDepth: "inf",
			Slug: "example.com-inf", StartedBy: "op", StartedIn: "#test", Queue: store.KeyPending}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	idle := rss("VmRSS")
	os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0) // resets VmHWM (the peak)
	t.Logf("idle: RSS %.0f MB", idle)

	body := make([]byte, wire.MaxBody)
	for i := range body {
		body[i] = 'x'
	}
	var outcomes sync.Map
	count := func(k string) {
		v, _ := outcomes.LoadOrStore(k, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var peak atomic.Int64
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := fmt.Sprintf("127.0.0.%d", 1+i%9)
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
			for n := 0; time.Now().Before(end); n++ {
				c, err := d.Dial("tcp", api)
				if err != nil {
					count("dial failed")
					time.Sleep(100 * time.Millisecond)
					continue
				}
				c.SetDeadline(time.Now().Add(30 * time.Second))
				head := fmt.Sprintf("POST /v1/jobs/x/update HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
					"%s: bodypipe\r\n%s: %d\r\n%s: %032x\r\n%s: %s==\r\n\r\n",
					len(body), wire.HeaderKey, wire.HeaderTimestamp, time.Now().Unix(), wire.HeaderNonce, i*1000000+n,
					wire.HeaderSignature, strings.Repeat("A", 86))
				go func() { c.Write([]byte(head)); c.Write(body) }()
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					count("no answer (" + err.Error()[:min(len(err.Error()), 30)] + ")")
				} else {
					var code string
					b := make([]byte, 512)
					k, _ := res.Body.Read(b)
					if i := strings.Index(string(b[:k]), `"error":"`); i >= 0 {
						code, _, _ = strings.Cut(string(b[i+9:k]), `"`)
					}
					count(fmt.Sprintf("%d %s", res.StatusCode, code))
				}
				c.Close()
			}
		}()
	}
	stopSample := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v := int64(rss("VmRSS")); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSample:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// A pipeline's takes meanwhile, each over a new connection.
	var takes []time.Duration
	takeOutcomes := map[string]int{}
	time.Sleep(time.Second)
	for time.Now().Before(end.Add(-time.Second)) {
		start := time.Now()
		j, err := legit.Take(ctx, wire.TakeRequest{})
		takes = append(takes, time.Since(start))
		switch {
		case err != nil:
			takeOutcomes[err.Error()[:min(len(err.Error()), 60)]]++
		case j == nil:
			takeOutcomes["no job"]++
		default:
			takeOutcomes["job"]++
		}
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	during := rss("VmHWM")
	time.Sleep(5 * time.Second)
	close(stopSample)
	<-sampled
	after := rss("VmRSS")
	sort.Slice(takes, func(i, j int) bool { return takes[i] < takes[j] })
	var parts []string
	outcomes.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(parts)
	t.Logf("attack: %d connections from 9 addresses, 4 MiB bodies, %d s; answers: %s", conns, seconds, strings.Join(parts, ", "))
	t.Logf("RSS: idle %.0f MB, peak %.0f MB (VmHWM; sampled max %d MB), peak above idle %.0f MB, 5 s after %.0f MB",
		idle, during, peak.Load(), during-idle, after)
	if len(takes) > 0 {
		t.Logf("legitimate takes (%d, fresh connection each): p50 %v, max %v; %v", len(takes),
			takes[len(takes)/2].Round(time.Millisecond), takes[len(takes)-1].Round(time.Millisecond), takeOutcomes)
	}
}

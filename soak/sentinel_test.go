package soak

// The Redis cluster's Sentinel timings (SOAK_SENTINEL) and the watcher
// that measures what they must survive: how long each Redis server goes
// unanswered under the soak's load, and each failover, real or spurious
// (doc/operating.md, Sentinel's timings).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// recommendedSentinel are the timings doc/operating.md recommends for
// production, measured under this soak's load (doc/operating.md,
// Sentinel's timings): the soak runs them unless SOAK_SENTINEL says
// otherwise.
var recommendedSentinel = redistest.SentinelTimings{DownAfter: 5 * time.Second, FailoverTimeout: 10 * time.Second}

// recommendedLease is the ha.lease_ttl doc/operating.md recommends
// with those timings: the leader rides out a failover (up to 7.0 s from
// the kill under load) without stepping down; stressLease is the soak's
// old 5 s, kept with the stress profile (its failovers take 1-3 s).
const (
	recommendedLease = 20 * time.Second
	stressLease      = 5 * time.Second
)

func profileLease(profile string) time.Duration {
	if profile == "stress" {
		return stressLease
	}
	return recommendedLease
}

// sentinelProfile reads SOAK_SENTINEL: "" or "recommended" for the
// recommended timings, "stress" for the tests' 1 s down-after, which a
// loaded machine trips (a second failover before the replicas caught up:
// doc/reliability.md says what it loses).
func sentinelProfile(t *testing.T) (string, redistest.SentinelTimings) {
	switch v := os.Getenv("SOAK_SENTINEL"); v {
	case "", "recommended":
		return "recommended", recommendedSentinel
	case "stress":
		return "stress", redistest.FastTimings
	default:
		t.Fatalf("SOAK_SENTINEL=%q: want recommended or stress", v)
		return "", redistest.SentinelTimings{}
	}
}

// redisWatch pings every Redis server of the cluster every 100 ms, as a
// sentinel does every second, and follows the sentinels' events. A server
// that refuses connections is dead (killed), not slow; a PING that waits
// is a stall, and the longest gap between two answers of a live server is
// what down-after-milliseconds must outlast.
type redisWatch struct {
	r       *redisSet
	profile string
	tm      redistest.SentinelTimings
	start   time.Time

	mu      sync.Mutex
	servers map[int]*serverWatch
	events  []string // the sentinels' events, timed
	kills   int      // failovers of a master that was dead
	spur    int      // failovers of a master that still answered
	sdowns  int      // +sdown of a master that still answered
	fail    []time.Duration
	// A failover's promotion, bounded by failover-timeout: from the
	// leader sentinel's REPLICAOF NO ONE to the replica seen as master
	// (this sentinel's view, when it leads the failover).
	waitProm map[int]time.Time
	promote  []time.Duration
}

type serverWatch struct {
	lastOK    time.Time // last answer; zero while dead
	downSince time.Time // when it stopped answering with a refusal
	maxGap    time.Duration
	maxGapAt  time.Time
	gaps      [5]int // gaps over 0.5, 1, 2, 3, 5 s
	pings     int
}

var gapBounds = [5]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second}

func watchRedis(t *testing.T, r *redisSet, profile string, tm redistest.SentinelTimings) *redisWatch {
	w := &redisWatch{r: r, profile: profile, tm: tm, start: time.Now(), servers: map[int]*serverWatch{}, waitProm: map[int]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.pingLoop(ctx, &wg) }()
	for i, a := range r.cl.SentinelAddrs() {
		wg.Add(1)
		go func() { defer wg.Done(); w.sentinelLoop(ctx, i, a) }()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		rep := w.report()
		t.Log(rep)
		if out := os.Getenv("SOAK_OUT"); out != "" {
			os.WriteFile(filepath.Join(out, "sentinel.txt"), []byte(rep), 0o644)
		}
	})
	return w
}

func (w *redisWatch) pingLoop(ctx context.Context, wg *sync.WaitGroup) {
	started := map[int]bool{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, p := range w.r.ports() {
			if !started[p] {
				started[p] = true
				w.mu.Lock()
				w.servers[p] = &serverWatch{}
				w.mu.Unlock()
				wg.Add(1)
				go func() { defer wg.Done(); w.pingServer(ctx, p) }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *redisWatch) pingServer(ctx context.Context, port int) {
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), PoolSize: 1, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true})
	defer c.Close()
	for ctx.Err() == nil {
		err := c.Ping(ctx).Err()
		now := time.Now()
		w.mu.Lock()
		sw := w.servers[port]
		sw.pings++
		var rerr redis.Error
		switch {
		case err == nil || errors.As(err, &rerr) && (strings.HasPrefix(err.Error(), "LOADING") || strings.HasPrefix(err.Error(), "MASTERDOWN")):
			// Sentinel takes LOADING and MASTERDOWN as answers too.
			if !sw.lastOK.IsZero() {
				gap := now.Sub(sw.lastOK)
				if gap > sw.maxGap {
					sw.maxGap, sw.maxGapAt = gap, now
				}
				for i, b := range gapBounds {
					if gap > b {
						sw.gaps[i]++
					}
				}
			}
			sw.lastOK, sw.downSince = now, time.Time{}
		case ctx.Err() != nil:
		default:
			// Refused or reset: dead, not slow.
			if sw.downSince.IsZero() {
				sw.downSince = now
			}
			sw.lastOK = time.Time{}
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sentinelLoop follows a sentinel's events (the soak never kills a
// sentinel): the first one's views of the master, and every one's
// promotions (only the failover's leader reports them).
func (w *redisWatch) sentinelLoop(ctx context.Context, i int, addr string) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	ps := sc.PSubscribe(ctx, "*")
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			w.event(i, m.Channel, m.Payload)
		}
	}
}

func (w *redisWatch) event(i int, name, payload string) {
	promotion := name == "+failover-state-wait-promotion" || name == "+promoted-slave"
	if i != 0 && !promotion {
		return
	}
	switch name {
	case "+sdown", "+odown", "+switch-master", "+try-failover", "+failover-end", "-failover-abort-not-elected",
		"-failover-abort-no-good-slave", "-failover-abort-slave-timeout", "+failover-end-for-timeout",
		"+failover-state-wait-promotion", "+promoted-slave", "+elected-leader":
	default:
		return
	}
	now := time.Now()
	f := strings.Fields(payload)
	w.mu.Lock()
	defer w.mu.Unlock()
	line := fmt.Sprintf("%s sentinel%d %s %s", now.UTC().Format("15:04:05.000"), i, name, payload)
	switch {
	case name == "+sdown" && len(f) >= 4 && f[0] == "master":
		if sw := w.servers[atoi(f[3])]; sw != nil && sw.downSince.IsZero() {
			w.sdowns++
			line += " (SPURIOUS: it still answers)"
		}
	case name == "+failover-state-wait-promotion":
		w.waitProm[i] = now
	case name == "+promoted-slave" && !w.waitProm[i].IsZero():
		d := now.Sub(w.waitProm[i])
		w.promote = append(w.promote, d)
		line += fmt.Sprintf(" (%.2f s after wait-promotion)", d.Seconds())
		delete(w.waitProm, i)
	case name == "+switch-master" && len(f) >= 5:
		sw := w.servers[atoi(f[2])]
		if sw != nil && !sw.downSince.IsZero() {
			w.kills++
			d := now.Sub(sw.downSince)
			w.fail = append(w.fail, d)
			line += fmt.Sprintf(" (dead for %.1f s)", d.Seconds())
		} else {
			w.spur++
			line += " (SPURIOUS FAILOVER: the old master still answered)"
		}
	}
	w.events = append(w.events, line)
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func (w *redisWatch) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "sentinel: profile %s (down-after %v, failover-timeout %v), %s watched\n",
		w.profile, w.tm.DownAfter, w.tm.FailoverTimeout, time.Since(w.start).Round(time.Second))
	fmt.Fprintf(&b, "sentinel: failovers of a dead master %d, spurious failovers %d, spurious +sdown of a live master %d\n", w.kills, w.spur, w.sdowns)
	if len(w.fail) > 0 {
		f := slices.Clone(w.fail)
		slices.Sort(f)
		var sum time.Duration
		for _, d := range f {
			sum += d
		}
		fmt.Fprintf(&b, "sentinel: master dead to +switch-master: min %.1f s, median %.1f s, mean %.1f s, max %.1f s (%d)\n",
			f[0].Seconds(), f[len(f)/2].Seconds(), (sum / time.Duration(len(f))).Seconds(), f[len(f)-1].Seconds(), len(f))
	}
	if len(w.promote) > 0 {
		p := slices.Clone(w.promote)
		slices.Sort(p)
		fmt.Fprintf(&b, "sentinel: promotion (wait-promotion to promoted-slave, seen by the watched sentinel when it led): median %.2f s, max %.2f s (%d)\n",
			p[len(p)/2].Seconds(), p[len(p)-1].Seconds(), len(p))
	}
	ports := make([]int, 0, len(w.servers))
	for p := range w.servers {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	var worst time.Duration
	for _, p := range ports {
		sw := w.servers[p]
		worst = max(worst, sw.maxGap)
		fmt.Fprintf(&b, "sentinel: redis %d: %d pings, longest gap between answers %.2f s (at %s); gaps over 0.5/1/2/3/5 s: %d/%d/%d/%d/%d\n",
			p, sw.pings, sw.maxGap.Seconds(), sw.maxGapAt.UTC().Format("15:04:05"), sw.gaps[0], sw.gaps[1], sw.gaps[2], sw.gaps[3], sw.gaps[4])
	}
	fmt.Fprintf(&b, "sentinel: longest gap of any live server %.2f s: down-after %v leaves a margin of %.1f×\n",
		worst.Seconds(), w.tm.DownAfter, w.tm.DownAfter.Seconds()/max(worst.Seconds(), 0.001))
	for _, e := range w.events {
		fmt.Fprintf(&b, "sentinel event: %s\n", e)
	}
	return b.String()
}

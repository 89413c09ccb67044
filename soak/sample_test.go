package soak

// Resource samples: every process's RSS, fds, CPU and goroutines, and
// Redis's memory, every sampleEvery.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/soak/history"
)

// nodeSampleEvery: the nodes are sampled more often than the rest. A
// change of leader starts a new segment of each node's series, judged
// only after its warm-up (invariant 6): at ci scale a term may be a
// minute long, which at sampleEvery left fewer samples than the floor.
const nodeSampleEvery = 2 * time.Second

// sampleNodes records each node's RSS, fds, CPU and goroutines every
// nodeSampleEvery.
func (s *soak) sampleNodes(stop <-chan struct{}) {
	t := time.NewTicker(nodeSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, n := range s.nodes {
			pid := n.pid()
			if pid == 0 {
				continue
			}
			num := procStats(pid)
			if g, ok := metric(n.web, "go_goroutines"); ok {
				num["goroutines"] = g
			}
			s.rec.Add(history.Event{Kind: history.Sample, Actor: n.name, Num: num})
		}
	}
}

// sampler records the processes' resources every sampleEvery (the
// nodes' through sampleNodes).
func (s *soak) sampler(stop <-chan struct{}) {
	nodesDone := make(chan struct{})
	go func() { defer close(nodesDone); s.sampleNodes(stop) }()
	defer func() { <-nodesDone }()
	rdb := s.redis.failoverClient()
	defer rdb.Close()
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	cpu := newCPUMeter(s.bin)
	cpu.read()
	for tick := 1; ; tick++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if by, busy, cores, ok := cpu.read(); ok {
			num := map[string]float64{"cpu_busy": busy, "cores": cores}
			for g, v := range by {
				num["cpu_"+g] = v
			}
			s.rec.Add(history.Event{Kind: history.Sample, Actor: "machine", Num: num})
		}
		if tick%12 == 0 { // every minute
			s.fdView()
		}
		if tick%36 == 0 { // every 3 minutes
			s.goroutineDumps()
		}
		for _, b := range s.bridges {
			if p := b.current(); p != nil && p.Running() {
				s.rec.Add(history.Event{Kind: history.Sample, Actor: b.name, Num: procStats(p.Pid())})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := rdb.Info(ctx, "memory").Result()
		if err == nil {
			for _, l := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
					f, _ := strconv.ParseFloat(v, 64)
					num := map[string]float64{"redis_used_memory": f}
					if tick%3 == 0 { // every 15 s: enough samples after a short run's warm-up (invariant 6's floor)
						if exp, err := expiringScript.Run(ctx, rdb, nil).Int64(); err == nil {
							num["redis_expiring_memory"] = float64(exp)
							num["redis_live_memory"] = f - float64(exp)
						}
					}
					s.rec.Add(history.Event{Kind: history.Sample, Actor: "redis", Num: num})
				}
			}
		}
		cancel()
	}
}

// expiringScript sums the memory of the keys that carry a TTL: what the
// deployment keeps by design until it expires (an ended job's record, log
// and history: 48 h or 7 days; nonces, sessions, take_ids), which grows
// with the jobs ended, not with time alone. Invariant 6 judges Redis
// memory less this (redis_live_memory); the raw figure is reported. One
// pass over the keyspace: tens of milliseconds every 15 s at the long
// run's size.
var expiringScript = redis.NewScript(`
local sum = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
  if redis.call('PTTL', k) > 0 then
    sum = sum + (redis.call('MEMORY', 'USAGE', k) or 0)
  end
end
return sum`)

// procStats reads a process's RSS, open descriptors and CPU time.
func procStats(pid int) map[string]float64 {
	num := map[string]float64{}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					num["rss_bytes"] = kb * 1024
				}
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		num["fds"] = float64(len(ents))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b)[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				num["cpu_seconds"] = (ut + st) / 100 // USER_HZ
			}
		}
	}
	return num
}

// metric reads one unlabelled gauge from a node's /metrics.
func metric(addr, name string) (float64, bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

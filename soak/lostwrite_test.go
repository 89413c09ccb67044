package soak

// The fault lose-redis-write: a Redis failover that loses writes the
// node acknowledged, on purpose, so that the promise "a lost Redis write
// is noticed" (doc/reliability.md, A failover that loses writes; the
// checker's judge_lostwrites.go) is exercised whatever the timings. Not
// drawn unless SOAK_FAULTS names it (optInFaults).

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// optInFaults are fault kinds a run draws only when SOAK_FAULTS names
// them.
var optInFaults = []string{"lose-redis-write"}

// loseRedisWrite: one replica is cut off from the master (a wrong
// masterauth: it still answers the sentinels, but cannot resync), the
// load goes on for 2–4 s (takes and commands, WAIT confirmed by the other
// replica), then the master and the other replica are killed: the
// sentinels can only promote the cut replica, which lacks those writes.
// The two killed come back as replicas of it.
func (s *soak) loseRedisWrite(st step, start, end func(string)) string {
	master := s.redis.masterAddr()
	mport := portOf(master)
	var cut, other int
	for _, p := range s.redis.ports() {
		switch {
		case p == mport:
		case cut == 0:
			cut = p
		default:
			other = p
		}
	}
	if master == "" || cut == 0 || other == 0 {
		return fmt.Sprintf("master %q, replicas %d and %d", master, cut, other)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(cut))})
	defer rc.Close()
	start(master)
	if err := rc.ConfigSet(ctx, "masterauth", "soak-lose-redis-write").Err(); err != nil {
		end(master)
		return fmt.Sprintf("cannot cut replica %d: %v", cut, err)
	}
	rc.ClientKillByFilter(ctx, "TYPE", "master")
	for linkDeadline := time.Now().Add(5 * time.Second); time.Now().Before(linkDeadline); {
		info, _ := rc.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:down") {
			break
		}
		s.waitUntil(time.Now().Add(50 * time.Millisecond))
	}
	// Long enough for takes and commands to land; short enough that the
	// sentinels still take the cut replica (its link down less than ten
	// times down-after-milliseconds, at the stress profile's 1 s too).
	s.waitUntil(time.Now().Add(min(max(st.Dur, 2*time.Second), 4*time.Second)))
	s.redis.mu.Lock()
	killM, killO := s.redis.procs[mport], s.redis.procs[other]
	s.redis.mu.Unlock()
	if killM != nil {
		killM()
	}
	if killO != nil {
		killO()
	}
	rc.ConfigSet(ctx, "masterauth", "")
	want := fmt.Sprintf("127.0.0.1:%d", cut)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && s.redis.masterAddr() != want {
		s.waitUntil(time.Now().Add(250 * time.Millisecond))
	}
	s.redisView(fmt.Sprintf("lose-redis-write of %s: the sentinels moved on (to %s, the cut replica, wanted)", master, s.redis.masterAddr()))
	s.redis.restartAsReplica(mport)
	s.redis.restartAsReplica(other)
	end(master)
	return ""
}

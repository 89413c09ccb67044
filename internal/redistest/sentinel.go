package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// SentinelMaster is the name the test sentinels monitor.
const SentinelMaster = "abmaster"

// Proc is one redis-server process (master, replica or sentinel).
type Proc struct {
	Name string
	Port int
	proc *testproc.Proc
}

// Addr is 127.0.0.1:port.
func (p *Proc) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() { p.proc.Kill() }

// Cluster is a master, two replicas and three sentinels on free loopback
// ports, as doc/architecture.md (High availability) describes a
// deployment: with redis.wait_replicas = 1, two replicas keep writes
// confirmable after a failover promoted one of them. Everything is killed
// when the test ends.
type Cluster struct {
	Master    *Proc
	Replicas  []*Proc
	Sentinels []*Proc
}

// SentinelAddrs lists the sentinels' host:port.
func (c *Cluster) SentinelAddrs() []string {
	var out []string
	for _, s := range c.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// RedisServer finds redis-server, or skips the test (fails it when CI is
// set: CI installs it).
func RedisServer(t testing.TB) string {
	t.Helper()
	return testproc.Bin(t, "redis-server")
}

func startProc(t testing.TB, bin, name string, port int, dir string, args ...string) *Proc {
	t.Helper()
	return &Proc{Name: name, Port: port,
		proc: testproc.Start(t, fmt.Sprintf("%s (port %d)", name, port), bin, args, testproc.Options{Dir: dir, Tail: 30})}
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume
// it; the end of the test continues and kills it).
func (p *Proc) Signal(sig syscall.Signal) error { return p.proc.Signal(sig) }

// StartServer runs a redis-server of the test's own (no persistence) on a
// free port and returns once it answers PING: for tests that stop, kill
// or restart their server and so cannot share ARCHIVEBOT_TEST_REDIS's. It
// is killed when the test ends.
func StartServer(t testing.TB) *Proc {
	t.Helper()
	bin := RedisServer(t)
	port := testproc.FreePort(t)
	p := startProc(t, bin, "redis-server", port, t.TempDir(),
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer c.Close()
	testproc.Eventually(t, "redis-server to answer PING", func() bool { return c.Ping(context.Background()).Err() == nil })
	return p
}

// clusterWait bounds each wait of StartCluster: a sentinel learns of its
// peers through hello messages every 2 s.
const clusterWait = 30 * time.Second

// SentinelTimings are the sentinels' timings for the monitored master
// (Sentinel's own names): how long the master may go unanswered before a
// sentinel thinks it down, and failover-timeout (a failover's deadline
// for promotion and the replicas' reconfiguration; twice it, the wait
// before the same master is failed over again).
type SentinelTimings struct {
	DownAfter       time.Duration
	FailoverTimeout time.Duration
}

// FastTimings are the tests' timings: a failover in a few seconds on a
// quiet machine. A loaded machine trips a 1 s down-after (doc/operating.md,
// Sentinel's timings): tests that must not see a spurious failover under
// load use the recommended timings instead.
var FastTimings = SentinelTimings{DownAfter: time.Second, FailoverTimeout: 5 * time.Second}

// StartCluster starts the master, two replicas and three sentinels (quorum
// 2, FastTimings) and returns once the replicas are in sync and every
// sentinel knows the replicas and the two other sentinels, so that killing
// the master starts a failover.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, FastTimings)
}

// StartClusterWith is StartCluster with the sentinels' timings given.
func StartClusterWith(t testing.TB, tm SentinelTimings) *Cluster {
	t.Helper()
	bin := RedisServer(t)
	dir := t.TempDir()
	c := &Cluster{}
	mp := testproc.FreePort(t)
	common := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	c.Master = startProc(t, bin, "master", mp, dir, append([]string{"--port", fmt.Sprint(mp)}, common...)...)
	for i := 0; i < 2; i++ {
		rp := testproc.FreePort(t)
		c.Replicas = append(c.Replicas, startProc(t, bin, fmt.Sprintf("replica%d", i), rp, dir,
			append([]string{"--port", fmt.Sprint(rp), "--replicaof", "127.0.0.1", fmt.Sprint(mp)}, common...)...))
	}
	for i := 0; i < 3; i++ {
		sp := testproc.FreePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
			sp, dir, SentinelMaster, mp, SentinelMaster, tm.DownAfter.Milliseconds(), SentinelMaster, tm.FailoverTimeout.Milliseconds(), SentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Sentinels = append(c.Sentinels, startProc(t, bin, fmt.Sprintf("sentinel%d", i), sp, dir, conf, "--sentinel"))
	}
	ctx := context.Background()
	master := redis.NewClient(&redis.Options{Addr: c.Master.Addr()})
	defer master.Close()
	testproc.EventuallyWithin(t, clusterWait, "redistest: the replica in sync", func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:2") && strings.Count(info, "state=online") == 2
	})
	for _, s := range c.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		testproc.EventuallyWithin(t, clusterWait, "redistest: "+s.Name+" to know the replica and the other sentinels", func() bool {
			m, err := sc.Master(ctx, SentinelMaster).Result()
			return err == nil && m["num-slaves"] == "2" && m["num-other-sentinels"] == "2"
		})
		sc.Close()
	}
	return c
}

// MasterAddr asks the first sentinel that answers for the current master.
func (c *Cluster) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range c.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		a, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(a) == 2 {
			return net.JoinHostPort(a[0], a[1]), nil
		}
		last = err
	}
	return "", last
}

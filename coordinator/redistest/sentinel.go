package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the test sentinels monitor.
const SentinelMaster = "abmaster"

// Proc is one redis-server process (master, replica or sentinel).
type Proc struct {
	Name   string
	Port   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// Addr is 127.0.0.1:port.
func (p *Proc) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

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

// redisServer finds redis-server, or skips the test (fails it when CI is
// set: CI installs it).
func redisServer(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found (CI must install it): %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	return p
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startProc(t testing.TB, bin, name string, port int, dir string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Port: port, exited: make(chan struct{}), log: filepath.Join(dir, name+".log")}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Dir = dir
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 30 {
				lines = lines[len(lines)-30:]
			}
			t.Logf("%s (port %d) log tail:\n%s", name, port, strings.Join(lines, "\n"))
		}
	})
	return p
}

// waitUntil polls cond every 50 ms for up to 30 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartCluster starts the master, two replicas and three sentinels (quorum
// 2, down-after 1 s) and returns once the replicas are in sync and every
// sentinel knows the replicas and the two other sentinels, so that killing
// the master starts a failover.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := redisServer(t)
	dir := t.TempDir()
	c := &Cluster{}
	mp := freePort(t)
	common := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	c.Master = startProc(t, bin, "master", mp, dir, append([]string{"--port", fmt.Sprint(mp)}, common...)...)
	for i := 0; i < 2; i++ {
		rp := freePort(t)
		c.Replicas = append(c.Replicas, startProc(t, bin, fmt.Sprintf("replica%d", i), rp, dir,
			append([]string{"--port", fmt.Sprint(rp), "--replicaof", "127.0.0.1", fmt.Sprint(mp)}, common...)...))
	}
	for i := 0; i < 3; i++ {
		sp := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			sp, dir, SentinelMaster, mp, SentinelMaster, SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Sentinels = append(c.Sentinels, startProc(t, bin, fmt.Sprintf("sentinel%d", i), sp, dir, conf, "--sentinel"))
	}
	ctx := context.Background()
	master := redis.NewClient(&redis.Options{Addr: c.Master.Addr()})
	defer master.Close()
	waitUntil(t, "the replica in sync", func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:2") && strings.Count(info, "state=online") == 2
	})
	for _, s := range c.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		waitUntil(t, s.Name+" to know the replica and the other sentinels", func() bool {
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

package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// Evidence the checker does not read, kept in the run's directory for
// whoever diagnoses a failed invariant:
//
//   - redis-evidence.txt: after each kill-redis-master and at the end,
//     what each sentinel names as master and each server's INFO
//     replication; at the end, every "stranded" job (a registered hash
//     neither started, finished, failed nor queued) as each server holds it;
//   - fds.txt: every minute, each node's open descriptors by kind, its
//     TCP sockets by the peer's port (or the local port when listening);
//   - goroutines-node-X.txt: the nodes' goroutines grouped by stack
//     (ARCHIVEBOT_GOROUTINE_DUMP, SIGUSR1), every few minutes and at the
//     end before the nodes stop.

type evidence struct {
	mu  sync.Mutex
	dir string
}

func (e *evidence) write(file, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(e.dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// redisView writes what the sentinels say and each server's replication.
func (s *soak) redisView(why string) {
	ev := s.ev
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "== %s\n", why)
	for _, sn := range s.redis.cl.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
		a, err := sc.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
		reps, _ := sc.Replicas(ctx, redistest.SentinelMaster).Result()
		sc.Close()
		fmt.Fprintf(&b, "  sentinel %s: master %v err %v; replicas:", sn.Addr(), a, err)
		for _, r := range reps {
			fmt.Fprintf(&b, " [%s:%s %s off=%s]", r["ip"], r["port"], r["flags"], r["slave-repl-offset"])
		}
		b.WriteString("\n")
	}
	for _, port := range s.redis.ports() {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		info, err := c.Info(ctx, "replication").Result()
		n, _ := c.DBSize(ctx).Result()
		c.Close()
		if err != nil {
			fmt.Fprintf(&b, "  server %d: %v\n", port, err)
			continue
		}
		var kv []string
		for _, l := range strings.Split(info, "\n") {
			l = strings.TrimSpace(l)
			for _, k := range []string{"role:", "master_host:", "master_port:", "master_link_status:", "master_repl_offset:", "master_replid:", "master_replid2:", "second_repl_offset:", "slave_repl_offset:", "connected_slaves:", "slave0:", "slave1:", "master_sync_in_progress:", "master_link_down_since_seconds:"} {
				if strings.HasPrefix(l, k) {
					kv = append(kv, l)
				}
			}
		}
		fmt.Fprintf(&b, "  server %d (pid %d): dbsize %d %s\n", port, s.redis.pid(port), n, strings.Join(kv, " "))
	}
	ev.write("redis-evidence.txt", "%s", b.String())
}

// strandedEvidence writes, for each job hash of the final dump that is
// registered but neither started, finished, failed nor in a pending
// queue, the hash and its TTL on every server.
func (s *soak) strandedEvidence(dump map[string]redistest.Entry) {
	queued := map[string]bool{}
	for k, e := range dump {
		if e.Type == "list" && (k == "pending" || k == "pending-ao" || k == "pending-large" || strings.HasPrefix(k, "pending:") || strings.HasPrefix(k, "archivebot:paused:") || k == "working") {
			b, _ := json.Marshal(e.Value)
			var m []string
			_ = json.Unmarshal(b, &m)
			for _, id := range m {
				queued[id] = true
			}
		}
	}
	var idents []string
	for k, e := range dump {
		if e.Type != "hash" || strings.Contains(k, ":") {
			continue
		}
		b, _ := json.Marshal(e.Value)
		var h map[string]string
		_ = json.Unmarshal(b, &h)
		if h["url"] == "" || h["started_at"] != "" || h["pipeline_id"] != "" || h["finished_at"] != "" || h["failed"] == "true" || queued[k] {
			continue
		}
		idents = append(idents, k)
	}
	sort.Strings(idents)
	s.ev.write("redis-evidence.txt", "== %d stranded hashes in the final dump: %v", len(idents), idents)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, port := range s.redis.ports() {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		for _, id := range idents {
			h, err := c.HGetAll(ctx, id).Result()
			ttl, _ := c.PTTL(ctx, id).Result()
			hist, _ := c.LRange(ctx, "archivebot:history:"+id, 0, -1).Result()
			typ, _ := c.Type(ctx, "archivebot:history:"+id).Result()
			if typ == "zset" {
				hist, _ = c.ZRange(ctx, "archivebot:history:"+id, 0, -1).Result()
			}
			s.ev.write("redis-evidence.txt", "  server %d %s: ttl %v err %v hash %v history(%s) %v", port, id, ttl, err, h, typ, hist)
		}
		c.Close()
	}
}

// fdView writes each node's open descriptors by kind.
func (s *soak) fdView() {
	peers := tcpPeers()
	var sent []string
	for _, sn := range s.redis.cl.Sentinels {
		sent = append(sent, sn.Addr())
	}
	names := fmt.Sprintf("ports: redis %v sentinels %v irc %d api-proxy %s", s.redis.ports(), sent, s.ircPort, s.api)
	if s.master != nil {
		names += " master-proxy " + s.master.addr()
	}
	for _, n := range s.nodes {
		names += fmt.Sprintf(" %s web %s stream %s api %s", n.name, n.web, n.stream, n.api)
	}
	s.ev.write("fds.txt", "%s", names)
	for _, n := range s.nodes {
		pid := n.pid()
		if pid == 0 {
			continue
		}
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		count := map[string]int{}
		listen := map[string]bool{}
		for _, e := range ents {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				if p, ok := strings.CutPrefix(peers[strings.TrimSuffix(ino, "]")], "listen "); ok {
					listen[p] = true
				}
			}
		}
		for _, e := range ents {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			if err != nil {
				continue
			}
			kind := l
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				ino = strings.TrimSuffix(ino, "]")
				if p, ok := peers[ino]; ok {
					kind = "tcp " + p
					if f := strings.Fields(p); len(f) == 5 && listen[f[4]] {
						kind = "tcp accepted on " + f[4] + " " + f[2] // a client of one of its listeners
					} else if len(f) == 5 {
						kind = strings.Join(f[:3], " ")
					}
				} else {
					kind = "socket (not tcp)"
				}
			} else if strings.HasPrefix(l, "pipe:") {
				kind = "pipe"
			} else if strings.HasPrefix(l, "anon_inode:") {
				kind = l
			}
			count[kind]++
		}
		var ks []string
		for k := range count {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return count[ks[i]] > count[ks[j]] })
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, " [%s]=%d", k, count[k])
		}
		s.ev.write("fds.txt", "%s pid %d: %d fds:%s", n.name, pid, len(ents), b.String())
	}
}

// tcpPeers maps a TCP socket's inode to "peer PORT STATE" (or "listen PORT").
func tcpPeers() map[string]string {
	out := map[string]string{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Scan()
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 {
				continue
			}
			port := func(a string) int64 {
				i := strings.LastIndexByte(a, ':')
				v, _ := strconv.ParseInt(a[i+1:], 16, 32)
				return v
			}
			st := fs[3]
			if st == "0A" {
				out[fs[9]] = fmt.Sprintf("listen %d", port(fs[1]))
			} else {
				out[fs[9]] = fmt.Sprintf("peer %d st%s local %d", port(fs[2]), st, port(fs[1]))
			}
		}
		fh.Close()
	}
	return out
}

// goroutineDumps asks each node for its goroutines (SIGUSR1).
func (s *soak) goroutineDumps() {
	for _, n := range s.nodes {
		if p := n.current(); p != nil && p.Running() {
			p.Signal(syscall.SIGUSR1)
		}
	}
}

package main

// Whole-process tests of high availability (see
// doc/architecture.md, High availability): a Redis master, two replicas
// and three sentinels (internal/redistest.StartCluster), ngircd, and
// control nodes as child processes campaigning for the leader lease.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// haNodeConfig is a node of the HA tests: Redis through the sentinels,
// WAIT for one replica after every command's write, the lease on.
func haNodeConfig(t testing.TB, ircURL, channel string, cl *redistest.Cluster, node, leaseTTL string) string {
	t.Helper()
	sentinels, _ := json.Marshal(cl.SentinelAddrs())
	body := fmt.Sprintf(`[irc]
server = %q
nick = %q
channels = [%q]
messages_per_second = 20
burst = 1
commands_per_minute = 1000

[redis]
sentinels = %s
master_name = %q
wait_replicas = 1
wait_timeout = "1s"

[ha]
enabled = true
lease_ttl = %q
node_id = %q

[reaper]
interval = "100ms"
threshold = 60
auto_fail = true

[notifier]
finish_interval = "200ms"
pipeline_interval = "300ms"

[analyzer]
sweep_interval = "1s"

[tweeter]
interval = "1h"

[http]
listen = "127.0.0.1:0"
stream_listen = "127.0.0.1:0"
`, ircURL, botNick, channel, sentinels, redistest.SentinelMaster, leaseTTL, node)
	return writeTemp(t, "archivebot.toml", body)
}

// haLeader starts node (haNodeConfig) and returns once it took the
// leader lease.
func haLeader(t testing.TB, irc *irctest.Ngircd, ch string, cl *redistest.Cluster, node, leaseTTL string) *child {
	t.Helper()
	c := startChild(t, haNodeConfig(t, irc.URL(), ch, cl, node, leaseTTL))
	c.log.waitFor(t, 0, "took the leader lease")
	return c
}

// haStandby starts node and returns once it stands by.
func haStandby(t testing.TB, irc *irctest.Ngircd, ch string, cl *redistest.Cluster, node, leaseTTL string) *child {
	t.Helper()
	c := startChild(t, haNodeConfig(t, irc.URL(), ch, cl, node, leaseTTL))
	c.log.waitFor(t, 0, "standby: another node leads")
	return c
}

// webAddr is the child's web server address, from its startup line.
func webAddr(t testing.TB, c *child) string {
	t.Helper()
	line, _ := c.log.waitFor(t, 0, "Web API on http://")
	rest := line[strings.Index(line, "http://")+len("http://"):]
	return rest[:strings.Index(rest, "/")]
}

// readyRole is the role and leader node a child's /readyz reports.
func readyRole(t testing.TB, c *child) (role, leader string) {
	t.Helper()
	resp, err := http.Get("http://" + webAddr(t, c) + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Role   string `json:"role"`
		Leader *struct {
			Node string `json:"node"`
		} `json:"leader"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("/readyz: %v: %s", err, b)
	}
	if body.Leader != nil {
		leader = body.Leader.Node
	}
	return body.Role, leader
}

// leaderMetric is the archivebot_leader gauge of a child's /metrics.
func leaderMetric(t testing.TB, c *child) string {
	t.Helper()
	resp, err := http.Get("http://" + webAddr(t, c) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "archivebot_leader ") {
			return strings.TrimPrefix(l, "archivebot_leader ")
		}
	}
	return ""
}

func msList(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, ms(d))
	}
	return strings.Join(out, " ")
}

func isJoinOf(channel string, nick func(string) bool) func(ircmsg.Message) bool {
	return func(m ircmsg.Message) bool {
		return m.Command == "JOIN" && nick(m.Nick()) && len(m.Params) > 0 && strings.EqualFold(m.Params[0], channel)
	}
}

// dyingJob queues raw with !a as u in ch and moves the job to working, as
// if a pipeline had taken it whose heartbeat never advances; it returns
// the job's ident.
func dyingJob(t *testing.T, rdb *redis.Client, u *irctest.User, ch, raw string) string {
	t.Helper()
	ctx := context.Background()
	url, id := identOf(t, raw)
	if r := ask(u, ch, "!a "+url); !strings.Contains(r, "Queued "+url) {
		t.Fatalf("!a: %q", r)
	}
	rdb.LRem(ctx, "pending", 0, id)
	rdb.HSet(ctx, id, "heartbeat", 1)
	rdb.LPush(ctx, keyWorking, id)
	return id
}

// haCluster is the world of one TestE2EHighAvailability subtest: a
// Redis master, two replicas and three sentinels, ngircd, and a client
// through the sentinels.
type haCluster struct {
	cl  *redistest.Cluster
	irc *irctest.Ngircd
	rdb *redis.Client
}

func newHACluster(t *testing.T) *haCluster {
	t.Helper()
	h := &haCluster{cl: redistest.StartCluster(t), irc: irctest.StartNgircd(t, irctest.NgircdOptions{})}
	h.rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: h.cl.SentinelAddrs()})
	t.Cleanup(func() { h.rdb.Close() })
	return h
}

// leaderIn starts a subtest with an op, a voiced and a plain user in its
// channel and node-a leading (its bot in the channel) ...
func (h *haCluster) leaderIn(t *testing.T, ch, leaseTTL string) (a *child, op, voice *irctest.User) {
	t.Helper()
	op, voice, _ = rolesIn(t, h.irc, ch)
	a = haLeader(t, h.irc, ch, h.cl, "node-a", leaseTTL)
	op.WaitBotIn(botNick, ch)
	return a, op, voice
}

// ... and leaseFree ends it with its nodes stopped and the lease free.
func (h *haCluster) leaseFree(t *testing.T) {
	t.Helper()
	testproc.Eventually(t, "the leader lease to be free", func() bool {
		n, err := h.rdb.Exists(context.Background(), "archivebot:leader").Result()
		return err == nil && n == 0
	})
}

func TestE2EHighAvailability(t *testing.T) {
	// Parallel (with the other tests that wait on their own servers and
	// child processes, e2e_process_test.go): its Redis is a cluster of its
	// own, not the process's real-Redis database; its nodes are children.
	// Each subtest has a cluster and an ngircd of its own, and they run
	// at once.
	t.Parallel()
	ctx := context.Background()

	// (a) kill -9 the leader while finish notices are being delivered and
	// a job is dying: the standby takes over within the lease time plus
	// one connection, delivers every notice (at most one twice: the line
	// in flight at the kill), and the death timer goes on where it was.
	t.Run("kill-leader", func(t *testing.T) {
		t.Parallel()
		h := newHACluster(t)
		cl, irc, rdb := h.cl, h.irc, h.rdb
		const ch = "#ha-kill"
		a, op, voice := h.leaderIn(t, ch, "2s")
		b := haStandby(t, irc, ch, cl, "node-b", "2s")
		if role, leader := readyRole(t, a); role != "leader" || leader != "node-a" {
			t.Errorf("node-a /readyz: role %q, leader %q", role, leader)
		}
		if role, leader := readyRole(t, b); role != "standby" || leader != "node-a" {
			t.Errorf("node-b /readyz: role %q, leader %q", role, leader)
		}
		if ga, gb := leaderMetric(t, a), leaderMetric(t, b); ga != "1" || gb != "0" {
			t.Errorf("archivebot_leader: node-a %q, node-b %q; want 1 and 0", ga, gb)
		}

		// A dying job: queued, taken by a "pipeline" whose heartbeat
		// never advances.
		id := dyingJob(t, rdb, voice, ch, "https://example.com/e2e/ha/dying")
		testproc.Eventually(t, "the death timer to climb", func() bool {
			v, err := rdb.HGet(ctx, id, "death_timer").Int()
			return err == nil && v >= 5
		})

		// Rounds: finish notices delivered at 20 lines/s, the leader
		// killed at the first line, the standby takes over, a fresh
		// standby is started. E2E_HA_KILLS raises the number of rounds.
		rounds := 1
		if n, err := strconv.Atoi(os.Getenv("E2E_HA_KILLS")); err == nil && n > 0 {
			rounds = n
		}
		leader, standby := a, b
		var took, answered []time.Duration
		var all []string
		dups := 0
		count := func(nid string) int { return countLines(botLines(op, ch), isFinishOf(nid)) }
		for r := 0; r < rounds; r++ {
			var ids []string
			for i := 0; i < 10; i++ {
				u, nid := identOf(t, fmt.Sprintf("https://example.com/e2e/ha/notice/%d/%d", r, i))
				pushNotice(t, rdb, notice("vera", ch, u))
				ids = append(ids, nid)
			}
			all = append(all, ids...)
			isBatch := func(s string) bool {
				for _, nid := range ids {
					if isFinishOf(nid)(s) {
						return true
					}
				}
				return false
			}
			op.Expect("a line of the batch", fromBot(ch, isBatch))
			before, _ := rdb.HGet(ctx, id, "death_timer").Int()
			from := standby.log.len()
			leader.kill()
			killed := time.Now()
			standby.log.waitFor(t, from, "took the leader lease")
			took = append(took, time.Since(killed))
			after, _ := rdb.HGet(ctx, id, "death_timer").Int()
			op.WaitBotIn(botNick, ch)
			if r := ask(voice, ch, "!status "+id); !strings.Contains(r, id) {
				t.Errorf("!status after the takeover: %q", r)
			}
			answered = append(answered, time.Since(killed))
			if r == 0 {
				// The new leader's first reaper cycles step the timer on
				// from where the old one left it.
				var next int
				testproc.Eventually(t, "the new leader's reaper to step the death timer", func() bool {
					v, err := rdb.HGet(ctx, id, "death_timer").Int()
					next = v
					return err == nil && v != after
				})
				if after < before || next < after {
					t.Errorf("death timer: %d before the kill, %d at the takeover, %d after the new leader's reaper ran; want it going on", before, after, next)
				}
				op.Expect("no heartbeat line", fromBot(ch, textHas("has had no heartbeat", id)))
			}
			testproc.Eventually(t, "every notice of the round delivered", func() bool {
				for _, nid := range ids {
					if count(nid) == 0 {
						return false
					}
				}
				return true
			})
			roundDups := 0
			for _, nid := range ids {
				roundDups += count(nid) - 1
			}
			if roundDups > 1 {
				t.Errorf("round %d: %d notices delivered twice after one kill; at most one (the line in flight) may be", r, roundDups)
			}
			dups += roundDups
			leader = standby
			if r+1 < rounds {
				standby = haStandby(t, irc, ch, cl, fmt.Sprintf("node-%d", r+2), "2s")
			}
		}
		t.Logf("kill -9 of the leader (lease_ttl 2s), %d rounds: standby took the lease after %v; answered a command after %v (kill to reply)",
			rounds, msList(took), msList(answered))
		if n := countLines(botLines(op, ch), textHas("has had no heartbeat", id)); n != 1 {
			t.Errorf("%d no-heartbeat lines, want 1", n)
		}
		t.Logf("%d pending notices: all delivered, %d twice (killed between the write and the acknowledgement)", len(all), dups)
		waitNoticesDrained(t, rdb)
		b = leader
		if code, took := b.term(); code != 0 {
			t.Errorf("node-b exit code %d after SIGTERM (%s)", code, ms(took))
		}
		h.leaseFree(t)
	})

	// (c) SIGSTOP the leader past its lease: the standby takes over under
	// an alternate nick (the frozen session still holds the nick); SIGCONT
	// the old leader: it steps down without sending a line or changing a
	// key. The new leader is frozen meanwhile (its lease still runs), so
	// that any change in Redis could only come from the old one.
	t.Run("freeze-leader", func(t *testing.T) {
		t.Parallel()
		h := newHACluster(t)
		cl, irc, rdb := h.cl, h.irc, h.rdb
		const ch = "#ha-freeze"
		a, op, voice := h.leaderIn(t, ch, "6s")
		// node-b's lease is long (renewed every 5 s) so that, frozen
		// below, it keeps the lease through the old leader's waking
		// with 10 s to spare even on a loaded machine: the checks must
		// see node-a waking under another node's lease, never a free
		// one it could take back. It polls every 1.5 s as a standby.
		b := haStandby(t, irc, ch, cl, "node-b", "15s")
		// Work for the services of both, so that the old leader has
		// writes to attempt when it wakes: a notice waiting, a dying job.
		id := dyingJob(t, rdb, voice, ch, "https://example.com/e2e/ha/frozen")

		from := b.log.len()
		// Stopped for certain before the command below is said: a
		// leader still running for a moment after the signal queued it
		// legitimately, and the test then blamed the waking node.
		if err := a.Freeze(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		// A command only the frozen leader hears (the standby is not in
		// the channel yet): when it wakes, it must not queue the job.
		lateURL, lateID := identOf(t, "https://example.com/e2e/ha/sent-to-the-frozen-leader")
		voice.Say(ch, "!a "+lateURL)
		b.log.waitFor(t, from, "took the leader lease")
		took := time.Since(stopped)
		m := op.Expect("the standby joining under another nick", isJoinOf(ch, func(n string) bool {
			return strings.HasPrefix(n, botNick) && n != botNick
		}))
		nickB := m.Nick()
		joined := time.Since(stopped)
		if r := strings.Join(voice.Ask(nickB, ch, "!status "+id), "\n"); !strings.Contains(r, id) {
			t.Errorf("!status to %s: %q", nickB, r)
		}
		t.Logf("SIGSTOP of the leader (lease_ttl 6s): standby took the lease after %s, joined as %s after %s, answering",
			ms(took), nickB, ms(joined))

		// Freeze the new leader: it renews every 5 s, so its lease has at
		// least 10 s left, which outlives the check below.
		b.Signal(syscall.SIGSTOP)
		defer b.Signal(syscall.SIGCONT)
		pushNotice(t, rdb, notice("vera", ch, "https://example.com/e2e/ha/after-freeze"))
		before, err := redistest.Dump(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		pos := op.Pos()
		afrom := a.log.len()
		a.Signal(syscall.SIGCONT)
		a.log.waitFor(t, afrom, "stepped down: standby")
		a.log.waitFor(t, afrom, "standby: another node leads")
		after, err := redistest.Dump(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			for k, v := range after {
				if bv, ok := before[k]; !ok || !reflect.DeepEqual(bv, v) {
					t.Errorf("key %s changed after the old leader woke: %+v -> %+v", k, before[k], v)
				}
			}
			for k := range before {
				if _, ok := after[k]; !ok {
					t.Errorf("key %s deleted after the old leader woke", k)
				}
			}
		}
		if n, _ := rdb.Exists(ctx, lateID).Result(); n != 0 {
			t.Errorf("the old leader queued %s, a command it heard while frozen", lateURL)
		}
		b.Signal(syscall.SIGCONT)
		// The old session's socket closed: the new leader takes the nick
		// back and answers under it.
		op.Expect("the new leader taking the nick back", func(m ircmsg.Message) bool {
			return m.Command == "NICK" && m.Nick() == nickB && len(m.Params) > 0 && m.Params[0] == botNick
		})
		if r := ask(voice, ch, "!status "+id); !strings.Contains(r, id) {
			t.Errorf("!status after the old leader woke: %q", r)
		}
		// Everything under the old leader's nick from its waking until
		// the new leader took that nick came from the old leader.
		for _, m := range op.Messages(pos) {
			if m.Command == "NICK" && m.Nick() == nickB {
				break
			}
			if m.Nick() != botNick {
				continue
			}
			if m.Command == "QUIT" && (len(m.Params) == 0 || !strings.Contains(m.Params[0], "ArchiveBot shutting down")) {
				continue // the server reporting the closed socket
			}
			l, _ := m.Line()
			t.Errorf("the old leader sent a line after it woke: %s", l)
		}
		if role, leader := readyRole(t, a); role != "standby" || leader != "node-b" {
			t.Errorf("node-a /readyz after waking: role %q, leader %q", role, leader)
		}
		fenced := strings.Contains(strings.Join(a.log.all()[afrom:], "\n"), "FENCED")
		if !t.Failed() {
			t.Logf("old leader woke: stepped down, no line sent, no key changed (a service write refused by the fence: %v)", fenced)
		}
		b.term()
		a.term()
		h.leaseFree(t)
	})

	// (b) Kill the Redis master: Sentinel promotes a replica; the node
	// keeps its IRC connection, answers "backend unavailable" (or "don't
	// know yet") meanwhile and then queues again; no job acknowledged
	// with Queued is lost.
	t.Run("kill-master", func(t *testing.T) {
		t.Parallel()
		h := newHACluster(t)
		cl, rdb := h.cl, h.rdb
		const ch = "#ha-master"
		// The operator queues: voiced users may have 5 jobs pending.
		a, op, _ := h.leaderIn(t, ch, "10s")
		oldMaster, err := cl.MasterAddr(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var acked []string // idents of jobs answered with Queued
		// One command, one first answer: while Redis is away, every
		// command (a marker too) answers "backend unavailable".
		queue := func(i int) string {
			url, id := identOf(t, fmt.Sprintf("https://example.com/e2e/ha/master/%d", i))
			op.Say(ch, "!a "+url)
			r := op.Reply(botNick, ch)
			if strings.Contains(r, "Queued "+url) {
				acked = append(acked, id)
				op.Reply(botNick, ch) // "Use !status … for updates"
			}
			return r
		}
		for i := 0; i < 5; i++ {
			if r := queue(i); !strings.Contains(r, "Queued") {
				t.Fatalf("before the kill: %q", r)
			}
		}
		pos := op.Pos()
		cl.Master.Kill()
		killed := time.Now()
		unavailable, unknown := 0, 0
		var resumed time.Duration
		for i := 5; ; i++ {
			r := queue(i)
			switch {
			case strings.Contains(r, "Queued"):
				resumed = time.Since(killed)
			case strings.Contains(r, "backend unavailable"):
				unavailable++
			case strings.Contains(r, "I don't know yet"):
				unknown++
			default:
				t.Fatalf("during the failover, !a answered %q", r)
			}
			if resumed > 0 {
				break
			}
			if time.Since(killed) > time.Minute {
				t.Fatal("no job queued within a minute of the master's death")
			}
			time.Sleep(200 * time.Millisecond)
		}
		newMaster, _ := cl.MasterAddr(ctx)
		t.Logf("master killed: %s promoted; the bot queued again %s after the kill (%d answers \"backend unavailable\", %d \"don't know yet\" meanwhile)",
			newMaster, ms(resumed), unavailable, unknown)
		if newMaster == oldMaster {
			t.Errorf("the sentinels still name %s", oldMaster)
		}
		for _, m := range op.Messages(pos) {
			if strings.HasPrefix(m.Nick(), botNick) && (m.Command == "QUIT" || m.Command == "JOIN") {
				l, _ := m.Line()
				t.Errorf("the bot lost its IRC connection during the failover: %s", l)
			}
		}
		for _, l := range botLines(op, ch)[0:] {
			if strings.Contains(l, "know") {
				t.Logf("follow-up: %s", l)
			}
		}
		pending, err := rdb.LRange(ctx, "pending", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range acked {
			if !containsString(pending, id) {
				t.Errorf("job %s was acknowledged with Queued but is not in pending after the failover", id)
			}
		}
		t.Logf("%d jobs acknowledged with Queued, all in pending on the new master", len(acked))
		if code, _ := a.term(); code != 0 {
			t.Errorf("exit code %d after SIGTERM", code)
		}
	})
}

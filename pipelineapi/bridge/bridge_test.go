package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func dial(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second,
		ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// takeCycle is upstream's reserve_job: scan_iter of pending:*, then
// RPOPLPUSH of each candidate queue until one gives a job.
func takeCycle(ctx context.Context, t testing.TB, c *redis.Client, queues ...string) string {
	t.Helper()
	iter := c.Scan(ctx, 0, "pending:*", 0).Iterator()
	for iter.Next(ctx) {
		t.Fatalf("SCAN listed %q: the node chooses named queues", iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	for _, q := range queues {
		id, err := c.RPopLPush(ctx, q, "working").Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			t.Fatalf("RPOPLPUSH %s: %v", q, err)
		}
		return id
	}
	return ""
}

func TestHandshakeAndTake(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	node.named = []string{"pending:bri"}
	node.queue("pending-ao", "ao1", nil)
	node.queue("pending:bri", "named1", nil)
	node.queue("pending", "plain1", nil)
	_, addr := startBridge(t, node)
	// go-redis sends HELLO 3 (refused with NOPROTO, as a Redis 5 would),
	// then CLIENT SETINFO and SELECT.
	c := redis.NewClient(&redis.Options{Addr: addr, DB: 3, Password: "old-secret", MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through the handshake: %v", err)
	}
	// First cycle: the bridge does not know yet whether the pipeline is
	// AO-only, so each queue is asked for on its own.
	if id := takeCycle(ctx, t, c, "pending-ao", "pending"); id != "ao1" {
		t.Fatalf("first take = %q, want ao1 (pending-ao asked first)", id)
	}
	// It asked for `pending`? No: pending-ao gave a job. Next cycle: the
	// pending-ao queue is empty, so `pending` is asked, and the node
	// chooses (named queue first).
	if id := takeCycle(ctx, t, c, "pending-ao", "pending"); id != "named1" {
		t.Fatalf("second take = %q, want named1 (the node chooses once pending was asked)", id)
	}
	// From now on the first RPOPLPUSH of a cycle lets the node choose,
	// and the rest of the cycle asks nothing.
	before := len(node.callList())
	if id := takeCycle(ctx, t, c, "pending-ao", "pending"); id != "plain1" {
		t.Fatalf("third take = %q, want plain1", id)
	}
	if id := takeCycle(ctx, t, c, "pending-ao", "pending"); id != "" {
		t.Fatalf("fourth take = %q, want none", id)
	}
	calls := node.callList()[before:]
	if want := []string{"take ", "take "}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls for two cycles after learning = %q, want %q (one take a cycle)", calls, want)
	}
	// complete_reservation: HMSET started_at/pipeline_id, HGETALL.
	if err := c.HMSet(ctx, "plain1", "started_at", "1.5", "pipeline_id", "pipeline:abc").Err(); err != nil {
		t.Fatal(err)
	}
	rec, err := c.HGetAll(ctx, "plain1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if rec["url"] != "http://example.com/plain1" || rec["pipeline_id"] != "pipeline:apiid" || rec["log_key"] != "plain1_log" {
		t.Errorf("HGETALL after take = %v", rec)
	}
	for _, call := range node.callList() {
		if strings.HasPrefix(call, "update plain1") {
			t.Errorf("HMSET of started_at/pipeline_id went to the node (%q): the take wrote them", call)
		}
	}
}

// holding starts a bridge on node with a client that took ident from
// pending (queued on node first).
func holding(ctx context.Context, t *testing.T, node *fakeNode, ident string) (*Bridge, *redis.Client) {
	t.Helper()
	node.queue("pending", ident, nil)
	b, addr := startBridge(t, node)
	c := dial(t, addr)
	if id := takeCycle(ctx, t, c, "pending"); id != ident {
		t.Fatalf("take = %q", id)
	}
	return b, c
}

func TestLogShipperBatch(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	_, c := holding(ctx, t, node, "j1")
	// upstream's ship_logs: SCRIPT EXISTS on its own, then one pipelined
	// batch of log script calls and counter increments.
	ex, err := c.ScriptExists(ctx, SHALog).Result()
	if err != nil || len(ex) != 1 || !ex[0] {
		t.Fatalf("SCRIPT EXISTS log = %v, %v", ex, err)
	}
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 70 {
			e, _ := json.Marshal(map[string]any{"type": "download", "url": fmt.Sprintf("http://example.com/%d", i), "response_code": 200})
			p.EvalSha(ctx, SHALog, []string{"j1"}, string(e), "updates", "j1_log")
		}
		p.HIncrBy(ctx, "j1", "bytes_downloaded", 1000)
		p.HIncrBy(ctx, "j1", "items_downloaded", 5)
		p.HIncrBy(ctx, "j1", "items_queued", 7)
		return nil
	})
	for _, cmd := range cmds {
		if cmd.Err() != nil && cmd.Err() != redis.Nil {
			t.Fatalf("%v: %v", cmd.Args(), cmd.Err())
		}
	}
	_ = err
	node.mu.Lock()
	ups := node.updates["j1"]
	node.mu.Unlock()
	// One update per read of the batch (TCP may cut it), never one per
	// entry.
	entries, incr := 0, map[string]int64{}
	for _, u := range ups {
		entries += len(u.Log)
		for k, v := range u.Incr {
			incr[k] += v
		}
	}
	if len(ups) > 10 || entries != 70 {
		t.Fatalf("%d updates carrying %d entries for one pipelined batch of 70", len(ups), entries)
	}
	if incr["bytes_downloaded"] != 1000 || incr["items_downloaded"] != 5 || incr["items_queued"] != 7 {
		t.Errorf("counters sent = %v", incr)
	}
	// The entries went in order, unchanged.
	var first map[string]any
	json.Unmarshal(ups[0].Log[0], &first)
	if first["url"] != "http://example.com/0" {
		t.Errorf("first entry = %s", ups[0].Log[0])
	}
	// A heartbeat on its own.
	if n, err := c.HIncrBy(ctx, "j1", "heartbeat", 1).Result(); err != nil || n != 1 {
		t.Errorf("heartbeat = %d, %v", n, err)
	}
}

func TestSettingsThroughSubscription(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	_, c := holding(ctx, t, node, "j2")
	ps := c.Subscribe(ctx, "archivebot:job:j2")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	// get_settings once, then the !d change arrives.
	v, _ := c.HMGet(ctx, "j2", "delay_min", "delay_max", "concurrency", "settings_age", "abort_requested", "suppress_ignore_reports", "ignore_patterns_set_key").Result()
	if v[0] != "250" || v[3] != "0" || v[4] != nil || v[6] != "j2_ignores" {
		t.Fatalf("settings before = %v", v)
	}
	age := node.changeSettings("j2", map[string]string{"delay_min": "1000", "delay_max": "2000"}, []string{"/ignored/"})
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil || msg.Payload != fmt.Sprint(age) {
		t.Fatalf("message = %v, %v; want age %d", msg, err, age)
	}
	v, _ = c.HMGet(ctx, "j2", "delay_min", "delay_max", "concurrency", "settings_age", "abort_requested", "suppress_ignore_reports", "ignore_patterns_set_key").Result()
	if v[0] != "1000" || v[1] != "2000" || v[3] != fmt.Sprint(age) {
		t.Errorf("settings after the message = %v: the record read after a control event must be fresh", v)
	}
	ig, err := c.SMembers(ctx, "j2_ignores").Result()
	if err != nil || !reflect.DeepEqual(ig, []string{"/ignored/"}) {
		t.Errorf("SMEMBERS = %v, %v", ig, err)
	}
	// !abort: abort_requested seen, mark_aborted, HGET aborted, mark_done.
	age = node.changeSettings("j2", map[string]string{"abort_requested": "true"}, nil)
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != fmt.Sprint(age) {
		t.Fatalf("abort message = %v, %v", msg, err)
	}
	if s, _ := c.HGet(ctx, "j2", "abort_requested").Result(); s != "true" {
		t.Fatalf("abort_requested = %q", s)
	}
	if err := c.EvalSha(ctx, SHAMarkAborted, []string{"j2"}, "updates").Err(); err != redis.Nil {
		t.Fatalf("mark_aborted: %v", err)
	}
	if s, _ := c.HGet(ctx, "j2", "aborted").Result(); s != "true" {
		t.Errorf("HGET aborted after mark_aborted = %q", s)
	}
	if err := c.EvalSha(ctx, SHAMarkDone, []string{"j2"}, 172800, "updates", 1700000100, `{"aborted":true}`, "j2_log").Err(); err != redis.Nil {
		t.Fatalf("mark_done: %v", err)
	}
	if err := c.HIncrBy(ctx, "j2", "heartbeat", 1).Err(); err == nil || !strings.Contains(err.Error(), "not_held") {
		t.Errorf("heartbeat after done: %v, want the node's not_held", err)
	}
}

// TestRefused: commands a pipeline never sends get a Redis error naming
// them and reach nothing.
func TestRefused(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	b, c := holding(ctx, t, node, "j3")
	before := node.callList()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"FLUSHALL"}, "'FLUSHALL' is refused"},
		{[]any{"FLUSHDB"}, "'FLUSHDB' is refused"},
		{[]any{"KEYS", "*"}, "'KEYS' is refused"},
		{[]any{"CONFIG", "GET", "*"}, "'CONFIG' is refused"},
		{[]any{"CONFIG", "SET", "requirepass", "x"}, "'CONFIG' is refused"},
		{[]any{"EVAL", "return redis.call('FLUSHALL')", "0"}, "'EVAL' is refused"},
		{[]any{"EVAL", "redis.call('hset', KEYS[1], 'aborted', 'true')", "1", "j3"}, "'EVAL' is refused"},
		{[]any{"SCRIPT", "LOAD", "return 1"}, "'SCRIPT LOAD' is refused"},
		{[]any{"SCRIPT", "FLUSH"}, "'SCRIPT FLUSH' is refused"},
		{[]any{"EVALSHA", "0000000000000000000000000000000000000000", "0"}, "NOSCRIPT"},
		{[]any{"GET", "jobs_completed"}, "'GET' is refused"},
		{[]any{"LPUSH", "pending", "x"}, "'LPUSH' is refused"},
		{[]any{"RPOPLPUSH", "working", "pending"}, "'RPOPLPUSH' is refused"},
		{[]any{"DEL", "j3"}, "'DEL' is refused"},
		{[]any{"SADD", "j3_ignores", ".*"}, "'SADD' is refused"},
		{[]any{"PUBLISH", "archivebot:job:j3", "99"}, "'PUBLISH' is refused"},
		{[]any{"SCAN", "0", "MATCH", "*"}, "'SCAN' is refused"},
		{[]any{"MULTI"}, "'MULTI' is refused"},
		{[]any{"PSUBSCRIBE", "*"}, "'PSUBSCRIBE' is refused"},
		{[]any{"SUBSCRIBE", "updates"}, "only the settings channel"},
		{[]any{"HGETALL", "pipeline:other"}, "not a job this pipeline holds"},
		{[]any{"HGET", "working", "x"}, "not a job this pipeline holds"},
	} {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if after := node.callList(); !reflect.DeepEqual(after, before) {
		t.Errorf("refused commands reached the node: %q", after[len(before):])
	}
	st := b.Stats()
	for _, n := range []string{"refused:flushall", "refused:keys", "refused:config", "refused:eval", "refused:script load"} {
		if st[n] == 0 {
			t.Errorf("%s not counted: %v", n, st)
		}
	}
	// The connection still works after the refusals.
	if err := c.HIncrBy(ctx, "j3", "heartbeat", 1).Err(); err != nil {
		t.Errorf("heartbeat after refusals: %v", err)
	}
}

// TestNotHeld: a job the node says this key does not hold is refused, and
// nothing is written for it.
func TestNotHeld(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	node.queue("another-pipelines-queue", "theirs", nil)
	_, c := holding(ctx, t, node, "mine")
	for _, args := range [][]any{
		{"HINCRBY", "theirs", "heartbeat", 1},
		{"EVALSHA", SHALog, 1, "theirs", `{"type":"stdout"}`, "updates", "theirs_log"},
		{"EVALSHA", SHAMarkDone, 1, "theirs", 172800, "updates", 1, "{}", "theirs_log"},
		{"EVALSHA", SHAMarkAborted, 1, "theirs", "updates"},
		{"HMSET", "theirs", "started_at", "1"},
		{"HGETALL", "theirs"},
	} {
		if err := c.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), "not_held") {
			t.Errorf("%v: %v, want not_held", args, err)
		}
	}
	for _, call := range node.callList() {
		if strings.Contains(call, "theirs") && !strings.HasPrefix(call, "job ") {
			t.Errorf("a write for a job not held reached the node: %q", call)
		}
	}
}

func TestReportAndUnregister(t *testing.T) {
	ctx := context.Background()
	node := newFakeNode()
	_, addr := startBridge(t, node)
	c := dial(t, addr)
	if err := c.HMSet(ctx, "pipeline:abc", "nickname", "vol", "version", "20190723.01", "ts", "1700000000").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.SAdd(ctx, "pipelines", "pipeline:abc").Result(); err != nil || n != 1 {
		t.Errorf("SADD = %d, %v", n, err)
	}
	if err := c.Publish(ctx, "archivebot:pipeline_updates", "pipeline:abc").Err(); err != nil {
		t.Error(err)
	}
	node.mu.Lock()
	rep := node.report
	node.mu.Unlock()
	if rep["nickname"] != "vol" || rep["version"] != "20190723.01" {
		t.Errorf("report = %v", rep)
	}
	if err := c.Del(ctx, "pipeline:abc").Err(); err != nil {
		t.Error(err)
	}
	if err := c.SRem(ctx, "pipelines", "pipeline:abc").Err(); err != nil {
		t.Error(err)
	}
	calls := node.callList()
	if !reflect.DeepEqual(calls, []string{"report", "unregister"}) {
		t.Errorf("calls = %q", calls)
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// The switch-over fixture: upstream's deployment, written by upstream's
// own code (testdata/migrate/produce.sh).
var migrateFixture = filepath.Join("..", "..", "testdata", "migrate", "upstream.redis.jsonl")

// fixture idents (see the fixture's comment lines).
const (
	fxRunning  = "ahvbs0nllden88y26j6ctyyey" // running on pipe-one
	fxGap      = "4vu3paf9m5xjm9wukq3ooxnn9" // finished while no control node ran
	fxBefore   = "63b65ur00hhsb4t3tvyk513cc" // finished and reported before
	fxAbort    = "2a7vxw928q0bewrxk8t5w7sfb" // running, abort requested
	fxDead     = "9abcssm71y5u5qedpe2svraqv" // left behind by pipe-dead
	fxQueuedAO = "b2anj7gjun2j9dxpse0icy92g"
	fxNamed    = "3xiwyr6pn6yo2vuun8xalb3sx" // pending:one
	fxLarge    = "ayw8x6a9g0txh8dv0ey7xml00"
	fxPlain    = "3f6pcx2r16i8on12114ojsm53"
)

// loadMigrateFixture loads the fixture into b with its times moved to now.
func loadMigrateFixture(t testing.TB, c redis.Cmdable) *redistest.Fixture {
	t.Helper()
	fx, err := redistest.ReadFixture(migrateFixture)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Load(context.Background(), c, true); err != nil {
		t.Fatal(err)
	}
	return fx
}

// migrateConfig is a node configuration in upstream's channel.
func migrateConfig(t testing.TB, extra string) string {
	return writeTemp(t, "archivebot.toml", `[irc]
server = "irc://127.0.0.1:1"
channels = ["#archivebot"]
`+extra)
}

// migrateCheck runs `archivebot migrate check ARGS -json` against url.
func migrateCheck(t *testing.T, url, cfg string, args ...string) (int, *migrateReport, string) {
	t.Helper()
	t.Setenv("REDIS_URL", url)
	code, out, errs := admin(t, nil, append(append([]string{"migrate", "check", "-config", cfg}, args...), "-json")...)
	var r migrateReport
	if code == 0 || code == exitBlocked {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("migrate check -json: %v in %q (stderr %q)", err, out, errs)
		}
	}
	return code, &r, out + errs
}

// findingAbout returns the first finding of list whose text has substr.
func findingAbout(list []finding, substr string) *finding {
	for i := range list {
		if strings.Contains(list[i].What, substr) {
			return &list[i]
		}
	}
	return nil
}

// TestMigrateCheckFixture: on upstream's state, the check finds every job
// in its state, the queues, both pipelines (one reporting, one silent two
// hours), the finish notice that waits, the job its dead pipeline left,
// the field the node does not know; nothing blocks (exit 0).
func TestMigrateCheckFixture(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		loadMigrateFixture(t, b.Client)
		code, r, out := migrateCheck(t, b.URL, migrateConfig(t, ""))
		if code != 0 {
			t.Fatalf("exit %d, want 0: %s", code, out)
		}
		want := map[string]int{"queued": 4, "running": 3, "finished": 2, "aborted": 0, "failed": 0}
		if !reflect.DeepEqual(r.Found.Jobs, want) {
			t.Errorf("jobs by state %v, want %v", r.Found.Jobs, want)
		}
		queues := map[string]int{}
		for _, q := range r.Found.Queues {
			queues[q.Name] = q.Length
		}
		if want := map[string]int{"pending": 1, "pending-ao": 1, "pending-large": 1, "pending:one": 1}; !reflect.DeepEqual(queues, want) {
			t.Errorf("queues %v, want %v", queues, want)
		}
		states := map[string]string{}
		for _, p := range r.Found.Pipelines {
			states[p.Nickname] = p.State + " " + p.Version + " " + strings.Join(p.Jobs, ",")
		}
		if want := map[string]string{"pipe-one": "reporting 20240101.abcdef0 " + fxAbort + "," + fxRunning,
			"pipe-dead": "silent 20240101.abcdef0 " + fxDead}; !reflect.DeepEqual(states, want) {
			t.Errorf("pipelines %v, want %v", states, want)
		}
		if r.Found.Notices != 1 || r.Found.Working != 3 || r.Found.Counters["jobs_completed"] != "2" {
			t.Errorf("notices %d, working %d, counters %v", r.Found.Notices, r.Found.Working, r.Found.Counters)
		}
		if f := findingAbout(r.Changes, "finish notices wait"); f == nil || !reflect.DeepEqual(f.Keys, []string{fxGap}) {
			t.Errorf("the waiting finish notice: %+v", f)
		}
		if f := findingAbout(r.Changes, "pipeline is gone, silent"); f == nil || len(f.Keys) != 1 || !strings.HasPrefix(f.Keys[0], fxDead+" on pipe-dead (silent for 2h") {
			t.Errorf("the job its dead pipeline left: %+v", f)
		}
		if f := findingAbout(r.Changes, "running jobs were taken before the node's first start"); f == nil || !strings.HasPrefix(f.What, "3 ") {
			t.Errorf("the start baseline: %+v", f)
		}
		if f := findingAbout(r.Notes, "fields the node does not know"); f == nil || !strings.HasPrefix(strings.Join(f.Keys, " "), "next_watermark (1 jobs") {
			t.Errorf("unknown fields: %+v", f)
		}
		if len(r.Blocks) != 0 {
			t.Errorf("blocks: %+v", r.Blocks)
		}
		// The text form says the same.
		_, text, _ := admin(t, nil, "migrate", "check", "-config", migrateConfig(t, ""))
		for _, w := range []string{"jobs: 4 queued, 3 running, 2 finished", "pipe-dead", "silent", "Nothing blocks the switch"} {
			if !strings.Contains(text, w) {
				t.Errorf("text output lacks %q:\n%s", w, text)
			}
		}
	})
}

// TestMigrateCheckWritesNothing: the check runs as a Redis user that may
// only read (ACL on a real redis-server: +@read, INFO, CLIENT LIST,
// PUBSUB NUMSUB; any write is refused with NOPERM and fails the check),
// and the database is the same before and after, on every backend.
func TestMigrateCheckWritesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		loadMigrateFixture(t, b.Client)
		url := b.URL
		if b.Real() {
			p := redistest.StartServer(t)
			admin := redis.NewClient(&redis.Options{Addr: p.Addr()})
			defer admin.Close()
			loadMigrateFixture(t, admin)
			// The user doc/migrating.md tells the operator to create.
			if err := admin.Do(ctx, docACLUser(t, "checkpw")...).Err(); err != nil {
				t.Fatal(err)
			}
			reader := redis.NewClient(&redis.Options{Addr: p.Addr(), Username: "migrate-check", Password: "checkpw"})
			defer reader.Close()
			if err := reader.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("the reader's SET: %v, want NOPERM (the ACL must refuse writes)", err)
			}
			b = &redistest.Backend{Name: "acl", Client: admin, URL: "redis://migrate-check:checkpw@" + p.Addr() + "/0"}
			url = b.URL
		}
		before := b.Dump(t)
		code, r, out := migrateCheck(t, url, migrateConfig(t, ""))
		if code != 0 || r.Found.Jobs["running"] != 3 {
			t.Fatalf("exit %d, running %d: %s", code, r.Found.Jobs["running"], out)
		}
		if after := b.Dump(t); !reflect.DeepEqual(before, after) {
			for k, v := range after {
				if !reflect.DeepEqual(before[k], v) {
					t.Errorf("%s changed: %v → %v", k, before[k], v)
				}
			}
			t.Fatalf("the check changed the database (%d keys before, %d after)", len(before), len(after))
		}
	})
}

// docACLUser is the ACL SETUSER command of doc/migrating.md's read-only
// user for the check, as the arguments of a Redis command, with its
// password placeholder replaced by password.
func docACLUser(t *testing.T, password string) []any {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "doc", "migrating.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		_, rest, ok := strings.Cut(line, "redis-cli ACL SETUSER ")
		if !ok {
			continue
		}
		args := []any{"ACL", "SETUSER"}
		for _, f := range strings.Fields(rest) {
			f = strings.Trim(f, "'")
			if f == ">CHOOSE-A-PASSWORD" {
				f = ">" + password
			}
			args = append(args, f)
		}
		return args
	}
	t.Fatal("doc/migrating.md has no redis-cli ACL SETUSER line")
	return nil
}

// TestMigrateCheckBlocks: each thing that blocks the switch is named and
// the exit status is 3: a queue that is not a list, a counter that is not
// an integer, upstream's log processes still subscribed to updates (and
// not when a node of ours is the subscriber), upstream's bot popping
// finish notices.
func TestMigrateCheckBlocks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		cfg := migrateConfig(t, "")
		loadMigrateFixture(t, b.Client)
		blocked := func(what string) *finding {
			t.Helper()
			code, r, out := migrateCheck(t, b.URL, cfg)
			f := findingAbout(r.Blocks, what)
			if code != exitBlocked || !r.Blocked || f == nil {
				t.Fatalf("exit %d, blocks %+v; want exit %d naming %q\n%s", code, r.Blocks, exitBlocked, what, out)
			}
			return f
		}
		clear := func() {
			t.Helper()
			if code, r, out := migrateCheck(t, b.URL, cfg); code != 0 {
				t.Fatalf("exit %d, blocks %+v\n%s", code, r.Blocks, out)
			}
		}

		b.Client.Set(ctx, "pending-ao", "oops", 0)
		if f := blocked("keys of the wrong type"); !strings.Contains(strings.Join(f.Keys, " "), "pending-ao is a string, not a list") {
			t.Errorf("wrong type: %+v", f)
		}
		b.Client.Del(ctx, "pending-ao")
		b.Client.RPush(ctx, "pending-ao", fxQueuedAO)
		b.Client.Set(ctx, "jobs_aborted", "many", 0)
		blocked("counters that are not integers")
		b.Client.Set(ctx, "jobs_aborted", "0", 0)
		clear()

		// Upstream's analyzer (updates-listener) still subscribed.
		sub := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr})
		defer sub.Close()
		ps := sub.Subscribe(ctx, "updates")
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		if f := blocked("subscribe to updates"); !strings.Contains(f.What, "each updates-listener") || !strings.Contains(f.Do, "pgrep -af") {
			t.Errorf("the finding does not say which processes, or how to find them: %+v", f)
		}
		// The same subscriber on a connection of a node of ours: not
		// upstream's (CLIENT LIST names it; miniredis has no CLIENT
		// LIST, so there the leader lease says a node runs).
		ps.Close()
		node := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr, ClientName: nodeClientName})
		defer node.Close()
		nps := node.Subscribe(ctx, "updates")
		defer nps.Close()
		if _, err := nps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		if !b.Real() {
			b.Client.Set(ctx, store.KeyLeader, "1 node-a 1700000000000", time.Minute)
		}
		clear()

		if b.Real() {
			// Upstream's bot: its finish notifier LPOPs every 30 s.
			bot := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr, DB: b.Client.Options().DB})
			defer bot.Close()
			bot.LPop(ctx, "finish_notifications_elsewhere")
			blocked("upstream's bot seems connected")
		}
	})
}

// TestMigrateVersions: the Redis versions the node's scripts need.
func TestMigrateVersions(t *testing.T) {
	for v, ok := range map[string]bool{"7.0.15": true, "6.0.6": true, "6.2.0": true, "6.0.5": false, "5.0.14": false, "10.0": true, "6": false} {
		if got := versionAtLeast(v, minRedis); got != ok {
			t.Errorf("versionAtLeast(%q) = %v, want %v", v, got, ok)
		}
		r := &migrateReport{}
		judgeRedis(r, &store.Survey{Redis: store.RedisFacts{Version: v, Role: "master", Mode: "standalone"}})
		if (len(r.Blocks) == 0) != ok {
			t.Errorf("Redis %s: blocks %+v", v, r.Blocks)
		}
	}
	r := &migrateReport{}
	judgeRedis(r, &store.Survey{Redis: store.RedisFacts{Version: "7.2.4", Role: "slave", ClusterEnabled: true}})
	if len(r.Blocks) != 2 {
		t.Errorf("a cluster replica: blocks %+v", r.Blocks)
	}
}

// TestMigrateRollbackBlocks: going back is blocked by jobs running on the
// pipeline API (upstream's bot cannot let them report or finish) and by
// finish notices a stopped node had taken but not said; start notices
// not said are a note (upstream has none).
func TestMigrateRollbackBlocks(t *testing.T) {
	cfg := &config.Config{}
	cfg.Notifier.PipelineSilentAfter.Duration = time.Minute
	sv := &store.Survey{Keys: map[string]int{"ours": 3}, Working: []string{"apijob"},
		Jobs:       []store.SurveyJob{{Ident: "apijob", State: "running", Fields: map[string]string{"url": "http://a.example/", "pipeline_id": "pipeline:api1"}}},
		Pipelines:  []store.SurveyPipeline{{Key: "pipeline:api1", InSet: true, HasRecord: true, Fields: map[string]string{"api_key": "alpha", "nickname": "alpha", "ts": "1"}}},
		Processing: map[string]int{store.KeyFinishProcessing: 2, store.KeyStartNotifications: 1}}
	r := judge(sv, cfg, true, time.Now())
	if !r.Blocked || findingAbout(r.Blocks, "pipeline API") == nil || findingAbout(r.Blocks, "2 finish notices") == nil {
		t.Errorf("blocks %+v", r.Blocks)
	}
	if findingAbout(r.Notes, "start and operator notices") == nil || findingAbout(r.Notes, "pipeline records of the node's pipeline API") == nil {
		t.Errorf("notes %+v", r.Notes)
	}
	sv.Working, sv.Processing = nil, nil
	sv.Jobs[0].State = "finished"
	if r := judge(sv, cfg, true, time.Now()); r.Blocked {
		t.Errorf("blocks %+v", r.Blocks)
	}
}

// TestMigrateCheckGhostsAndStrays: a pipeline's late write after a job
// ended (a hash without url) is a ghost, in working or not; another
// program's hash whose name looks like an ident is neither a job nor a
// ghost; a member of working without a record is named.
func TestMigrateCheckGhostsAndStrays(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		loadMigrateFixture(t, b.Client)
		b.Client.HSet(ctx, "ghostinworking", "heartbeat", "7")
		b.Client.RPush(ctx, "working", "ghostinworking", "nosuchjob")
		b.Client.HSet(ctx, "ghostelsewhere", "log_score", "3")
		b.Client.HSet(ctx, "settings", "colour", "blue")
		code, r, out := migrateCheck(t, b.URL, migrateConfig(t, ""))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		if f := findingAbout(r.Changes, "in working: the reaper deletes them"); f == nil || strings.Join(f.Keys, " ") != "ghostinworking" {
			t.Errorf("ghost in working: %+v", f)
		}
		if f := findingAbout(r.Changes, "outside working"); f == nil || strings.Join(f.Keys, " ") != "ghostelsewhere" {
			t.Errorf("ghost elsewhere: %+v", f)
		}
		if f := findingAbout(r.Changes, "members of working that are no job record"); f == nil || strings.Join(f.Keys, " ") != "nosuchjob" {
			t.Errorf("stray member of working: %+v", f)
		}
		if f := findingAbout(r.Notes, "neither upstream's nor the node's"); f == nil || strings.Join(f.Keys, " ") != "settings" {
			t.Errorf("another program's key: %+v", f)
		}
		if r.Found.Ghosts != 2 || r.Found.Jobs["running"] != 3 {
			t.Errorf("ghosts %d, running %d", r.Found.Ghosts, r.Found.Jobs["running"])
		}
	})
}

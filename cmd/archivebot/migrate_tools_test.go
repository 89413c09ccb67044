package main

// The rest of the switch-over's tooling (doc/migrating.md): what the
// check says about the feed and the connections it sees, the rollback's
// clean-up commands, and the simulator resuming a pipeline's jobs for a
// rehearsal.

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/tweeter"
)

// TestMigrateCheckFeed: running jobs whose "Archiving URL" text is in
// neither tweets:queue nor tweets:done get one queued once the node runs
// (as upstream's tweeter did, with a Twitter configuration); the check
// counts and names them, and says that with a feed network configured
// they are posted at the start. A job whose text is known, or whose
// abort was requested, is not among them.
func TestMigrateCheckFeed(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		fx := loadMigrateFixture(t, b.Client)
		code, r, out := migrateCheck(t, b.URL, migrateConfig(t, ""))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		// fxAbort runs too, but its abort was requested: never tweeted.
		f := findingAbout(r.Changes, "running jobs have no \"Archiving URL\" text")
		// Nothing to do about it: no "→" line.
		if f == nil || !reflect.DeepEqual(f.Keys, []string{fxDead, fxRunning}) || r.Found.FeedNew != 2 || !strings.Contains(f.What, "the dry run moves them to tweets:done") || f.Do != "" {
			t.Fatalf("the texts the node will queue: %+v (found %d)", f, r.Found.FeedNew)
		}
		b.Client.ZAdd(ctx, store.KeyTweetsDone, redis.Z{Score: 1, Member: tweeter.ArchivingText(fx.Hash(fxRunning)["url"])})
		mastodon := migrateConfig(t, "[tweeter.mastodon]\nserver = \"https://mastodon.example\"\naccess_token = \"tok\"\n")
		_, r, out = migrateCheck(t, b.URL, mastodon)
		f = findingAbout(r.Changes, "running jobs have no \"Archiving URL\" text")
		if f == nil || !reflect.DeepEqual(f.Keys, []string{fxDead}) || !strings.Contains(f.What, "posts them on mastodon") || !strings.Contains(f.What, "1 posts at the start") {
			t.Fatalf("with Mastodon, after one text was posted: %+v\n%s", f, out)
		}
		_, text, _ := admin(t, nil, "migrate", "check", "-config", mastodon)
		if !strings.Contains(text, "tweets: 0 queued, 1 done; running jobs without one: 1") {
			t.Errorf("text output:\n%s", text)
		}
	})
}

// TestMigrateCheckClients: the connections the check sees are told
// apart: its own (named archivebot-cli), a node's (archivebot), and the
// others (upstream's processes, anything else).
func TestMigrateCheckClients(t *testing.T) {
	p := redistest.StartServer(t)
	loader := redis.NewClient(&redis.Options{Addr: p.Addr()})
	loadMigrateFixture(t, loader)
	loader.Close()
	url := "redis://" + p.Addr() + "/0"
	t.Setenv("REDIS_URL", url)
	code, text, errs := admin(t, nil, "migrate", "check", "-config", migrateConfig(t, ""))
	if code != 0 || !strings.Contains(text, "clients: 0 of upstream's or others, 0 of a node of this project (named archivebot), ") ||
		!strings.Contains(text, " of this check and other archivebot commands (archivebot-cli)") || strings.Contains(text, "clients connected") {
		t.Fatalf("exit %d, stderr %q, output:\n%s", code, errs, text)
	}
	other := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer other.Close()
	other.Ping(context.Background())
	if _, r, out := migrateCheck(t, url, migrateConfig(t, "")); r.Found.Clients == nil || *r.Found.Clients-r.Found.OwnClients-r.Found.NodeClients != 1 || r.Found.OwnClients < 1 {
		t.Fatalf("one other client: %+v\n%s", r.Found, out)
	}
}

// TestMigrateRollbackNotes: the rollback check names the node's keys only
// when there are some, with the command that deletes them, and says what
// becomes of the texts left in tweets:queue.
func TestMigrateRollbackNotes(t *testing.T) {
	cfg := &config.Config{}
	sv := &store.Survey{Keys: map[string]int{}, Clients: []store.RedisClient{}, Tweets: map[string]int64{}}
	r := judge(sv, cfg, true, time.Now())
	var b bytes.Buffer
	printMigrate(&b, r)
	if r.Blocked || len(r.Notes) != 0 || !strings.Contains(b.String(), "Notes\n  none\n") {
		t.Fatalf("nothing of the node's left: %+v\n%s", r.Notes, b.String())
	}
	sv.Keys["ours"], sv.Tweets[store.KeyTweetsQueue] = 3, 2
	r = judge(sv, cfg, true, time.Now())
	if f := findingAbout(r.Notes, "3 keys of the node"); f == nil || !strings.Contains(f.Do, "archivebot migrate delete-node-keys -yes") {
		t.Errorf("the node's keys: %+v", r.Notes)
	}
	if f := findingAbout(r.Notes, "2 texts wait in tweets:queue"); f == nil || !strings.Contains(f.What, "upstream's tweeter posts them") {
		t.Errorf("the texts left: %+v", r.Notes)
	}
}

// TestMigrateReturnNotices: `archivebot migrate return-notices` puts the
// finish notices a stopped node had taken back at the head of
// finish_notifications, oldest first, before those already waiting, in
// one script; says when there is nothing to move; refuses while a node
// runs (a connection named archivebot, or the leader lease) and on a
// list of the wrong type, moving nothing.
func TestMigrateReturnNotices(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		cfg := migrateConfig(t, "")
		rdb := b.Client
		rdb.RPush(ctx, store.KeyFinishProcessing, "p1", "p2", "p3")
		rdb.RPush(ctx, store.KeyFinishNotifications, "n1")
		list := func(k string) string { l, _ := rdb.LRange(ctx, k, 0, -1).Result(); return strings.Join(l, " ") }

		// A node still runs: refused, nothing moved.
		if b.Real() {
			node := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ClientName: nodeClientName})
			node.Ping(ctx)
			adminRefused(t, b, []string{"still runs on this Redis (1 connections named \"archivebot\")", "nothing was moved"}, "migrate", "return-notices", "-config", cfg)
			node.Close()
			waitNoClient(t, rdb, nodeClientName)
		}
		rdb.Set(ctx, store.KeyLeader, "1 node-a 1700000000000", time.Minute)
		adminRefused(t, b, []string{"the leader lease is held", "nothing was moved"}, "migrate", "return-notices", "-config", cfg)
		rdb.Del(ctx, store.KeyLeader)
		if got := list(store.KeyFinishProcessing) + " | " + list(store.KeyFinishNotifications); got != "p1 p2 p3 | n1" {
			t.Fatalf("a refusal moved notices: %s", got)
		}

		code, out, errs := admin(t, b, "migrate", "return-notices", "-config", cfg)
		if code != 0 || !strings.Contains(out, "Moved 3 finish notices from archivebot:finish_notifications:processing back to the head of finish_notifications, oldest first") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
		if !b.Real() && !strings.Contains(errs, "warning: CLIENT LIST was refused") {
			t.Errorf("miniredis has no CLIENT LIST: the command must say what it could not check: %q", errs)
		}
		if got := list(store.KeyFinishNotifications); got != "p1 p2 p3 n1" {
			t.Errorf("finish_notifications %q, want the taken ones first, in order", got)
		}
		if n, _ := rdb.Exists(ctx, store.KeyFinishProcessing).Result(); n != 0 {
			t.Errorf("the processing list is still there")
		}
		if code, out, _ := admin(t, b, "migrate", "return-notices", "-config", cfg); code != 0 || !strings.Contains(out, "No finish notice to move back") {
			t.Errorf("again: exit %d, %q", code, out)
		}

		rdb.RPush(ctx, store.KeyFinishProcessing, "p4")
		rdb.Del(ctx, store.KeyFinishNotifications)
		rdb.Set(ctx, store.KeyFinishNotifications, "oops", 0)
		adminRefused(t, b, []string{"WRONGTYPE"}, "migrate", "return-notices", "-config", cfg)
		if got := list(store.KeyFinishProcessing); got != "p4" {
			t.Errorf("a refused move changed the processing list: %q", got)
		}
	})
}

// TestMigrateDeleteNodeKeys: `archivebot migrate delete-node-keys` counts
// the node's keys and deletes nothing; with -yes it deletes every
// archivebot:… key and no other; it refuses while the rollback check
// blocks (here: a paused queue's jobs, which would be lost).
func TestMigrateDeleteNodeKeys(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		cfg := migrateConfig(t, "")
		rdb := b.Client
		loadMigrateFixture(t, rdb)
		for i := 0; i < 1200; i++ { // more than one SCAN batch
			rdb.RPush(ctx, store.KeyHistory(fmt.Sprintf("job%04d", i)), `{"event":"queued"}`)
		}
		rdb.SAdd(ctx, store.KeyQueues, "pending:one")
		before, _ := rdb.Keys(ctx, "*").Result()

		if code, out, errs := admin(t, b, "pause", "pending-ao", "-config", cfg); code != 0 {
			t.Fatalf("pause: %d %s %s", code, out, errs)
		}
		adminRefused(t, b, []string{"paused queues", "archivebot resume pending-ao", "nothing was deleted"}, "migrate", "delete-node-keys", "-yes", "-config", cfg)
		if code, out, errs := admin(t, b, "resume", "pending-ao", "-config", cfg); code != 0 {
			t.Fatalf("resume: %d %s %s", code, out, errs)
		}
		rdb.Del(ctx, store.KeyHistory(fxQueuedAO)) // the pause wrote one

		code, out, errs := admin(t, b, "migrate", "delete-node-keys", "-config", cfg)
		if code != 0 || !strings.Contains(out, "1201 keys of the node (archivebot:…) are on this Redis: history 1200, queues 1.") || !strings.Contains(out, "Nothing was deleted. Run again with -yes") {
			t.Fatalf("without -yes: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		if after, _ := rdb.Keys(ctx, "*").Result(); len(after) != len(before) {
			t.Fatalf("without -yes, %d keys became %d", len(before), len(after))
		}
		code, out, errs = admin(t, b, "migrate", "delete-node-keys", "-yes", "-config", cfg)
		if code != 0 || !strings.Contains(out, "Deleted 1201 keys of the node (archivebot:…); no other key was touched.") {
			t.Fatalf("-yes: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		after, _ := rdb.Keys(ctx, "*").Result()
		if ours, _ := rdb.Keys(ctx, "archivebot:*").Result(); len(ours) != 0 || len(after) != len(before)-1201 {
			t.Fatalf("left: %d keys of the node, %d in all (from %d)", len(ours), len(after), len(before))
		}
		if code, out, _ := admin(t, b, "migrate", "delete-node-keys", "-config", cfg); code != 0 || !strings.Contains(out, "No key of the node") {
			t.Errorf("again: exit %d, %q", code, out)
		}
		for _, args := range [][]string{{"migrate", "check", "-yes"}, {"migrate", "return-notices", "-rollback"}, {"migrate", "undo"}} {
			if code, _, _ := admin(t, b, append(args, "-config", cfg)...); code != 2 {
				t.Errorf("archivebot %v: exit %d, want 2", args, code)
			}
		}
	})
}

// waitNoClient waits until no connection named name is left (a closed
// client's connection goes away asynchronously on the server).
func waitNoClient(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, _ := rdb.ClientList(context.Background()).Result()
		if !strings.Contains(l, " name="+name+" ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection named %s is still there:\n%s", name, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

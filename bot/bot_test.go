package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

func newTestBot(t *testing.T, be *redistest.Backend) *Bot {
	t.Helper()
	return New(store.New(be.Client), Options{Catalog: referenceCatalog(t)})
}

// eachWithJob runs test on each backend with a new bot that an op has
// just asked to archive http://example.com/ (refIdent) with args.
func eachWithJob(t *testing.T, args string, test func(t *testing.T, be *redistest.Backend, b *Bot)) {
	t.Helper()
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		say(b, RankOp, "#a", "!a http://example.com/"+args)
		test(t, be, b)
	})
}

func say(b *Bot, rank Rank, channel, text string) []string {
	rec := &recorder{nick: "carol"}
	b.Handle(context.Background(), Request{Nick: "carol", Channel: channel, Rank: rank, Text: text}, rec)
	return rec.replies
}

func keyCount(t *testing.T, be *redistest.Backend) int64 {
	t.Helper()
	n, err := be.Client.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every malformed !a variant gets a reply with the reason and writes nothing.
func TestBadArchiveInput(t *testing.T) {
	cases := []struct{ text, want string }{
		{"!a", "Usage: !archive URL"},
		{"!a   ", "Usage: !archive URL"},
		{"!a <", "Usage: !archive < URL"},
		{"!a mailto:someone@example.com", "don't understand the URL"},
		{"!a http:///path", "don't understand the URL"},
		{"!a example.com", "don't understand the URL you provided. Did you mean http://example.com? (A URL starts with http:// or https://.)"},
		{"!a //example.com/", "Did you mean http://example.com/?"},
		{"!a example.com:8080/a?b=1", "Did you mean http://example.com:8080/a?b=1?"},
		{"!a localhost", "Sorry, I don't understand the URL you provided."},
		{"!a gopher://example.com/", "I can only handle http, https, ftp"},
		{"!a http://example.info/ --frobnicate", "unknown argument '--frobnicate'"},
		{"!a http://example.info/ --delay", "'--delay' needs a value"},
		{"!a http://example.info/ --delay=fast", "whole number"},
		{"!a http://example.info/ --delay=12345678", "at most 7 digits"},
		{"!a http://example.info/ --delay=-5", "must not be negative"},
		{"!a http://example.info/ --concurrency=0", "between 1 and 99"},
		{"!a http://example.info/ --concurrency=100", "between 1 and 99"},
		{"!a http://example.info/ --delay=5 --delay=6", "more than once"},
		{"!a http://example.info/ --ignore-sets=blogs --igset=forums", "more than once"},
		{"!a http://example.info/ --large=yes", "takes no value"},
		{"!a http://example.info/ stray", "unexpected argument 'stray'"},
		{"!a http://example.info/ --explain=\"unterminated", "unmatched double quote"},
		{"!a http://example.info/ --explain=''", "note is empty"},
		{"!a http://example.info/ --explain=" + strings.Repeat("x", MaxNoteLen+1), "limit is 400"},
		{"!a http://example.info/ --pipeline=a*b", "pipeline name"},
		{"!a http://example.info/ --youtube-dl", "--youtube-dl is broken"},
		{"!a http://example.info/ --large --pipeline=fast", "--large has no effect"},
		{"!ao http://example.info/ --large", "--large has no effect"},
		{"!a http://example.info/ --user-agent-alias=netscape", `user agent "netscape"`},
		{"!a http://example.info/ --ignore-sets=", "needs set names"},
		{"!a http://example.info/" + strings.Repeat("a", MaxURLLen), "the limit is 4096"},
	}
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		for _, c := range cases {
			got := say(b, RankOp, "#archivebot", c.text)
			if len(got) != 1 || !strings.Contains(got[0], c.want) {
				t.Errorf("%q: replies %q, want one containing %q", c.text, got, c.want)
			}
			if n := keyCount(t, be); n != 0 {
				t.Fatalf("%q wrote %d keys", c.text, n)
			}
		}
	})
}

// Malformed job-control commands get a usage line (or the reason) and
// change nothing; ordinary chat starting with "!" stays ignored.
func TestBadControlInput(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		before := be.Dump(t)
		id := refIdent
		cases := []struct{ text, want string }{
			{"!ig " + id, "Usage: !ignore IDENT PATTERN"},
			{"!ig", "Usage: !ignore"},
			{"!ig NOT-AN-IDENT x", "Usage: !ignore"},
			{"!ig " + id + " (unbalanced", "invalid pattern"},
			{"!ig " + id + " a{2,1}", "invalid pattern"},
			{"!con " + id + " 100", "Usage: !concurrency"},
			{"!con " + id + " x", "Usage: !concurrency"},
			{"!con " + id + " 0", "concurrency level must be at least 1"},
			{"!d " + id + " 5", "Usage: !delay"},
			{"!d " + id + " 5 12345678", "Usage: !delay"},
			{"!d " + id + " -1 5", "Usage: !delay"},
			{"!d " + id + " 800 100", "min delay must be less than or equal to max delay"},
			{"!igrep " + id + " maybe", "Usage: !ignorereports"},
			{"!igset " + id + " ,", "Usage: !ignoreset"},
			{"!explain " + id + " " + strings.Repeat("n", MaxNoteLen+1), "limit is 400"},
			{"!status a b", "Usage: !status"},
			{"!whereis", "Usage: !whereis"},
			{"!pending now", "Usage: !pending"},
			{"!abort nosuchjob", "don't know anything about nosuchjob"},
			{"!d nosuchjob 1 2", "don't know anything about nosuchjob"},
			{"!expire " + id, "does not yet have an expiry timer"},
		}
		for _, c := range cases {
			got := say(b, RankOp, "#a", c.text)
			if len(got) != 1 || !strings.Contains(got[0], c.want) {
				t.Errorf("%q: replies %q, want one containing %q", c.text, got, c.want)
			}
		}
		for _, chat := range []string{"!!!", "!yay we did it", "!A http://x/", "hello !a http://x/", "!"} {
			if got := say(b, RankOp, "#a", chat); len(got) != 0 {
				t.Errorf("chat %q got replies %q", chat, got)
			}
		}
		after := be.Dump(t)
		if len(before) != len(after) || before[id].Value.(map[string]string)["settings_age"] != after[id].Value.(map[string]string)["settings_age"] {
			t.Fatalf("bad commands changed state:\nbefore %v\nafter  %v", before, after)
		}
	})
}

// Permissions and places come from the table: state-changing commands are
// refused in private with a reason; read-only ones answer.
func TestPrivateAndPermissions(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		for _, cmd := range b.Commands() {
			text := cmd.Name + " " + refIdent + " x y"
			got := say(b, RankNone, "", text)
			if cmd.Mutates {
				if len(got) != 1 || !strings.Contains(got[0], "use it in a channel") {
					t.Errorf("private %q: %q", text, got)
				}
			} else if len(got) == 1 && strings.Contains(got[0], "use it in a channel") {
				t.Errorf("read-only %q refused in private", text)
			}
			switch cmd.Perm {
			case Op:
				if got := say(b, RankVoice, "#a", text); len(got) != 1 || !strings.Contains(got[0], "only channel operators may") {
					t.Errorf("voice %q: %q", text, got)
				}
			case Voice:
				if got := say(b, RankNone, "#a", text); len(got) != 1 || !strings.Contains(got[0], "only channel operators or voiced users may") {
					t.Errorf("plain %q: %q", text, got)
				}
			}
		}
		if n := keyCount(t, be); n != 0 {
			t.Fatalf("refused commands wrote %d keys", n)
		}
	})
}

func TestStatusURLAndLimits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := New(store.New(be.Client), Options{Catalog: referenceCatalog(t), PendingLimit: 2})
		if got := say(b, RankNone, "#a", "!status http://nothing.example/"); len(got) != 1 || !strings.Contains(got[0], "URL has not been archived recently") {
			t.Fatalf("status of unknown URL: %q", got)
		}
		say(b, RankVoice, "#a", "!a http://one.example/")
		say(b, RankVoice, "#a", "!a http://two.example/")
		got := say(b, RankNone, "#a", "!status HTTP://ONE.example:80")
		if len(got) != 1 || !strings.Contains(got[0], "<http://one.example/>") || !strings.Contains(got[0], "In queue") {
			t.Fatalf("status by URL: %q", got)
		}
		// The queue is full for voiced users, but "already exists" wins.
		if got := say(b, RankVoice, "#a", "!a http://one.example/"); !strings.Contains(got[0], "already exists") {
			t.Fatalf("existing job with full queue: %q", got)
		}
		if got := say(b, RankVoice, "#a", "!a http://three.example/"); len(got) != 1 || !strings.Contains(got[0], "only channel operators may") {
			t.Fatalf("pending limit: %q", got)
		}
		if got := say(b, RankOp, "#a", "!a http://three.example/"); !strings.HasPrefix(got[0], "carol: Queued") {
			t.Fatalf("op over the limit: %q", got)
		}
		// !ao is not limited.
		if got := say(b, RankNone, "#a", "!ao http://four.example/"); !strings.HasPrefix(got[0], "carol: Queued") {
			t.Fatalf("!ao over the limit: %q", got)
		}
	})
}

func TestPendingLongQueue(t *testing.T) {
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	for i := 0; i < 25; i++ {
		say(b, RankOp, "#a", "!a http://site"+strings.Repeat("x", i)+".example/")
	}
	got := say(b, RankNone, "#a", "!pending")
	if len(got) != 12 || got[0] != "[privmsg carol] 25 pending jobs:" ||
		!strings.HasPrefix(got[1], "[privmsg carol] 1. http://site.example/ (") ||
		got[11] != "[privmsg carol] ... and 15 more in pending." {
		t.Fatalf("pending: %q", got)
	}
}

// Abort of a queued job finishes it at once; aborting it again says it has
// already finished; a running job only gets abort_requested and a
// published settings change.
func TestAbort(t *testing.T) {
	t.Parallel() // on the real server FastForward sleeps out a TTL: time the CPU can spend elsewhere
	eachWithJob(t, " --pipeline=fast", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		got := say(b, RankVoice, "#a", "!abort "+refIdent)
		if len(got) != 1 || !strings.Contains(got[0], "aborted") || !strings.Contains(got[0], refIdent) {
			t.Fatalf("abort queued: %q", got)
		}
		if n, _ := be.Client.Exists(ctx, "pending:fast").Result(); n != 0 {
			t.Fatal("aborted job still queued")
		}
		if n, _ := be.Client.LLen(ctx, store.KeyFinishNotifications).Result(); n != 1 {
			t.Fatalf("finish notifications: %d", n)
		}
		got = say(b, RankVoice, "#a", "!abort "+refIdent)
		if len(got) != 1 || !strings.Contains(got[0], "already finished") {
			t.Fatalf("abort finished: %q", got)
		}
		if n, _ := be.Client.LLen(ctx, store.KeyFinishNotifications).Result(); n != 1 {
			t.Fatal("second abort wrote another notification")
		}
		be.FastForward(6 * time.Second)
		if n, _ := be.Client.Exists(ctx, refIdent).Result(); n != 0 {
			t.Fatal("aborted job did not expire in 5 s")
		}

		// A running job: a pipeline took it.
		say(b, RankOp, "#a", "!a http://example.com/")
		be.Client.RPopLPush(ctx, store.KeyPending, store.KeyWorking)
		be.Client.HSet(ctx, refIdent, "started_at", "1.5", "pipeline_id", "pipeline:abc")
		sub := be.Client.Subscribe(ctx, store.ChannelJob(refIdent))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		got = say(b, RankVoice, "#a", "!abort "+refIdent)
		if len(got) != 1 || !strings.Contains(got[0], "Initiated abort") {
			t.Fatalf("abort running: %q", got)
		}
		select {
		case msg := <-sub.Channel():
			age, _ := be.Client.HGet(ctx, refIdent, "settings_age").Result()
			if msg.Payload != age || age != "5" {
				t.Fatalf("published age %q, stored %q", msg.Payload, age)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no settings age published")
		}
		if v, _ := be.Client.HGet(ctx, refIdent, "abort_requested").Result(); v != "true" {
			t.Fatal("abort_requested not set")
		}
		if n, _ := be.Client.LLen(ctx, store.KeyWorking).Result(); n != 1 {
			t.Fatal("running job left working")
		}
	})
}

// Settings changes on a running job reach a pipeline the way upstream's
// does it: it hears the new age on archivebot:job:IDENT, re-reads the
// settings, and on abort_requested aborts and marks the job done.
func TestRunningJobSeesChangesAndAbort(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		p := pipelinesim.New(be.Client, pipelinesim.Config{Nickname: "sim"})
		j, err := p.Take(ctx)
		if err != nil || j == nil {
			t.Fatalf("take: %v %v", j, err)
		}
		sub := be.Client.Subscribe(ctx, store.ChannelJob(refIdent))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		nextAge := func() int64 {
			t.Helper()
			select {
			case m := <-sub.Channel():
				n, err := strconv.ParseInt(m.Payload, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			case <-time.After(5 * time.Second):
				t.Fatal("no settings age published")
				return 0
			}
		}

		say(b, RankVoice, "#a", "!d "+refIdent+" 500 750")
		if ended, err := j.SettingsChanged(ctx, nextAge()); ended || err != nil {
			t.Fatalf("delay change ended the job: %v", err)
		}
		if s, _ := j.Settings(ctx); s.DelayMin != "500" || s.DelayMax != "750" || s.Age != 5 {
			t.Fatalf("pipeline read %+v", s)
		}
		say(b, RankVoice, "#a", `!ig `+refIdent+` ^https?://[^/]+/(?!keep)`)
		nextAge()
		if s, _ := j.Settings(ctx); !strings.Contains(strings.Join(s.IgnorePatterns, " "), "(?!keep)") {
			t.Fatalf("pipeline did not see the pattern: %v", s.IgnorePatterns)
		}
		say(b, RankVoice, "#a", "!yahoo "+refIdent)
		if age := nextAge(); age != 9 {
			t.Fatalf("yahoo published age %d, want 9 (+3)", age)
		}

		if got := say(b, RankVoice, "#a", "!abort "+refIdent); !strings.Contains(got[0], "Initiated abort") {
			t.Fatalf("abort: %q", got)
		}
		ended, err := j.SettingsChanged(ctx, nextAge())
		if err != nil || !ended {
			t.Fatalf("pipeline did not end the aborted job: %v", err)
		}
		m, _ := be.Client.HGetAll(ctx, refIdent).Result()
		if m["aborted"] != "true" || m["finished_at"] == "" {
			t.Fatalf("record after abort: %v", m)
		}
		if got := say(b, RankNone, "#a", "!status "+refIdent); !strings.Contains(got[0], "Aborted.") {
			t.Fatalf("status: %q", got)
		}
	})
}

func TestIgnorePatterns(t *testing.T) {
	for _, ok := range []string{
		`^https?://[^/]+/(?!wp-content)`, `(?=.*\?page=)`, `.*?foo`, `\d+`,
		`(?P<x>a)(?P=x)`, `{primary_url}wp-json/`, `^https?://{primary_netloc}/x`,
	} {
		if err := ValidatePattern(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{`(unbalanced`, `[z-a]`, `a**`, ``, "a\nb", strings.Repeat("a", MaxPatternLen+1)} {
		if err := ValidatePattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Editing an ignore-set file while the bot runs: the next !igset uses the
// new patterns; a broken pattern keeps the set's previous patterns.
func TestCatalogReload(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) {
		t.Helper()
		p := filepath.Join(dir, "custom.json")
		if err := os.WriteFile(p+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"name":"custom","patterns":["old"]}`)
	cat, err := LoadCatalog(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	be := redistest.Mini(t)
	b := New(store.New(be.Client), Options{Catalog: cat})
	say(b, RankOp, "#a", "!a http://example.com/")

	write(`{"name":"custom","patterns":["new1","new2"]}`)
	// Make the change visible even on filesystems with coarse mtimes.
	future := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(dir, "custom.json"), future, future)
	// The watcher (as the running bot starts it) picks the change up.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cat.Watch(ctx, 10*time.Millisecond); close(done) }()
	testproc.EventuallyWithin(t, 5*time.Second, "changed file reloaded by the watcher", func() bool {
		p, _ := cat.Set("custom")
		return len(p) == 2
	})
	cancel()
	<-done
	got := say(b, RankOp, "#a", "!igset "+refIdent+" custom")
	if len(got) != 1 || !strings.Contains(got[0], "Added 2 patterns from ignore set custom") {
		t.Fatalf("igset after reload: %q", got)
	}
	members, _ := be.Client.SMembers(context.Background(), refIdent+"_ignores").Result()
	if !strings.Contains(strings.Join(members, " "), "new2") || strings.Contains(strings.Join(members, " "), "old") {
		t.Fatalf("ignore set: %v", members)
	}

	write(`{"name":"custom","patterns":["(broken"]}`)
	later := future.Add(time.Minute)
	os.Chtimes(filepath.Join(dir, "custom.json"), later, later)
	cat.CheckReload()
	if p, _ := cat.Set("custom"); len(p) != 2 {
		t.Fatalf("a broken pattern replaced the set's last good patterns: %v", p)
	}
}

func TestSplitWords(t *testing.T) {
	cases := map[string][]string{
		`a b  c`:                        {"a", "b", "c"},
		`--explain="site closing soon"`: {"--explain=site closing soon"},
		`'it''s' "a \"q\"" x\ y`:        {"its", `a "q"`, "x y"},
		`""`:                            {""},
	}
	for in, want := range cases {
		got, err := splitWords(in)
		if err != nil || strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `--x=\"`, `"unterminated`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err == nil {
			for _, w := range words {
				if strings.ContainsAny(w, " \t") && !strings.ContainsAny(s, `"'\`) {
					t.Fatalf("word %q has a space but the input has no quoting", w)
				}
			}
		}
	})
}

func FuzzArchiveOptions(f *testing.F) {
	for _, s := range []string{"--delay=5 --concurrency 3", "--ignore-sets=a,b --large", "--explain 'x y'", "--pipeline=a --pipeline=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		o, err := parseArchiveOptions(words)
		if err != nil {
			return
		}
		if o.has("concurrency") && (o.Concurrency < 1 || o.Concurrency > 99) {
			t.Fatalf("concurrency %d accepted", o.Concurrency)
		}
		if o.Pipeline != "" && !pipelineNameRE.MatchString(o.Pipeline) {
			t.Fatalf("pipeline %q accepted", o.Pipeline)
		}
		if strings.ContainsAny(o.Explain, "\r\n\x00") {
			t.Fatalf("note %q accepted", o.Explain)
		}
	})
}

// The whole dispatch path must survive any input line.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{"!a http://example.com/ --delay=5", "!ig abc (?!x)", "!status http://x/", "!a < http://x/l.txt", "!pending"} {
		f.Add(s)
	}
	be := redistest.Mini(f)
	b := New(store.New(be.Client), Options{})
	f.Fuzz(func(t *testing.T, s string) {
		rec := &recorder{nick: "n"}
		b.Handle(context.Background(), Request{Nick: "n", Channel: "#c", Rank: RankOp, Text: s}, rec)
		for _, r := range rec.replies {
			if r == "n: " {
				t.Fatalf("empty reply to %q", s)
			}
		}
	})
}

func TestFail(t *testing.T) {
	eachWithJob(t, " --pipeline=slow", func(t *testing.T, be *redistest.Backend, b *Bot) {
		ctx := context.Background()
		if got := say(b, RankVoice, "#a", "!fail "+refIdent); !strings.Contains(got[0], "only channel operators may") {
			t.Fatalf("voice !fail: %q", got)
		}
		got := say(b, RankOp, "#a", "!fail "+refIdent)
		if len(got) != 1 || !strings.Contains(got[0], "failed") || !strings.Contains(got[0], refIdent) {
			t.Fatalf("!fail: %q", got)
		}
		// The report is the admin notice queued with the fail;
		// the reply only acknowledges it, in other words.
		if strings.Contains(got[0], "failed: removed from its queue") {
			t.Fatalf("!fail's reply reports the outcome a second time: %q", got)
		}
		notices, _ := be.Client.LRange(ctx, store.KeyAdminNotices, 0, -1).Result()
		if len(notices) != 1 || !strings.Contains(notices[0], `"channel":"#a"`) ||
			!strings.Contains(notices[0], "Job "+refIdent+" for http://example.com/ failed: removed from its queue, it will not run any more (failed by carol).") {
			t.Fatalf("admin notices after !fail: %q", notices)
		}
		m, _ := be.Client.HGetAll(ctx, refIdent).Result()
		if m["failed"] != "true" || m["failed_reason"] != "failed by carol" {
			t.Fatalf("record %v", m)
		}
		if n, _ := be.Client.Exists(ctx, "pending:slow").Result(); n != 0 {
			t.Fatal("failed job still queued")
		}
		if v, _ := be.Client.Get(ctx, store.KeyJobsFailed).Result(); v != "1" {
			t.Fatalf("jobs_failed = %q", v)
		}
		if got := say(b, RankOp, "#a", "!fail "+refIdent); !strings.Contains(got[0], "already finished") {
			t.Fatalf("second !fail: %q", got)
		}
		if n, _ := be.Client.LLen(ctx, store.KeyAdminNotices).Result(); n != 1 {
			t.Fatalf("a !fail of a failed job queued a line: %d notices", n)
		}
		if got := say(b, RankNone, "#a", "!status "+refIdent); !strings.Contains(got[0], "Failed: failed by carol") {
			t.Fatalf("status of failed job: %q", got)
		}
	})
}

// Redis going away is normal: commands say the backend is unavailable, and
// work again once it is back, without a restart.
func TestBackendUnavailable(t *testing.T) {
	t.Parallel() // it mostly waits for Redis to come back: time the CPU can spend elsewhere
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	say(b, RankOp, "#a", "!a http://example.com/")
	be.Mini.Close()
	for _, cmd := range []string{"!a http://example.org/", "!status", "!status " + refIdent, "!pending", "!abort " + refIdent, "!d " + refIdent + " 1 2"} {
		got := say(b, RankOp, "#a", cmd)
		if len(got) != 1 || !strings.Contains(got[0], "backend unavailable") {
			t.Errorf("%q with Redis down: %q", cmd, got)
		}
	}
	if err := be.Mini.Restart(); err != nil {
		t.Fatal(err)
	}
	// go-redis redials in the background about once a second after a
	// run of dial errors: the bot recovers by itself shortly after.
	testproc.Eventually(t, "!a to work again after Redis came back", func() bool {
		got := say(b, RankOp, "#a", "!a http://example.org/")
		if !strings.HasPrefix(got[0], "carol: Queued") {
			time.Sleep(90 * time.Millisecond) // one command every 100 ms, not a flood of them
			return false
		}
		return true
	})
}

func TestStatusOfRunningJob(t *testing.T) {
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	say(b, RankOp, "#a", "!a http://example.com/ --explain=closing")
	be.Client.HSet(context.Background(), refIdent, "started_at", "1.5", "pipeline_id", "pipeline:x",
		"bytes_downloaded", "12345678", "items_downloaded", "10", "items_queued", "130",
		"error_count", "3", "r2xx", "7", "r4xx", "2", "runk", "1")
	got := say(b, RankNone, "#a", "!status "+refIdent)
	want := "carol: Job " + refIdent + " <http://example.com/>. Started by carol. In progress. " +
		"Downloaded 12.35 MB, 3 errors, 120 queued. 3 workers, delay: 250.0, 375.0 ms. " +
		"Responses: 7 2xx, 0 3xx, 2 4xx, 0 5xx, 1 other. Note: closing"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("status:\n got %q\nwant %q", got, want)
	}
}

// cmdRecorder records the names of the commands a client sends.
type cmdRecorder struct{ names []string }

func (h *cmdRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.names = append(h.names, cmd.Name())
		return next(ctx, cmd)
	}
}
func (h *cmdRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.names = append(h.names, c.Name())
		}
		return next(ctx, cmds)
	}
}

// doc/upstream.md, No KEYS: upstream tested job existence with KEYS, which blocks Redis on
// a big keyspace. No command path may send KEYS.
func TestNoKeysCommand(t *testing.T) {
	be := redistest.Mini(t)
	b := newTestBot(t, be)
	h := &cmdRecorder{}
	be.Client.AddHook(h)
	for _, cmd := range []string{
		"!a http://example.com/", "!a http://example.com/", "!a http://example.com/ --user-agent-alias=nope",
		"!status", "!status " + refIdent, "!status http://example.com/", "!pending", "!whereis " + refIdent,
		"!ig " + refIdent + " x", "!abort " + refIdent, "!fail " + refIdent, "!expire " + refIdent,
	} {
		say(b, RankOp, "#a", cmd)
	}
	if len(h.names) == 0 {
		t.Fatal("no commands recorded")
	}
	for _, n := range h.names {
		if n == "keys" {
			t.Fatalf("KEYS was sent; commands: %v", h.names)
		}
	}
}

// Console reports (finish lines of console jobs) print on stdout, made
// safe; reports for IRC channels name the channel.
func TestConsoleAnnounce(t *testing.T) {
	var out strings.Builder
	c := &Console{Out: &out}
	c.Announce(context.Background(), ConsoleChannel, "me: Your job for http://x/ has finished. (abc)")
	c.Announce(context.Background(), "#irc", "bob: done\r\nINJECT")
	want := "me: Your job for http://x/ has finished. (abc)\n[#irc] bob: done\uFFFD\uFFFDINJECT\n"
	if out.String() != want {
		t.Fatalf("console printed %q, want %q", out.String(), want)
	}
}

// A key that is not a job record (a queue, a counter, some other program's
// key) is "not a job", never "something went wrong", and is left as it is.
func TestBadKey_StatusAbortNotAJob(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		ctx := context.Background()
		be.Client.LPush(ctx, "pending", "somejob")
		be.Client.Set(ctx, "jobs", "x", 0)
		b := newTestBot(t, be)
		for _, text := range []string{"!status pending", "!abort pending", "!status jobs", "!abort jobs", "!ig jobs foo", "!fail pending"} {
			got := say(b, RankOp, "#archivebot", text)
			if len(got) != 1 || !strings.Contains(got[0], "not a job") {
				t.Errorf("%q: replies %q, want one saying it is not a job", text, got)
			}
		}
		if n, _ := be.Client.LLen(ctx, "pending").Result(); n != 1 {
			t.Errorf("pending holds %d entries, want 1", n)
		}
		if v, _ := be.Client.Get(ctx, "jobs").Result(); v != "x" {
			t.Errorf("jobs = %q, want x", v)
		}
	})
}

// Every accepted command that changes state writes one INFO line
// msg=command with who, where, the command, the ident and the outcome;
// refused and read-only commands write none, and a URL's password does not
// reach the log.
func TestAuditLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		var buf bytes.Buffer
		b := New(store.New(be.Client), Options{Catalog: referenceCatalog(t),
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		say(b, RankOp, "#a", "!a http://example.com/")
		say(b, RankVoice, "#a", "!fail "+refIdent)  // refused: rank
		say(b, RankOp, "", "!abort "+refIdent)      // refused: private
		say(b, RankOp, "#a", "!status "+refIdent)   // reads only
		say(b, RankOp, "#a", "!d "+refIdent+" 1")   // usage
		say(b, RankOp, "#a", "!ig "+refIdent+" ^x") // accepted
		say(b, RankOp, "#a", "!a http://bob:hunter2@example.org/")
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			if m["msg"] == "command" {
				lines = append(lines, m)
			}
		}
		if len(lines) != 3 {
			t.Fatalf("%d audit lines, want 3:\n%s", len(lines), buf.String())
		}
		want := []map[string]string{
			{"nick": "carol", "where": "#a", "command": "!archive", "ident": refIdent, "outcome": "ok"},
			{"nick": "carol", "where": "#a", "command": "!ignore", "ident": refIdent, "outcome": "ok"},
			{"nick": "carol", "where": "#a", "command": "!archive", "outcome": "ok"},
		}
		for i, w := range want {
			if lines[i]["level"] != "INFO" {
				t.Errorf("line %d level %v", i, lines[i]["level"])
			}
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("line %d: %s = %v, want %q", i, k, lines[i][k], v)
				}
			}
			if r, _ := lines[i]["reply"].(string); r == "" {
				t.Errorf("line %d has no reply", i)
			}
		}
		if lines[2]["ident"] == "" {
			t.Error("!a line has no ident")
		}
		if strings.Contains(buf.String(), "hunter2") {
			t.Errorf("password logged:\n%s", buf.String())
		}
	})
}

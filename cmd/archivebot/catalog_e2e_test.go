package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// catalogConfig writes a configuration reading the ignore sets and user
// agents from sets and agents, with every listener on a free port.
func catalogConfig(t *testing.T, sets, agents string) (cfgPath, redisAddr string) {
	t.Helper()
	t.Setenv("REDIS_URL", "")
	t.Setenv("ARCHIVEBOT_CONFIG", "")
	freeListeners(t)
	redisAddr = freePort(t)
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", redisAddr)
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return writeTemp(t, "archivebot.toml", fmt.Sprintf("[jobs]\nignore_sets_dir = %q\nuser_agents_dir = %q\n", abs(sets), abs(agents))), redisAddr
}

// setNames reads the "name" of every .json file of dir, as a reader of
// upstream's files would.
func setNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(data, &s) == nil && s.Name != "" {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names
}

var queuedIdent = regexp.MustCompile(`Use !status ([0-9a-z]+) for updates`)

// startWithCatalog starts the node on the console with the configuration
// cfgPath, asks !igsets and a plain !a, and returns the node's output,
// its log, !igsets's answer and the patterns of the !a's job.
func startWithCatalog(t *testing.T, cfgPath, redisAddr string) (stdout, stderr, igsets string, ignores []string) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	var out, errb testproc.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"-config", cfgPath}, stdinR, &out, &errb) }()
	defer func() {
		stdinW.Close()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("the node exited %d:\n%s\n%s", code, out.String(), errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the node did not stop at the end of its input")
		}
	}()
	waitOut := func(what, s string) {
		t.Helper()
		testproc.EventuallyWithin(t, 30*time.Second, what, func() bool {
			select {
			case code := <-done:
				done <- code
				t.Fatalf("the node stopped (exit %d):\n%s\n%s", code, out.String(), errb.String())
			default:
			}
			return strings.Contains(out.String(), s)
		})
	}
	waitOut("the console's prompt", "ArchiveBot console.")
	io.WriteString(stdinW, "!igsets\n")
	waitOut("!igsets's answer", "Known ignore sets")
	io.WriteString(stdinW, "!a http://example.com/\n")
	waitOut("the !a's answer", "Use !status ")
	m := queuedIdent.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no ident in %q", out.String())
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ignores, err := rdb.SMembers(context.Background(), m[1]+"_ignores").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "Known ignore sets") {
			igsets = l
		}
	}
	return out.String(), errb.String(), igsets, ignores
}

// checkCatalogRun runs -check-config and a start on the directories:
// -check-config passes and says which catalog; the start says it too;
// !igsets names every set of the directory; a plain !a carries the
// directory's global set. It returns -check-config's stderr and the
// start's log.
func checkCatalogRun(t *testing.T, sets, agents string) (checkErr, startErr string) {
	t.Helper()
	cfg, redisAddr := catalogConfig(t, sets, agents)
	code, out, errs := checkRun(t, "-config", cfg)
	t.Logf("-check-config: exit %d\nstdout:\n%sstderr:\n%s", code, out, errs)
	abs, _ := filepath.Abs(sets)
	if code != 0 || !strings.Contains(out, "configuration OK") || !strings.Contains(out, "Ignore sets: ") ||
		!strings.Contains(out, " from "+abs+" (watched") {
		t.Fatalf("-check-config: exit %d, stdout %q; want OK and the directory named", code, out)
	}
	stdout, stderr, igsets, ignores := startWithCatalog(t, cfg, redisAddr)
	t.Logf("the start's standard output:\n%s", stdout)
	if !strings.Contains(stdout, "Ignore sets: ") || !strings.Contains(stdout, " from "+abs+" (watched") {
		t.Errorf("the start does not say which catalog is in use:\n%s", stdout)
	}
	names := setNames(t, sets)
	want := "Known ignore sets (from " + abs + "): " + strings.Join(names, ", ") + ". "
	if !strings.Contains(igsets, want) {
		t.Errorf("!igsets answered %q, want %q…", igsets, want)
	}
	data, err := os.ReadFile(filepath.Join(sets, "global.json"))
	if err != nil {
		t.Fatal(err)
	}
	var global struct {
		Patterns []string `json:"patterns"`
	}
	if err := json.Unmarshal(data, &global); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for _, p := range global.Patterns {
		if !slices.Contains(ignores, p) {
			missing++
		}
	}
	t.Logf("!igsets: %s\na plain !a carries %d patterns; the directory's global set has %d, %d of them missing", igsets, len(ignores), len(global.Patterns), missing)
	if missing > 0 || len(global.Patterns) == 0 {
		t.Errorf("a plain !a lacks %d of the global set's %d patterns", missing, len(global.Patterns))
	}
	return errs, stderr
}

// Fixture sets with upstream's properties: -check-config passes and names
// each refused pattern, agent and file with its file, set and reason as
// a warning; the start does too and runs, with every other set.
func TestCatalogFixturesCheckAndStart(t *testing.T) {
	sets := filepath.Join("..", "..", "testdata", "catalog", "ignore_patterns")
	agents := filepath.Join("..", "..", "testdata", "catalog", "user_agents")
	checkErr, startErr := checkCatalogRun(t, sets, agents)
	for _, log := range []string{checkErr, startErr} {
		for _, want := range []string{
			`broken.json: set broken: pattern \"^https?://[^/]+/(unclosed\" refused: error parsing regexp: missing closing )`,
			"pattern is 5016 bytes long; the limit is 4096",
			"notjson.json: file refused: not an ignore set: unexpected end of JSON input",
			`mixed.json: agent noname refused: no usable \"name\"`,
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the warnings do not say %q:\n%s", want, log)
			}
		}
		if n := strings.Count(log, "level=WARN msg=\"ignore sets / user agents: "); n != 4 {
			t.Errorf("%d catalog warnings, want 4:\n%s", n, log)
		}
	}
}

// The built-in sets are not mistaken for upstream's: -check-config and
// the start say so.
func TestCatalogBuiltInSaid(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	code, out, errs := checkRun(t, "-config", writeTemp(t, "c.toml", ""))
	if code != 0 || !strings.Contains(out, "Ignore sets: built in (4, not upstream's; jobs.ignore_sets_dir reads a checkout of upstream's db/ignore_patterns)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Upstream's own db/, unmodified (ARCHIVEBOT_UPSTREAM names a checkout of
// upstream's repository): -check-config passes with no warning, the node
// starts, !igsets names every set, a plain !a carries upstream's global
// set whole.
func TestUpstreamDB(t *testing.T) {
	up := os.Getenv(envUpstream)
	if up == "" {
		t.Skipf("%s not set: upstream's db/ not tried (the fixtures of TestCatalogFixturesCheckAndStart were)", envUpstream)
	}
	sets, agents := filepath.Join(up, "db", "ignore_patterns"), filepath.Join(up, "db", "user_agents")
	checkErr, startErr := checkCatalogRun(t, sets, agents)
	for _, log := range []string{checkErr, startErr} {
		if strings.Contains(log, `msg="ignore sets / user agents: `) || strings.Contains(log, "level=ERROR") {
			t.Errorf("upstream's db/ refused in part:\n%s", log)
		}
	}
}

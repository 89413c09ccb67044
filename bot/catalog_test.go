package bot

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// The fixture directories: sets and agents of our own with the
// properties of upstream's db/ (testdata/catalog/README).
var (
	fixtureSets   = filepath.Join("..", "testdata", "catalog", "ignore_patterns")
	fixtureAgents = filepath.Join("..", "testdata", "catalog", "user_agents")
)

// catalogRefused reads archivebot_catalog_refused_total{kind}.
func catalogRefused(t *testing.T, kind string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "archivebot_catalog_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Upstream's data as it is: a 1,060-byte pattern and lookarounds load; a
// pattern that does not compile and one over the limit are refused alone,
// named with file, set and reason in a WARN line and counted; the rest of
// their set and every other set load; a file that is not JSON is refused
// alone; files that are not .json are skipped and named.
func TestCatalogUpstreamShapedFixtures(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	beforePat, beforeFile, beforeAgent := catalogRefused(t, "pattern"), catalogRefused(t, "file"), catalogRefused(t, "agent")
	c, err := LoadCatalog(fixtureSets, fixtureAgents, log)
	if err != nil {
		t.Fatalf("one bad pattern stopped the load: %v", err)
	}
	if got, want := c.SetNames(), []string{"broken", "global", "long", "lookaround"}; !slices.Equal(got, want) {
		t.Fatalf("sets %v, want %v", got, want)
	}
	long, _ := c.Set("long")
	if len(long) != 2 || len(long[1]) != 1060 {
		t.Fatalf("long set: %d patterns, the second %d bytes; want 2, the 1,060-byte one loaded", len(long), len(long[1]))
	}
	if look, _ := c.Set("lookaround"); len(look) != 4 {
		t.Fatalf("lookaround set: %q, want its 4 patterns", look)
	}
	broken, _ := c.Set("broken")
	if want := []string{`^https?://[^/]+/calendar/`, `^https?://[^/]+/tag/[^/]+/page/\d+`}; !slices.Equal(broken, want) {
		t.Fatalf("broken set: %q, want its two good patterns %q", broken, want)
	}
	for alias, want := range map[string]string{"ff": "FixtureFox/999.0", "fixturebot": "FixtureBot/1.0", "plain": "Plain/2.0"} {
		if ua, ok := c.UserAgent(alias); !ok || !strings.Contains(ua, want) {
			t.Errorf("agent %s = %q, %v; want %s", alias, ua, ok, want)
		}
	}
	if _, ok := c.UserAgent("noname"); ok {
		t.Error("the agent without a name was loaded")
	}

	probs := c.Problems()
	var lines []string
	for _, p := range probs {
		lines = append(lines, p.String())
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		filepath.Join(fixtureSets, "broken.json") + `: set broken: pattern "^https?://[^/]+/(unclosed" refused: `,
		filepath.Join(fixtureSets, "broken.json") + `: set broken: pattern "^https?://[^/]+/aaaa`,
		"pattern is 5016 bytes long; the limit is 4096",
		filepath.Join(fixtureSets, "notjson.json") + ": file refused: not an ignore set: unexpected end of JSON input",
		filepath.Join(fixtureAgents, "mixed.json") + `: agent noname refused: no usable "name"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the problems do not say %q:\n%s", want, text)
		}
	}
	if len(probs) != 4 {
		t.Errorf("%d problems, want 4 (two patterns, a file, an agent):\n%s", len(probs), text)
	}
	for _, l := range lines {
		if !strings.Contains(logs.String(), l[:60]) {
			t.Errorf("no WARN line for %q:\n%s", l, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("problems not logged at WARN:\n%s", logs.String())
	}
	for kind, want := range map[string]float64{"pattern": 2, "file": 1, "agent": 1} {
		before := map[string]float64{"pattern": beforePat, "file": beforeFile, "agent": beforeAgent}[kind]
		if got := catalogRefused(t, kind) - before; got != want {
			t.Errorf("archivebot_catalog_refused_total{kind=%q} grew by %v, want %v", kind, got, want)
		}
	}
	d := c.Describe()
	for _, want := range []string{"Ignore sets: 4 from " + fixtureSets + " (watched; skipped, not .json: lang.py, update.sh)", "user agents: 4 aliases from " + fixtureAgents, "; 4 refused, named in the warnings"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe() = %q, want it to say %q", d, want)
		}
	}
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// writeLater replaces a file with a modification time in the future, so
// that the change is seen whatever the filesystem's time resolution.
func writeLater(t *testing.T, path, text string, step int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Duration(step) * time.Minute)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// A reload that finds a bad pattern keeps that set's last good patterns,
// says so, and still takes the other sets' changes; a file broken on
// reload keeps what it gave before; the repair is taken.
func TestCatalogReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	writeLater(t, filepath.Join(dir, "a.json"), `{"name":"a","patterns":["^a1","^a2"]}`, 0)
	writeLater(t, filepath.Join(dir, "b.json"), `{"name":"b","patterns":["^b1"]}`, 0)
	var logs bytes.Buffer
	c, err := LoadCatalog(dir, "", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || len(c.Problems()) != 0 {
		t.Fatalf("load: %v %v", err, c.Problems())
	}

	writeLater(t, filepath.Join(dir, "a.json"), `{"name":"a","patterns":["^a1","^a3","(bad"]}`, 1)
	writeLater(t, filepath.Join(dir, "b.json"), `{"name":"b","patterns":["^b1","^b2"]}`, 1)
	if !c.CheckReload() {
		t.Fatal("the change was not reloaded")
	}
	if a, _ := c.Set("a"); !slices.Equal(a, []string{"^a1", "^a2"}) {
		t.Errorf("set a after a reload with a bad pattern: %q, want its last good %q", a, []string{"^a1", "^a2"})
	}
	if b, _ := c.Set("b"); !slices.Equal(b, []string{"^b1", "^b2"}) {
		t.Errorf("set b (good) not reloaded: %q", b)
	}
	probs := c.Problems()
	if len(probs) != 1 || !strings.Contains(probs[0].String(), `a.json: set a: pattern "(bad" refused: `) ||
		!strings.Contains(probs[0].String(), "its 2 from the previous load stay in force") {
		t.Errorf("problems: %v", probs)
	}
	if !strings.Contains(logs.String(), `set a: pattern \"(bad\" refused`) {
		t.Errorf("the reload's refusal is not logged:\n%s", logs.String())
	}

	writeLater(t, filepath.Join(dir, "b.json"), `{"name":"b","patterns":[`, 2)
	c.CheckReload()
	if b, _ := c.Set("b"); !slices.Equal(b, []string{"^b1", "^b2"}) {
		t.Errorf("set b after its file broke: %q, want what it had", b)
	}

	writeLater(t, filepath.Join(dir, "a.json"), `{"name":"a","patterns":["^a1","^a3"]}`, 3)
	writeLater(t, filepath.Join(dir, "b.json"), `{"name":"b","patterns":["^b3"]}`, 3)
	c.CheckReload()
	if a, _ := c.Set("a"); !slices.Equal(a, []string{"^a1", "^a3"}) {
		t.Errorf("set a after the repair: %q", a)
	}
	if b, _ := c.Set("b"); !slices.Equal(b, []string{"^b3"}) {
		t.Errorf("set b after the repair: %q", b)
	}
	if len(c.Problems()) != 0 {
		t.Errorf("problems after the repair: %v", c.Problems())
	}
}

// Built-in sets are not mistaken for upstream's: !igsets says which
// catalog is in use. With a directory, a plain !a carries that
// directory's global set, as upstream's bot adds its global set to
// every job.
func TestCatalogSourceSaidAndGlobalCarried(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := New(store.New(be.Client), Options{Catalog: DefaultCatalog()})
		got := say(b, RankOp, "#a", "!igsets")
		if len(got) != 1 || !strings.HasPrefix(got[0], "carol: Known ignore sets (built into the node, not upstream's): ") {
			t.Fatalf("!igsets with the built-in sets: %q", got)
		}

		c, err := LoadCatalog(fixtureSets, fixtureAgents, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		b = New(store.New(be.Client), Options{Catalog: c})
		got = say(b, RankOp, "#a", "!igsets")
		want := "carol: Known ignore sets (from " + fixtureSets + "): broken, global, long, lookaround. "
		if len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Fatalf("!igsets with a directory: %q, want %q…", got, want)
		}
		say(b, RankOp, "#a", "!a http://example.com/")
		members, err := be.Client.SMembers(context.Background(), refIdent+"_ignores").Result()
		if err != nil {
			t.Fatal(err)
		}
		global, _ := c.Set("global")
		for _, p := range global {
			if !slices.Contains(members, p) {
				t.Errorf("a plain !a lacks the directory's global pattern %q: %q", p, members)
			}
		}
	})
}

package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestProtocolScriptTable: the script table in doc/protocol.md (Scripts)
// lists every script in store/scripts/, and nothing else.
func TestProtocolScriptTable(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "store/scripts/*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".lua"))
	}
	doc, err := os.ReadFile(filepath.Join(root, "doc/protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Scripts\n")
	if !ok {
		t.Fatal("doc/protocol.md has no Scripts section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	// The first column of each table row: one or more `name`s.
	name := regexp.MustCompile("`([a-z0-9_]+)`")
	var got []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("doc/protocol.md's script table misses scripts/%s.lua", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("doc/protocol.md's script table lists %q, which is not in store/scripts/", g)
		}
	}
}

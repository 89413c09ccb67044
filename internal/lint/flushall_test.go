package lint

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoFlushAll: the packages' tests share one real redis-server, each in
// a database of its own (internal/redistest); a FlushAll in one package's
// test empties every other package's database mid-test. Tests flush their
// own database (FlushDB).
func TestNoFlushAll(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "flushall_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), ".FlushAll(") {
			rel, _ := filepath.Rel(root, p)
			t.Errorf("%s calls FlushAll: flush the test's own database (FlushDB) instead", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

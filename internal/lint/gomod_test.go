package lint

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoInstallable fails when `go install MODULE/cmd/archivebot@VERSION`
// could not work: the go command refuses to install from a module whose
// go.mod has a replace (or exclude) directive, and a nested go.mod cuts
// its directory out of the module, so code there cannot be built from the
// module's zip. The patched miniredis is therefore a package of this
// module (third_party/miniredis/PATCHES.md).
func TestGoInstallable(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
		Exclude []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	for _, r := range mod.Replace {
		t.Errorf("go.mod replaces %s with %s: `go install …@VERSION` refuses a module with a replace directive; make it a package of this module or depend on a published version",
			r.Old.Path, strings.TrimSpace(r.New.Path+" "+r.New.Version))
	}
	for _, e := range mod.Exclude {
		t.Errorf("go.mod excludes %s %s: `go install …@VERSION` refuses a module with an exclude directive", e.Path, e.Version)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" && path != filepath.Join(root, "go.mod") {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: a nested module is left out of this module's zip; `go install` would not build code that needs it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

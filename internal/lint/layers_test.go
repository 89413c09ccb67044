package lint

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/archiveteam/archivebot-go"

// layers places every package of the module (paths from the module root;
// a trailing / covers the packages under it) in the layers of
// doc/architecture.md (Layers): a package may import packages of its own
// layer and of the layers below, never of a layer above. A new package
// fails the test until it is placed here (and in the doc).
var layers = []struct {
	name     string
	packages []string
}{
	{"foundation", []string{"config", "ident", "internal/text", "internal/sitematch", "internal/clock", "internal/metrics", "internal/badkeys",
		"internal/run", "internal/retry", "internal/httpserve", "internal/refusal", "internal/testproc", "internal/testtls", "internal/redistest",
		"internal/lint", "pipelineapi/wire", "pipelineapi/client", "third_party/", "soak", "soak/"}},
	{"record", []string{"record"}},
	{"store", []string{"store", "store/storetest", "store/faultstore", "embeddedredis"}},
	{"words", []string{"news"}},
	{"services", []string{"coordinator", "tweeter"}},
	{"front ends", []string{"bot", "bot/irc", "bot/irc/irctest", "web", "pipelineapi", "pipelineapi/apitest",
		"pipelineapi/bridge", "pipelinesim"}},
	{"program", []string{"cmd/archivebot"}},
}

// onlyImports bounds what some packages import of the module beyond the
// foundation's internal leaves.
var onlyImports = map[string][]string{
	// The shared words are a leaf: front ends import them instead of the
	// services.
	"news": {"record"},
}

// coordinatorTestExempt are test files outside cmd/ that still build the
// services; each says why.
var coordinatorTestExempt = map[string]string{
	"web/stream_test.go":  "the stream rig runs the firehose and the updates listener into the hub and uses the hub's test hooks (beforeWrite, onJoin)",
	"web/metrics_test.go": "TestMetricsMove runs the services against the web fixture to see their metrics move",
}

type layeredPackage struct {
	ImportPath   string
	Dir          string
	Imports      []string
	TestImports  []string
	XTestImports []string
	TestGoFiles  []string
	XTestGoFiles []string
}

func layerOf(rel string) int {
	for i, l := range layers {
		for _, p := range l.packages {
			if rel == p || strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p) {
				return i
			}
		}
	}
	return -1
}

// TestLayers: no import of a package of the module points up a layer
// (doc/architecture.md, Layers), news imports only what it may, and no
// package outside cmd/ imports coordinator, tests included (the
// exceptions above aside).
func TestLayers(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	checked := 0
	for {
		var p layeredPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		from := layerOf(rel)
		if from < 0 {
			t.Errorf("package %s is in no layer: place it in internal/lint/layers_test.go and doc/architecture.md", rel)
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			to := strings.TrimPrefix(imp, modulePath+"/")
			if l := layerOf(to); l > from {
				t.Errorf("%s (%s) imports %s (%s): an import may not point up a layer", rel, layers[from].name, to, layers[l].name)
			}
			if allowed, ok := onlyImports[rel]; ok && !slices.Contains(allowed, to) && !(layerOf(to) == 0 && strings.HasPrefix(to, "internal/")) {
				t.Errorf("%s imports %s; it may import only %v and internal leaves", rel, to, allowed)
			}
		}
		if strings.HasPrefix(rel, "cmd/") || rel == "coordinator" {
			continue
		}
		if slices.Contains(p.Imports, modulePath+"/coordinator") {
			t.Errorf("%s imports coordinator: the shared words are in package news", rel)
		}
		tests := append(slices.Clone(p.TestImports), p.XTestImports...)
		if !slices.Contains(tests, modulePath+"/coordinator") {
			continue
		}
		for _, f := range append(slices.Clone(p.TestGoFiles), p.XTestGoFiles...) {
			src, err := readFile(p.Dir, f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src, []byte(`"`+modulePath+`/coordinator"`)) {
				if _, ok := coordinatorTestExempt[rel+"/"+f]; !ok {
					t.Errorf("%s/%s imports coordinator: move a test that builds services to cmd/archivebot, or use the package's store interface", rel, f)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked", checked)
	}
}

func readFile(dir, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, name))
}

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
// doc/architecture.md (Layers): a package may import packages of the
// layers below, and of its own layer only as sameLayer declares; never of
// a layer above. A new package fails the test until it is placed here
// (and in the doc).
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

// sameLayer are the imports a package's code (not its tests) may make of
// packages of its own layer, each with the reason. Within a tree
// (third_party/, soak/) packages import each other freely.
var sameLayer = map[string]map[string]string{
	"internal/run":        {"config": "the pub/sub backoff's bounds are config's defaults", "internal/retry": "Reconnect waits with the one backoff"},
	"internal/httpserve":  {"internal/run": "the listener's goroutines run under run.Guard"},
	"internal/badkeys":    {"internal/metrics": "the bad-member gauge", "internal/text": "member names are cleaned for the log"},
	"internal/redistest":  {"internal/testproc": "real servers are test processes", "third_party/miniredis": "the in-process backend"},
	"pipelineapi/client":  {"pipelineapi/wire": "the API's wire types", "internal/retry": "Take's retry and Retry-After"},
	"soak/check":          {"ident": "the idents of the jobs it checks, as the node derives them"},
	"store/storetest":     {"store": "a store on each backend"},
	"store/faultstore":    {"store": "it wraps the store"},
	"bot/irc":             {"bot": "the IRC front end runs the command layer"},
	"web":                 {"bot": "the dashboard's actions run as commands (Bot.Handle)"},
	"pipelineapi/apitest": {"pipelineapi": "it runs the server for its clients' tests"},
	"pipelinesim":         {"pipelineapi/bridge": "API mode speaks Redis to the bridge, as upstream's pipeline does"},
}

// testOnly are the test helpers: only tests, and other test helpers, may
// import them.
var testOnly = []string{"internal/redistest", "internal/testproc", "internal/testtls", "bot/irc/irctest",
	"pipelineapi/apitest", "store/storetest", "store/faultstore"}

// testDrivers play other programs (a pipeline, IRC users); the tests of
// any layer may use them, above their own or not.
var testDrivers = map[string]string{
	"pipelinesim":     "plays a pipeline against Redis or the pipeline API",
	"bot/irc/irctest": "plays IRC users against a real ngircd",
}

// testUpExempt are test files that may import a package above their
// own layer; each says why.
var testUpExempt = map[string]string{
	"pipelineapi/client/example_test.go": "the client's runnable examples take, update and finish a job on a real node (apitest.StartNode), as a volunteer's pipeline does",
}

// onlyImports are allow-lists: what some small packages may import of the
// module, and nothing else (their own tests aside).
var onlyImports = map[string][]string{
	// The shared words are a leaf: front ends import them instead of the
	// services.
	"news": {"record"},
	// The job record, the wire format, the backoff and the pipeline
	// client import nothing of the node: river's rivertype, and what a
	// volunteer's pipeline links (TestClientLinks).
	"record":             {},
	"pipelineapi/wire":   {},
	"internal/retry":     {},
	"pipelineapi/client": {"pipelineapi/wire", "internal/retry"},
}

// services may be imported only by cmd/ (and by each other): front ends
// speak to them through package news.
var services = []string{"coordinator", "tweeter"}

// serviceTestExempt are test files outside cmd/ that still build the
// services; each says why.
var serviceTestExempt = map[string]string{
	"web/stream_test.go":           "the stream rig runs the firehose and the updates listener into the hub and uses the hub's test hooks (beforeWrite, onJoin)",
	"web/metrics_test.go":          "TestMetricsMove runs the services against the web fixture to see their metrics move",
	"web/stream_relaydrop_test.go": "TestStreamRelayDroppedTold runs the API log's publisher and listener into the stream rig's hub, to see a client told the publisher's drops",
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

// tree is the root of a tree whose packages import each other freely
// ("" for none).
func tree(rel string) string {
	for _, t := range []string{"third_party/", "soak"} {
		if rel == strings.TrimSuffix(t, "/") || strings.HasPrefix(rel, strings.TrimSuffix(t, "/")+"/") {
			return t
		}
	}
	return ""
}

// ours is the module-relative path of an import of the module, ok false
// for any other import.
func ours(imp string) (string, bool) {
	if !strings.HasPrefix(imp, modulePath+"/") {
		return "", false
	}
	return strings.TrimPrefix(imp, modulePath+"/"), true
}

// TestLayers checks the layers of doc/architecture.md on every package of
// the module, its tests included:
//   - every package is in a layer;
//   - no import points up a layer, in code or tests (test drivers aside);
//   - an import within a layer is declared in sameLayer;
//   - test helpers are imported only by tests and other test helpers;
//   - the small packages import only their allow-list (onlyImports);
//   - no package outside cmd/ imports a service (coordinator, tweeter)
//     but the services themselves, tests included (serviceTestExempt
//     aside).
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
		rel, _ := ours(p.ImportPath)
		from := layerOf(rel)
		if from < 0 {
			t.Errorf("package %s is in no layer: place it in internal/lint/layers_test.go and doc/architecture.md", rel)
			continue
		}
		checked++
		for _, e := range layerErrors(rel, p) {
			t.Error(e)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked", checked)
	}
}

// layerErrors are the layer rules p (rel) breaks.
func layerErrors(rel string, p layeredPackage) []string {
	var errs []string
	from := layerOf(rel)
	isService := slices.Contains(services, rel)
	for _, imp := range p.Imports {
		to, ok := ours(imp)
		if !ok {
			continue
		}
		l := layerOf(to)
		switch {
		case l > from:
			errs = append(errs, rel+" ("+layers[from].name+") imports "+to+" ("+layers[l].name+"): an import may not point up a layer")
		case l == from && tree(rel) == "" || l == from && tree(rel) != tree(to):
			if _, ok := sameLayer[rel][to]; !ok {
				errs = append(errs, rel+" imports "+to+", of its own layer ("+layers[from].name+"): declare it in sameLayer with the reason, or move one of them")
			}
		}
		if slices.Contains(testOnly, to) && !slices.Contains(testOnly, rel) {
			errs = append(errs, rel+" imports the test helper "+to+": only tests may")
		}
		if allowed, ok := onlyImports[rel]; ok && !slices.Contains(allowed, to) {
			errs = append(errs, rel+" imports "+to+"; it may import only "+strings.Join(append([]string{"the standard library"}, allowed...), ", "))
		}
		if slices.Contains(services, to) && !strings.HasPrefix(rel, "cmd/") && !isService {
			errs = append(errs, rel+" imports the service "+to+": front ends speak to the services through package news")
		}
	}
	tests := append(slices.Clone(p.TestImports), p.XTestImports...)
	for _, imp := range tests {
		to, ok := ours(imp)
		if !ok || to == rel {
			continue
		}
		if l := layerOf(to); l > from {
			if _, ok := testDrivers[to]; !ok {
				for _, f := range importing(p, to, &errs) {
					if _, ok := testUpExempt[rel+"/"+f]; !ok {
						errs = append(errs, rel+"/"+f+" ("+layers[from].name+") imports "+to+" ("+layers[l].name+"): a test may not point up a layer either")
					}
				}
			}
		}
		if slices.Contains(services, to) && !strings.HasPrefix(rel, "cmd/") && !isService {
			for _, f := range importing(p, to, &errs) {
				if _, ok := serviceTestExempt[rel+"/"+f]; !ok {
					errs = append(errs, rel+"/"+f+" imports the service "+to+": move a test that builds services to cmd/archivebot, or use the package's store interface")
				}
			}
		}
	}
	return errs
}

// importing are the test files of p that import to (module-relative).
func importing(p layeredPackage, to string, errs *[]string) []string {
	var files []string
	for _, f := range append(slices.Clone(p.TestGoFiles), p.XTestGoFiles...) {
		src, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			*errs = append(*errs, err.Error())
			continue
		}
		if bytes.Contains(src, []byte(`"`+modulePath+"/"+to+`"`)) {
			files = append(files, f)
		}
	}
	return files
}

// TestClientLinks: the pipeline client and the wire format, which
// volunteers link into their pipelines, link only the standard library,
// each other and internal/retry: not the node's configuration, go-redis
// or anything else (go list -deps).
func TestClientLinks(t *testing.T) {
	root := moduleRoot(t)
	allowed := []string{"pipelineapi/wire", "pipelineapi/client", "internal/retry"}
	for _, pkg := range []string{"./pipelineapi/client", "./pipelineapi/wire"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
		}
		var extra []string
		n := 0
		for _, dep := range strings.Fields(string(out)) {
			n++
			if rel, ok := ours(dep); !ok || !slices.Contains(allowed, rel) {
				extra = append(extra, dep)
			}
		}
		if n == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		if len(extra) > 0 {
			t.Errorf("%s links %s; it may link only the standard library and %v", pkg, strings.Join(extra, ", "), allowed)
		}
	}
}

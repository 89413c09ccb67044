package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayerRulesCatch breaks each rule of TestLayers on purpose, on a
// made-up package listing, and checks that layerErrors names the break:
// a rule that stops catching fails here, not silently in TestLayers.
func TestLayerRulesCatch(t *testing.T) {
	dir := t.TempDir()
	// A test file importing to; importing() reads the files it names.
	testFile := func(name, to string) string {
		src := "package x\n\nimport _ \"" + modulePath + "/" + to + "\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	mod := func(rel string) string { return modulePath + "/" + rel }
	cases := []struct {
		rule string
		rel  string
		p    layeredPackage
		want string
	}{
		{"no import points up a layer", "store",
			layeredPackage{Imports: []string{mod("coordinator")}},
			"store (store) imports coordinator (services): an import may not point up a layer"},
		{"an import within a layer is declared", "coordinator",
			layeredPackage{Imports: []string{mod("tweeter")}},
			"coordinator imports tweeter, of its own layer (services): declare it in sameLayer"},
		{"test helpers only in tests", "pipelineapi",
			layeredPackage{Imports: []string{mod("internal/redistest")}},
			"pipelineapi imports the test helper internal/redistest: only tests may"},
		{"the record imports nothing of the module", "record",
			layeredPackage{Imports: []string{mod("ident")}},
			"record imports ident; it may import only the standard library"},
		{"the client imports only its allow-list", "pipelineapi/client",
			layeredPackage{Imports: []string{mod("config")}},
			"pipelineapi/client imports config; it may import only the standard library, pipelineapi/wire, internal/retry"},
		{"front ends do not import the services", "bot",
			layeredPackage{Imports: []string{mod("coordinator")}},
			"bot imports the service coordinator: front ends speak to the services through package news"},
		{"a test may not point up a layer", "store",
			layeredPackage{Dir: dir, TestImports: []string{mod("web")}, TestGoFiles: []string{testFile("up_test.go", "web")}},
			"store/up_test.go (store) imports web (front ends): a test may not point up a layer either"},
		{"a front end's test does not build a service", "web",
			layeredPackage{Dir: dir, XTestImports: []string{mod("tweeter")}, XTestGoFiles: []string{testFile("svc_test.go", "tweeter")}},
			"web/svc_test.go imports the service tweeter: move a test that builds services to cmd/archivebot"},
	}
	for _, c := range cases {
		errs := layerErrors(c.rel, c.p)
		found := false
		for _, e := range errs {
			if strings.Contains(e, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("rule %q broken on purpose (%s) was not caught; layerErrors said %q", c.rule, c.rel, errs)
		}
	}
	// The allowed cases stay quiet: a declared same-layer import, a test
	// driver above a test's layer, the services' own imports.
	quiet := []struct {
		rel string
		p   layeredPackage
	}{
		{"web", layeredPackage{Imports: []string{mod("bot"), mod("news"), mod("store")}}},
		{"store", layeredPackage{Dir: dir, TestImports: []string{mod("pipelinesim")}, TestGoFiles: []string{testFile("drv_test.go", "pipelinesim")}}},
		{"cmd/archivebot", layeredPackage{Imports: []string{mod("coordinator"), mod("tweeter"), mod("web")}}},
	}
	for _, q := range quiet {
		if errs := layerErrors(q.rel, q.p); len(errs) > 0 {
			t.Errorf("%s: allowed imports reported: %q", q.rel, errs)
		}
	}
}

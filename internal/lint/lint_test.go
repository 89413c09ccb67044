package lint

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const goRedis = "github.com/redis/go-redis/"

// storeFiles may use the Redis client and run scripts: together they are
// the store, the one seam between the control node and Redis (paths from
// the module root; a trailing * matches a prefix).
var storeFiles = []string{
	"store/*",
}

// redisExempt stand in for other programs, or only build a client.
var redisExempt = map[string]string{
	"pipelinesim/":        "the pipeline simulator plays a pipeline, a program of its own",
	"internal/redistest/": "test helper: starts and inspects the Redis the tests run against",
	"embeddedredis/":      "the embedded Redis server is the other side of the seam; its client hook only makes our writes durable",
}

// clientBuilders may name these go-redis objects and nothing else: they
// build the client the store is given and close it at exit.
var clientBuilders = map[string][]string{
	"cmd/archivebot/serve.go": {"NewClient", "ParseURL", "Options", "Client", "Close", "AddHook", "NewFailoverClient", "FailoverOptions"},
	// redis.url is parsed exactly as the run will (config.ParseRedisURL).
	"config/redis.go": {"ParseURL", "Options"},
	// go-redis's own log lines go through slog.
	"cmd/archivebot/logging.go": {"SetLogger"},
	// The examples' node runs the store on an in-process Redis.
	"pipelineapi/apitest/apitest.go": {"NewClient", "Options", "Close"},
}

// specCheckedFiles are the files that must not cite the SPEC by section
// (a document that is not in the repository): code and scripts cite doc/
// instead. The whole module is checked.
var specCheckedFiles = []string{".go", ".lua", ".toml", ".sh"}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s", dir)
	}
	return dir
}

func matches(rel string, patterns []string) bool {
	for _, p := range patterns {
		if strings.HasSuffix(p, "*") && strings.HasPrefix(rel, strings.TrimSuffix(p, "*")) || rel == p {
			return true
		}
	}
	return false
}

type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Main bool }
}

// TestOnlyTheStoreTalksToRedis type-checks every package of the module and
// fails on any use of go-redis (a client method, a script run, redis.Nil,
// a pipeline) in a non-test file outside the store files.
func TestOnlyTheStoreTalksToRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-export", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	var ours []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Main {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, fset.File(f.Pos()).Name())
			rel = filepath.ToSlash(rel)
			if matches(rel, storeFiles) || exemptDir(rel) {
				continue
			}
			allowed := clientBuilders[rel]
			ast.Inspect(f, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				obj := info.Uses[id]
				if obj == nil || obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), goRedis) {
					return true
				}
				if v, ok := obj.(*types.Var); ok && v.IsField() && allowed != nil {
					return true // setting the options of a client being built
				}
				if slices.Contains(allowed, obj.Name()) {
					return true
				}
				t.Errorf("%s: uses go-redis %s outside the store files; add a Store method (see doc/architecture.md)",
					fset.Position(id.Pos()), obj.Name())
				return true
			})
		}
	}
}

func exemptDir(rel string) bool {
	for dir := range redisExempt {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	return false
}

var specCitation = regexp.MustCompile(`SPEC ?\x{00A7}`)

// TestNoSpecCitations fails on any source file of the module that cites
// the SPEC by section: the SPEC is not in the repository; doc/protocol.md,
// doc/architecture.md and doc/upstream.md are.
func TestNoSpecCitations(t *testing.T) {
	root := moduleRoot(t)
	for _, dir := range []string{"."} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if d.Name() == "testdata" || (d.Name() != "." && strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !slices.Contains(specCheckedFiles, filepath.Ext(path)) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if specCitation.MatchString(line) {
					t.Errorf("%s:%d cites the SPEC, which is not in the repository; cite doc/protocol.md or explain: %s",
						rel, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// recoverAllowed may call recover() themselves; everything else that must
// survive a panic goes through internal/run (Guard, Go), the one panic
// guard, so every panic is logged the same way with its stack.
var recoverAllowed = map[string]string{
	"internal/run/run.go":  "the panic guard itself",
	"web/server.go":        "a panicking request is answered 500, not only logged",
	"embeddedredis/aof.go": "a damaged log record that panics the decoder ends the replay of its segment",
	// The patched miniredis stays importable on its own (its patches are
	// meant for upstream, third_party/miniredis/patches) and does not
	// import internal/run; it hands the panic to embeddedredis's handler,
	// which logs it.
	"third_party/miniredis/server/server.go": "a command that panics closes its own connection only",
}

// TestOnePanicGuard fails on a recover() outside internal/run and the
// files above (tests excepted).
func TestOnePanicGuard(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || (path != root && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if _, ok := recoverAllowed[rel]; ok {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "recover()") && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d recovers a panic itself; use internal/run (Guard or Go): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

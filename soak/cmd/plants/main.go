// Command plants runs the soak's planted bugs: for each
// soak/plants/*.patch, a scratch copy of the tree at HEAD (a detached
// git worktree), the patch applied, the node built from it, and the
// short soak (ci scale) run with that binary (SOAK_BIN) and the patch's
// own Env; then the unplanted control, built from HEAD the same way. It
// prints the table "bug → invariant that caught it" and exits 1 when a
// bug's invariant did not fail or the control did not pass (doc/soak.md,
// Planted bugs).
//
//	go run ./soak/cmd/plants [-seed 1] [-duration 240s] [-only NAME,...] [-control=false] [-parallel 1] [-keep DIR]
//
// The soak itself (the harness and the checker) is the working tree's:
// a plant is judged by the checker being changed. Each run takes the
// short soak's time (about 5 minutes on 2 cores); run it on a machine
// with nothing else heavy on it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/soak/soakrun"
)

func main() {
	seed := flag.Int("seed", 1, "SOAK_SEED of every run")
	dur := flag.Duration("duration", 240*time.Second, "SOAK_DURATION of every run (.ci/run's)")
	only := flag.String("only", "", "comma-separated plant names (the patch file's name less .patch); default all")
	control := flag.Bool("control", true, "run the unplanted control too")
	parallel := flag.Int("parallel", 1, "how many runs at once (2 on a 2-core machine: see soakrun.Each)")
	keep := flag.String("keep", "", "directory that keeps each run (SOAK_OUT, the test's log); default a new temporary directory")
	flag.Parse()

	root, head, err := soakrun.Root()
	if err != nil {
		fatalf("not in a git tree: %v", err)
	}
	plants, err := readPlants(filepath.Join(root, "soak", "plants"))
	if err != nil {
		fatalf("%v", err)
	}
	plants = selectPlants(plants, *only)
	if len(plants) == 0 && !*control {
		fatalf("no plant selected")
	}
	if *keep == "" {
		if *keep, err = os.MkdirTemp("", "plants-"); err != nil {
			fatalf("%v", err)
		}
	}
	// The processes of the soak run as other users (soak/net_test.go):
	// the binaries must be readable by them.
	if err := os.MkdirAll(*keep, 0o755); err != nil {
		fatalf("%v", err)
	}
	os.Chmod(*keep, 0o755)
	fmt.Fprintf(os.Stderr, "plants: %d plants at HEAD %s, seed %d, ci scale, %v; runs kept in %s\n", len(plants), head, *seed, *dur, *keep)

	var rows []row
	if *control {
		plants = append(plants, plant{Name: controlName})
	}
	rows = make([]row, len(plants))
	soakrun.Each(len(plants), *parallel, func(i int) {
		p := plants[i]
		rows[i] = run(root, *keep, p, *seed, *dur)
		fmt.Fprintf(os.Stderr, "plants: %s: %s (%s)\n", p.Name, rows[i].verdict(), rows[i].Took.Round(time.Second))
	})
	fmt.Printf("Planted bugs, `go run ./soak/cmd/plants` at %s (seed %d, ci scale, SOAK_DURATION=%v), %s:\n\n", head, *seed, *dur, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Print(table(rows))
	for _, r := range rows {
		if !r.ok() {
			os.Exit(1)
		}
	}
}

var buildMu sync.Mutex

// controlName is the control's row: HEAD as it is.
const controlName = "(control: no plant)"

// run builds p's node in a scratch worktree at HEAD (p.File applied)
// and runs the short soak with it.
func run(root, keep string, p plant, seed int, dur time.Duration) (r row) {
	r.plant = p
	start := time.Now()
	defer func() { r.Took = time.Since(start) }()
	out := filepath.Join(keep, safe(p.Name))
	os.RemoveAll(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		r.Err = err.Error()
		return r
	}
	bin, err := build(root, out, p)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	env := map[string]string{"SOAK_SCALE": "ci", "SOAK_DURATION": dur.String(), "SOAK_SEED": fmt.Sprint(seed), "SOAK_BIN": bin}
	for k, v := range p.Env {
		env[k] = v
	}
	r.Result = soakrun.Run(root, out, env)
	return r
}

// build builds p's node in a scratch worktree at HEAD (p.File applied),
// removed once built. Git's worktree bookkeeping and the builds run one
// at a time; the soaks themselves in parallel.
func build(root, out string, p plant) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	scratch := filepath.Join(out, "tree")
	if _, err := soakrun.Git(root, "worktree", "add", "--detach", scratch, "HEAD"); err != nil {
		return "", fmt.Errorf("git worktree add: %v", err)
	}
	defer soakrun.Git(root, "worktree", "remove", "--force", scratch)
	if p.File != "" {
		if _, err := soakrun.Git(scratch, "apply", p.File); err != nil {
			return "", fmt.Errorf("the patch does not apply at HEAD: %v", err)
		}
	}
	bin := filepath.Join(out, "archivebot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/archivebot")
	cmd.Dir = scratch
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, strings.TrimSpace(string(b)))
	}
	return bin, nil
}

func safe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == '(' || r == ')' || r == ':' {
			return '-'
		}
		return r
	}, name)
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "plants: "+format+"\n", a...)
	os.Exit(2)
}

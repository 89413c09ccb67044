// Package soakrun runs the short soak (TestSoak at ci scale) as a child
// `go test` and reads its verdict: the commands that run it many times
// (soak/cmd/plants, soak/cmd/sweep) share it.
package soakrun

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is one run's outcome.
type Result struct {
	Failed  []int  // the invariants that failed
	Faults  string // the summary's first line, less "faults injected "
	TestErr error  // go test's exit
	Err     string // no verdict: why
	Log     string // the test's output
	Took    time.Duration
}

// Passed: every invariant held and the test passed (a fault not
// injected under CI fails it).
func (r Result) Passed() bool { return r.Err == "" && len(r.Failed) == 0 && r.TestErr == nil }

// Run runs TestSoak in root (the working tree's harness and checker)
// with CI=1 and env's SOAK_ variables (and none of the caller's), keeping the run
// in out (SOAK_OUT is out/run, the test's output out/test.log).
func Run(root, out string, env map[string]string) Result {
	start := time.Now()
	r := Result{}
	defer func() { r.Took = time.Since(start) }()
	if err := os.MkdirAll(out, 0o755); err != nil {
		r.Err = err.Error()
		return r
	}
	log, err := os.Create(filepath.Join(out, "test.log"))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer log.Close()
	r.Log = log.Name()
	soakOut := filepath.Join(out, "run")
	// As .ci/run runs it: a fault not injected fails the run.
	vars := map[string]string{"SOAK_OUT": soakOut, "CI": "1"}
	for k, v := range env {
		vars[k] = v
	}
	cmd := exec.Command("go", "test", "./soak", "-run", "^TestSoak$", "-timeout", "0", "-v")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = Env(os.Environ(), vars)
	r.TestErr = cmd.Run()
	sum, err := os.ReadFile(filepath.Join(soakOut, "summary.txt"))
	if err != nil {
		r.Err = fmt.Sprintf("no verdict (go test: %v; its output: %s)", r.TestErr, log.Name())
		r.Took = time.Since(start)
		return r
	}
	r.Failed, r.Faults = ParseSummary(string(sum))
	r.Took = time.Since(start)
	return r
}

// Env is environ less every SOAK_ variable and those vars sets, then
// vars, sorted.
func Env(environ []string, vars map[string]string) []string {
	var env []string
	for _, e := range environ {
		k, _, _ := strings.Cut(e, "=")
		if _, set := vars[k]; !set && !strings.HasPrefix(e, "SOAK_") {
			env = append(env, e)
		}
	}
	var keys []string
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

var verdictRE = regexp.MustCompile(`^(PASS|FAIL) (\d+)\. `)

// ParseSummary reads a run's summary.txt: the invariants that failed,
// and its first line (the faults injected).
func ParseSummary(text string) (failed []int, faults string) {
	for i, l := range strings.Split(text, "\n") {
		if i == 0 {
			faults = strings.TrimPrefix(l, "faults injected ")
		}
		if m := verdictRE.FindStringSubmatch(l); m != nil && m[1] == "FAIL" {
			n, _ := strconv.Atoi(m[2])
			failed = append(failed, n)
		}
	}
	return failed, faults
}

// Ints writes ns as "2, 5", or "none".
func Ints(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ", ")
}

// Root is the git tree's top directory, and HEAD's short hash.
func Root() (root, head string, err error) {
	if root, err = Git("", "rev-parse", "--show-toplevel"); err != nil {
		return "", "", err
	}
	head, _ = Git(root, "rev-parse", "--short", "HEAD")
	return root, head, nil
}

// Git runs git in dir and returns its output.
func Git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}

// Each calls fn(i) for i in [0, n), width at a time (at least one), and
// returns when all have returned. Two short soaks at once keep a 2-core
// machine at about 1 of its cores (the ci scale's load line measures
// 0.43 of 2 busy for one); each run's ports, nftables table and
// clock file are its own (soak/net_test.go), so runs do not meet.
func Each(n, width int, fn func(i int)) {
	sem := make(chan struct{}, max(width, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

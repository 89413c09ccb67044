// Command sweep runs the short soak (ci scale, .ci/run's duration) for
// several seeds, one after the other, and prints each seed's verdict:
// the breadth a change to the node or the checker needs before it lands
// (doc/soak.md, The seed sweep). It exits 1 when a seed failed.
//
//	go run ./soak/cmd/sweep [-seeds 10] [-from 1] [-duration 240s] [-parallel 1] [-keep DIR]
//
// Each seed takes the short soak's time (about 5 minutes on 2 cores):
// ten take about 50 minutes. The harness, the checker and the node are
// the working tree's (set SOAK_BIN in the environment to run a binary of
// your own; the other SOAK_ variables are the sweep's).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/archiveteam/archivebot-go/soak/soakrun"
)

func main() {
	seeds := flag.Int("seeds", 10, "how many seeds")
	from := flag.Int("from", 1, "the first seed")
	dur := flag.Duration("duration", 240*time.Second, "SOAK_DURATION of every run (.ci/run's)")
	parallel := flag.Int("parallel", 1, "how many seeds run at once (2 on a 2-core machine: see soakrun.Each)")
	keep := flag.String("keep", "", "directory that keeps each run; default a new temporary directory")
	flag.Parse()
	root, head, err := soakrun.Root()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sweep: not in a git tree: %v\n", err)
		os.Exit(2)
	}
	if *keep == "" {
		if *keep, err = os.MkdirTemp("", "sweep-"); err != nil {
			fmt.Fprintln(os.Stderr, "sweep:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("Seed sweep, `go run ./soak/cmd/sweep` at %s (ci scale, SOAK_DURATION=%v, %d at a time), runs kept in %s:\n\n", head, *dur, *parallel, *keep)
	fmt.Println("| seed | verdict | invariants failed | faults injected | time |")
	fmt.Println("|---|---|---|---|---|")
	results := make([]soakrun.Result, *seeds)
	soakrun.Each(*seeds, *parallel, func(i int) {
		seed := *from + i
		env := map[string]string{"SOAK_SCALE": "ci", "SOAK_DURATION": dur.String(), "SOAK_SEED": fmt.Sprint(seed)}
		if b := os.Getenv("SOAK_BIN"); b != "" {
			env["SOAK_BIN"] = b
		}
		results[i] = soakrun.Run(root, filepath.Join(*keep, fmt.Sprintf("seed%d", seed)), env)
		fmt.Fprintf(os.Stderr, "sweep: seed %d: passed %v (%s)\n", seed, results[i].Passed(), results[i].Took.Round(time.Second))
	})
	failed := 0
	for i, r := range results {
		seed := *from + i
		verdict := "pass"
		switch {
		case r.Err != "":
			verdict = "NO VERDICT: " + r.Err
		case !r.Passed() && len(r.Failed) == 0:
			verdict = fmt.Sprintf("FAIL (go test: %v; %s)", r.TestErr, r.Log)
		case !r.Passed():
			verdict = "FAIL"
		}
		if !r.Passed() {
			failed++
		}
		fmt.Printf("| %d | %s | %s | %s | %s |\n", seed, verdict, soakrun.Ints(r.Failed), r.Faults, r.Took.Round(time.Second))
	}
	fmt.Printf("\n%d of %d seeds passed\n", *seeds-failed, *seeds)
	if failed > 0 {
		os.Exit(1)
	}
}

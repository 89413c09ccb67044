package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/soak/soakrun"
)

// TestPlantsInTheRepositoryParse: every soak/plants/*.patch has a
// header the command reads: a bug, the invariant that must catch it,
// and only SOAK_ variables in its Env.
func TestPlantsInTheRepositoryParse(t *testing.T) {
	ps, err := readPlants("../../plants")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Fatal("no plant in soak/plants")
	}
	for _, p := range ps {
		if p.Bug == "" || p.Invariant < 1 || p.Invariant > 8 {
			t.Errorf("%s: bug %q, invariant %d", p.File, p.Bug, p.Invariant)
		}
	}
	for _, p := range ps {
		if p.Name == "failover-check-off" {
			if p.Invariant != 2 || p.Env["SOAK_FAULTS"] != "lose-redis-write,revoke-waiting" || !strings.Contains(p.Bug, "never judges it") {
				t.Errorf("failover-check-off read as %+v", p)
			}
			return
		}
	}
	t.Error("failover-check-off not found")
}

func TestPlantHeaderRefused(t *testing.T) {
	for _, h := range []string{
		"Plant: x\nInvariant: 2\n\ndiff --git a/x b/x\n",           // no bug
		"Plant: x\nBug: b\n\ndiff --git a/x b/x\n",                 // no invariant
		"Plant: x\nBug: b\nInvariant: two\n\ndiff --git a/x b/x\n", // not a number
		"Plant: x\nBug: b\nInvariant: 2\nEnv: PATH=/tmp\n\ndiff --git a/x b/x\n",
	} {
		if _, err := parseHeader(h); err == nil {
			t.Errorf("header accepted:\n%s", h)
		}
	}
}

// TestPlantVerdicts: a plant is caught only by its own invariant; the
// control passes only when nothing failed, go test included.
func TestPlantVerdicts(t *testing.T) {
	sum := "faults injected (seed 1): 3: kill-leader 1, revoke-waiting 2\nsoak /tmp/x: 10 events\nPASS 1. outcomes: acknowledged 3\nFAIL 2. one holder: takes 4\n    violation\nPASS 3. revoked\nFAIL 5. probes\n"
	failed, faults := soakrun.ParseSummary(sum)
	if soakrun.Ints(failed) != "2, 5" || faults != "(seed 1): 3: kill-leader 1, revoke-waiting 2" {
		t.Fatalf("parsed %v, %q", failed, faults)
	}
	p := plant{Name: "p", File: "p.patch", Invariant: 2}
	for _, c := range []struct {
		r    row
		ok   bool
		word string
	}{
		{row{plant: p, Result: soakrun.Result{Failed: []int{2, 5}}}, true, "caught"},
		{row{plant: p, Result: soakrun.Result{Failed: []int{5}}}, false, "NOT CAUGHT by invariant 2"},
		{row{plant: p}, false, "NOT CAUGHT"},
		{row{plant: p, Result: soakrun.Result{Err: "the patch does not apply"}}, false, "NO VERDICT"},
		{row{plant: plant{Name: controlName}}, true, "passed"},
		{row{plant: plant{Name: controlName}, Result: soakrun.Result{Failed: []int{7}}}, false, "FAILED"},
		{row{plant: plant{Name: controlName}, Result: soakrun.Result{TestErr: errors.New("exit status 1")}}, false, "FAILED (go test"},
	} {
		if c.r.ok() != c.ok || !strings.HasPrefix(c.r.verdict(), c.word) {
			t.Errorf("%+v: ok %v verdict %q, want %v %q", c.r, c.r.ok(), c.r.verdict(), c.ok, c.word)
		}
	}
	tab := table([]row{{plant: plant{Name: "failover-check-off", File: "f", Invariant: 2, Env: map[string]string{"SOAK_FAULTS": "a,b"}}, Result: soakrun.Result{Failed: []int{2}}}})
	if !strings.Contains(tab, "| failover-check-off | 2 | `SOAK_FAULTS=a,b` | caught | 2 |") {
		t.Errorf("table:\n%s", tab)
	}
}

func TestSoakEnvDropsTheCallersSoakVariables(t *testing.T) {
	env := soakrun.Env([]string{"PATH=/bin", "SOAK_FAULTS=none", "CI=1"}, map[string]string{"SOAK_SEED": "1", "SOAK_FAULTS": "kill-leader"})
	got := strings.Join(env, " ")
	if got != "PATH=/bin CI=1 SOAK_FAULTS=kill-leader SOAK_SEED=1" {
		t.Errorf("env %s", got)
	}
}

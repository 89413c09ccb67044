package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/soak/soakrun"
)

// plant is one soak/plants/NAME.patch. Its header, before the diff:
//
//	Plant: NAME
//	Bug: what the bug does (continued on lines that start with a space)
//	Invariant: N (why that one)
//	Env: SOAK_FAULTS=kill-leader,revoke-waiting   (optional: the run's own variables)
type plant struct {
	Name      string
	File      string
	Bug       string
	Invariant int // 0: none named
	Env       map[string]string
}

func readPlants(dir string) ([]plant, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []plant
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := parseHeader(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		p.File = f
		if p.Name == "" {
			p.Name = strings.TrimSuffix(filepath.Base(f), ".patch")
		}
		out = append(out, p)
	}
	return out, nil
}

var invRE = regexp.MustCompile(`^\s*(\d+)`)

// parseHeader reads a patch's header (everything before its first
// "diff --git" line).
func parseHeader(text string) (plant, error) {
	var p plant
	fields := map[string]string{}
	last := ""
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "diff --git") || strings.HasPrefix(l, "--- ") {
			break
		}
		if (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) && last != "" {
			fields[last] += " " + strings.TrimSpace(l)
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.Contains(k, " ") {
			last = ""
			continue
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	p.Name, p.Bug = fields["Plant"], fields["Bug"]
	if v, ok := fields["Invariant"]; ok {
		m := invRE.FindStringSubmatch(v)
		if m == nil {
			return p, fmt.Errorf("Invariant: %q names no invariant", v)
		}
		p.Invariant, _ = strconv.Atoi(m[1])
	}
	if v := fields["Env"]; v != "" {
		p.Env = map[string]string{}
		for _, kv := range strings.Fields(v) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || !strings.HasPrefix(k, "SOAK_") {
				return p, fmt.Errorf("Env: %q is not SOAK_NAME=VALUE", kv)
			}
			p.Env[k] = val
		}
	}
	if p.Bug == "" {
		return p, fmt.Errorf("no Bug: line")
	}
	if p.Invariant == 0 {
		return p, fmt.Errorf("no Invariant: line (the invariant that must catch it)")
	}
	return p, nil
}

func selectPlants(ps []plant, only string) []plant {
	if only == "" {
		return ps
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []plant
	for _, p := range ps {
		if want[p.Name] || want[strings.TrimSuffix(filepath.Base(p.File), ".patch")] {
			out = append(out, p)
		}
	}
	return out
}

// row is one run's outcome.
type row struct {
	plant
	soakrun.Result
}

func (r row) control() bool { return r.File == "" }

// ok: a plant is caught when its invariant failed; the control passes
// when nothing failed (the test included: a fault not injected under CI).
func (r row) ok() bool {
	if r.Err != "" {
		return false
	}
	if r.control() {
		return len(r.Failed) == 0 && r.TestErr == nil
	}
	for _, n := range r.Failed {
		if n == r.Invariant {
			return true
		}
	}
	return false
}

func (r row) verdict() string {
	switch {
	case r.Err != "":
		return "NO VERDICT: " + r.Err
	case r.control() && r.ok():
		return "passed"
	case r.control() && len(r.Failed) > 0:
		return "FAILED"
	case r.control():
		return fmt.Sprintf("FAILED (go test: %v)", r.TestErr)
	case r.ok():
		return "caught"
	case len(r.Failed) > 0:
		return fmt.Sprintf("NOT CAUGHT by invariant %d (others failed)", r.Invariant)
	}
	return "NOT CAUGHT"
}

// table is the Markdown table doc/soak.md holds as it is.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| planted bug | its invariant | run's own variables | verdict | invariants failed | faults injected | time |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		inv, env := "—", "—"
		if !r.control() {
			inv = strconv.Itoa(r.Invariant)
		}
		var kv []string
		for k, v := range r.Env {
			kv = append(kv, "`"+k+"="+v+"`")
		}
		sort.Strings(kv)
		if len(kv) > 0 {
			env = strings.Join(kv, " ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, inv, env, r.verdict(),
			soakrun.Ints(r.Failed), strings.ReplaceAll(r.Faults, "|", "/"), r.Took.Round(time.Second))
	}
	return b.String()
}

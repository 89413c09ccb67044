package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEachFailsUnderCIWithoutRedis: with CI set and no real Redis
// configured, Each's real-Redis subtest fails, naming the variable. The
// old Each skipped it, and CI passed with every real-Redis half unrun.
// The check runs Each in a child test process.
func TestEachFailsUnderCIWithoutRedis(t *testing.T) {
	if os.Getenv("REDISTEST_EACH_CHILD") == "1" {
		Each(t, func(t *testing.T, b *Backend) {})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEachFailsUnderCIWithoutRedis$", "-test.v")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, EnvURL+"=") && !strings.HasPrefix(e, "CI=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "CI=1", "REDISTEST_EACH_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), EnvURL+" not set, and CI is set") {
		t.Fatalf("with CI set and %s unset, Each's real-Redis subtest did not fail (err %v):\n%s", EnvURL, err, out)
	}
	// Without CI it skips, as before.
	cmd = exec.Command(os.Args[0], "-test.run=^TestEachFailsUnderCIWithoutRedis$", "-test.v")
	cmd.Env = nil
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, EnvURL+"=") && !strings.HasPrefix(e, "CI=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "REDISTEST_EACH_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("without CI: %v\n%s", err, out)
	}
	// With CI and EnvURL=off (.ci/run's race run) it skips, saying why.
	cmd = exec.Command(os.Args[0], "-test.run=^TestEachFailsUnderCIWithoutRedis$", "-test.v")
	cmd.Env = nil
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, EnvURL+"=") && !strings.HasPrefix(e, "CI=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "CI=1", EnvURL+"="+Off, "REDISTEST_EACH_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "left to another run") {
		t.Fatalf("with CI and %s=%s: %v\n%s", EnvURL, Off, err, out)
	}
}

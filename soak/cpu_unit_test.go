package soak

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestCPUMeterClassesAndCharges(t *testing.T) {
	m := newCPUMeter("/tmp/x/ab-built")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"/tmp/x/archivebot", "simulate-pipeline", "-node", "h"}, "pipelines"},
		{[]string{"/tmp/x/archivebot", "bridge", "-listen", "a"}, "bridges"},
		{[]string{"/tmp/x/archivebot", "-config", "c.toml"}, "nodes"},
		{[]string{"/tmp/y/ab-built", "-config", "c.toml"}, "nodes"},
		{[]string{"/tmp/y/ab-built", "simulate-pipeline"}, "pipelines"},
		{[]string{"/usr/bin/redis-server", "*:1"}, "redis"},
		{[]string{"redis-sentinel", "*:2"}, "redis"},
		{[]string{"/usr/sbin/ngircd", "-n"}, "ngircd"},
		{[]string{"/usr/lib/go/pkg/tool/compile"}, "other"},
		{nil, "other"},
	} {
		if got := m.class(12345678, c.args); got != c.want {
			t.Errorf("class(%q) = %s, want %s", c.args, got, c.want)
		}
	}
	if got := m.class(os.Getpid(), []string{"x"}); got != "harness" {
		t.Errorf("own pid classed %s, want harness", got)
	}
	first := time.Now()
	if _, _, _, ok := m.read(); ok {
		t.Fatal("first reading gave figures")
	}
	// Burn CPU in the harness, and in a child: both must be charged.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	// Burn 300 ms of this process's own CPU time, however long the
	// machine makes that take, and judge the charge against the wall
	// time between the two readings measured out here (at least the
	// meter's own interval), so a loaded machine cannot fail it.
	start, _ := procCPU(os.Getpid())
	x := 0
	for {
		x++
		if x%100000 == 0 {
			if now, _ := procCPU(os.Getpid()); now-start >= 0.3 {
				break
			}
		}
	}
	by, busy, cores, ok := m.read()
	wall := time.Since(first).Seconds()
	cmd.Wait()
	if !ok {
		t.Fatal("second reading gave nothing")
	}
	if charged := by["harness"] * wall; charged < 0.25 {
		t.Errorf("harness charged %.2f CPU seconds (%.2f cores over %.2f s) after burning 0.3 s, want ≥ 0.25", charged, by["harness"], wall)
	}
	if cores < 1 || busy <= 0 || busy > cores+0.01 {
		t.Errorf("busy %.2f of %.0f cores", busy, cores)
	}
}

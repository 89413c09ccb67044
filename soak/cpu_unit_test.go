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
	if _, _, _, ok := m.read(); ok {
		t.Fatal("first reading gave figures")
	}
	// Burn CPU in the harness, and in a child: both must be charged.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	end := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	by, busy, cores, ok := m.read()
	cmd.Wait()
	if !ok {
		t.Fatal("second reading gave nothing")
	}
	if by["harness"] < 0.2 {
		t.Errorf("harness charged %.2f cores after a 300 ms busy loop, want ≥ 0.2", by["harness"])
	}
	if cores < 1 || busy <= 0 || busy > cores+0.01 {
		t.Errorf("busy %.2f of %.0f cores", busy, cores)
	}
	_ = x
}

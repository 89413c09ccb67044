package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
	"github.com/archiveteam/archivebot-go/internal/clock"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// The clock hook (internal/clock, doc/architecture.md, Clocks): a node
// started with ARCHIVEBOT_CLOCK_OFFSET_FILE reads its wall clock through
// it, so 45 s of offset puts it too far from Redis's TIME to lead; put
// right while it runs, it leads. The chaos soak's clock-skew fault is
// this, between two nodes.
func TestE2EClockOffsetFile(t *testing.T) {
	// Parallel (with the other tests that wait on their own servers and
	// child processes, e2e_process_test.go): its Redis is a cluster of its
	// own, not the process's real-Redis database; its nodes are children.
	t.Parallel()
	cl := redistest.StartCluster(t)
	irc := irctest.StartNgircd(t, irctest.NgircdOptions{})
	off := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(off, []byte("45s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := haNodeConfig(t, irc.URL(), "#clock", cl, "node-a", "2s")
	c := startChildWith(t, []string{"-config", cfg}, testproc.Options{Env: append(childEnv(), clock.EnvOffsetFile+"="+off)})
	_, i := c.log.waitFor(t, 0, "refusing to lead: this node's clock is 45")
	if err := os.WriteFile(off, []byte("0s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.log.waitFor(t, i, "took the leader lease")
}

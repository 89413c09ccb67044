package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGoroutineDumpOnSIGUSR1: with ARCHIVEBOT_GOROUTINE_DUMP set, SIGUSR1
// appends the goroutines by stack to the file (the soak's evidence for
// invariant 6), once per signal.
func TestGoroutineDumpOnSIGUSR1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.txt")
	t.Setenv(envGoroutineDump, path)
	stop := startGoroutineDumps()
	defer stop()
	for i := 1; i <= 2; i++ {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile(path)
			if strings.Count(string(b), "goroutine profile: total") == i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %d signals the file holds:\n%s", i, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

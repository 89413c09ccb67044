package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// envGoroutineDump names a file: while it is set, SIGUSR1 appends the
// node's goroutines to it, grouped by stack with their counts (pprof's
// debug=1 text), under a line with the time. The chaos soak sets it to
// compare a long-lived node's goroutines early and late in a run
// (doc/soak.md, invariant 6) without stopping the node; unset in every
// deployment, then SIGUSR1 keeps its default action.
const envGoroutineDump = "ARCHIVEBOT_GOROUTINE_DUMP"

// startGoroutineDumps installs the SIGUSR1 handler when the variable is
// set; stop removes it.
func startGoroutineDumps() (stop func()) {
	path := os.Getenv(envGoroutineDump)
	if path == "" {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ch:
				writeGoroutineDump(path)
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

func writeGoroutineDump(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "archivebot: goroutine dump: %v\n", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== goroutine dump pid %d %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	_ = pprof.Lookup("goroutine").WriteTo(f, 1)
	fmt.Fprintln(f)
}

package embeddedredis

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDataDirHeldByOneProcess: a second server on a data directory in
// use is refused with an error that names the holder's pid and the lock
// file, and starts once the first has stopped. The old code started both:
// whichever stopped last overwrote the other's snapshot.
func TestDataDirHeldByOneProcess(t *testing.T) {
	dir := t.TempDir()
	first, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: quietLogger()})
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second server started on a data directory in use")
	}
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) ||
		!strings.Contains(err.Error(), LockFile) {
		t.Errorf("second server: %v; want ErrDataDirInUse naming pid %d and %s", err, os.Getpid(), LockFile)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
	// A start that fails after taking the lock lets it go.
	blocker, err := Start(Options{Addr: "127.0.0.1:0", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if _, err := Start(Options{Addr: blocker.Addr(), DataDir: dir, Logger: quietLogger()}); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("start on a taken address: %v, want ErrAddrInUse", err)
	}
	last, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("after a failed start: %v (the lock was kept)", err)
	}
	last.Close()
}

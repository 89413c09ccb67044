package embeddedredis

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// LockFile is the name of the lock file in Options.DataDir: the process
// that runs the embedded Redis on a data directory holds an exclusive
// flock on it, and writes its pid, host and start time into it.
const LockFile = "archivebot.lock"

// ErrDataDirInUse is wrapped by Start's error when another process holds
// the data directory.
var ErrDataDirInUse = errors.New("embedded redis: data directory in use")

// lockDataDir takes dir's lock for this process; the returned file holds
// it until closed. Two nodes on one data directory would each write the
// snapshot over the other's and lose jobs silently; the second is refused
// with the first one's pid.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded redis: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder, _ := os.ReadFile(path)
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "a process that has not written its pid yet"
			}
			return nil, fmt.Errorf("%w: %s is held by another process (%s; lock file %s). Two nodes on one data "+
				"directory overwrite each other's data: stop that node, or give this one its own redis.data_dir "+
				"(or point redis.url at the other node's Redis)", ErrDataDirInUse, dir, who, path)
		}
		return nil, fmt.Errorf("embedded redis: locking %s: %w", path, err)
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("pid %d on %s, since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	return f, nil
}

// DataDirHolder reports whether another process holds dir's lock now, and
// what it wrote there (its pid, host and start): -check-config refuses a
// data directory a running node holds, as Start would.
func DataDirHolder(dir string) (holder string, held bool) {
	path := filepath.Join(dir, LockFile)
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		return strings.TrimSpace(string(b)), errors.Is(err, syscall.EWOULDBLOCK)
	}
	return "", false
}

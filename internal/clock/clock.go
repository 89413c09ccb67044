// Package clock is the node's wall clock where its time matters across
// nodes (job timestamps, the lease's clock check against Redis's TIME,
// the pipeline API's timestamp and nonce window, the pipeline notifier's
// silence limit): time.Now, shifted by an offset a test harness can set.
//
// The offset comes from a file named by ARCHIVEBOT_CLOCK_OFFSET_FILE: its
// content is a Go duration ("30s", "-30s", "0s"; empty: 0), re-read when
// the file changes, so a running node's clock can be skewed and put
// back. Unset (every deployment), Now is time.Now. The chaos soak uses it
// to skew one node's clock by ±30 s (doc/soak.md); it exists for that,
// not as a setting (a deployment's clocks are NTP's to keep).
package clock

import (
	"os"
	"strings"
	"sync"
	"time"
)

// EnvOffsetFile names the environment variable holding the offset file's
// path.
const EnvOffsetFile = "ARCHIVEBOT_CLOCK_OFFSET_FILE"

// recheck is how often the file's modification time is looked at.
const recheck = 100 * time.Millisecond

// FromEnv returns the node's clock: time.Now when EnvOffsetFile is unset,
// else an offset clock reading that file.
func FromEnv() func() time.Time {
	p := os.Getenv(EnvOffsetFile)
	if p == "" {
		return time.Now
	}
	return OffsetFile(p).Now
}

// Offset is a clock shifted by the duration a file holds.
type Offset struct {
	path string

	mu      sync.Mutex
	checked time.Time // monotonic: when the file was last looked at
	mtime   time.Time
	size    int64
	off     time.Duration
}

// OffsetFile returns the clock shifted by the duration in path (0 while
// the file is missing or unreadable).
func OffsetFile(path string) *Offset { return &Offset{path: path} }

// Now is time.Now plus the file's offset.
func (o *Offset) Now() time.Time {
	now := time.Now()
	return now.Add(o.offset(now))
}

func (o *Offset) offset(now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.checked.IsZero() && now.Sub(o.checked) < recheck {
		return o.off
	}
	o.checked = now
	fi, err := os.Stat(o.path)
	if err != nil {
		o.off, o.mtime, o.size = 0, time.Time{}, 0
		return 0
	}
	if fi.ModTime().Equal(o.mtime) && fi.Size() == o.size {
		return o.off
	}
	b, err := os.ReadFile(o.path)
	if err != nil {
		return o.off
	}
	o.mtime, o.size = fi.ModTime(), fi.Size()
	s := strings.TrimSpace(string(b))
	if s == "" {
		o.off = 0
		return 0
	}
	if d, err := time.ParseDuration(s); err == nil {
		o.off = d
	}
	return o.off
}

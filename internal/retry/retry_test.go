package retry

import (
	"net/http"
	"testing"
	"time"
)

// Backoff.Wait doubles from Min up to Max, attempt by attempt; with
// Jitter it stays within [half, whole) of the wait without it.
func TestBackoffWait(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	var got []time.Duration
	for n := -1; n <= 6; n++ {
		got = append(got, b.Wait(n))
	}
	want := []time.Duration{100, 100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	if w := (Backoff{Min: time.Second, Max: time.Second}).Wait(50); w != time.Second {
		t.Errorf("fixed backoff waits %v", w)
	}
	if w := (Backoff{}).Wait(1 << 30); w != 0 {
		t.Errorf("zero backoff waits %v", w)
	}
	j := Backoff{Min: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	seen := map[time.Duration]bool{}
	for range 200 {
		w := j.Wait(2)
		if w < 200*time.Millisecond || w >= 400*time.Millisecond {
			t.Fatalf("jittered wait %v outside [200ms, 400ms)", w)
		}
		seen[w] = true
	}
	if len(seen) < 2 {
		t.Error("jitter gave one value every time")
	}
}

// After reads delay-seconds and HTTP dates, and nothing else.
func TestAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Time
		ok   bool
	}{
		{"", time.Time{}, false},
		{"120", now.Add(2 * time.Minute), true},
		{" 0 ", now, true},
		{"-1", time.Time{}, false},
		{"1.5", time.Time{}, false},
		{"Wed, 02 Dec 2026 09:05:00 GMT", now.Add(5 * time.Minute), true},
		{"soon", time.Time{}, false},
	} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("Retry-After", tc.v)
		}
		got, ok := After(h, now)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("Retry-After %q: %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

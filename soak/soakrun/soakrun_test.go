package soakrun

import (
	"sync"
	"testing"
)

// TestEachRunsAllWidthAtATime: every index once, never more than width
// at once, and width 0 means one at a time.
func TestEachRunsAllWidthAtATime(t *testing.T) {
	for _, width := range []int{0, 1, 2, 5} {
		var mu sync.Mutex
		now, peak := 0, 0
		seen := map[int]int{}
		gate := make(chan struct{})
		go func() {
			for range 20 {
				gate <- struct{}{}
			}
		}()
		Each(20, width, func(i int) {
			mu.Lock()
			now++
			peak = max(peak, now)
			seen[i]++
			mu.Unlock()
			<-gate
			mu.Lock()
			now--
			mu.Unlock()
		})
		if len(seen) != 20 {
			t.Errorf("width %d: %d indices run, want 20", width, len(seen))
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("width %d: index %d run %d times", width, i, n)
			}
		}
		if want := max(width, 1); peak > want {
			t.Errorf("width %d: %d at once, want at most %d", width, peak, want)
		}
	}
}

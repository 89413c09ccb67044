package clock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOffsetFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "offset")
	c := OffsetFile(p)
	near := func(want time.Duration) {
		t.Helper()
		// The file is looked at again after recheck.
		time.Sleep(recheck + 10*time.Millisecond)
		got := time.Until(c.Now())
		if d := got - want; d < -time.Second || d > time.Second {
			t.Fatalf("offset %v, want about %v", got, want)
		}
	}
	near(0) // no file
	if err := os.WriteFile(p, []byte("30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	near(30 * time.Second)
	if err := os.WriteFile(p, []byte("-30s"), 0o644); err != nil {
		t.Fatal(err)
	}
	near(-30 * time.Second)
	// A file that does not parse keeps the last offset.
	if err := os.WriteFile(p, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	near(-30 * time.Second)
	if err := os.WriteFile(p, []byte(""), 0o644); err != nil {
		t.Fatal(err)
	}
	near(0)
	if err := os.WriteFile(p, []byte("-45s"), 0o644); err != nil {
		t.Fatal(err)
	}
	near(-45 * time.Second)
	os.Remove(p)
	near(0)
}

func TestFromEnvUnsetIsTimeNow(t *testing.T) {
	t.Setenv(EnvOffsetFile, "")
	c := FromEnv()
	if d := time.Until(c()); d < -time.Second || d > time.Second {
		t.Fatalf("unset: offset %v", d)
	}
	p := filepath.Join(t.TempDir(), "offset")
	os.WriteFile(p, []byte("1h"), 0o644)
	t.Setenv(EnvOffsetFile, p)
	if d := time.Until(FromEnv()()); d < 59*time.Minute {
		t.Fatalf("set: offset %v, want 1h", d)
	}
}

package embeddedredis

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The data directory holds every key pipelines and the bot write, the
// redis.password-protected data included: the write log (redis.aof.N) is
// created 0600 like the snapshot (redis.json), not 0644.
func TestDataFilesArePrivate(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	if err := rdb.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	check := func(when string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fi, err := os.Stat(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s: mode %v, want 0600", when, e.Name(), fi.Mode().Perm())
			}
		}
		if len(entries) == 0 {
			t.Fatalf("%s: no files", when)
		}
	}
	// While it runs the log segment is there; at Close the final
	// snapshot is written.
	check("running")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("stopped")
}

package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/archiveteam/archivebot-go/coordinator"
)

func crashCopy(t *testing.T, from string) string {
	to := t.TempDir()
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(from, e.Name()))
		os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
	}
	return to
}

func TestDbgCrash(t *testing.T) {
	dir := t.TempDir()
	for i, id := range []string{"job0", "job1", "job2"} {
		s := start(t, Options{DataDir: dir})
		c := client(t, s, "", 0)
		c.AddHook(s.SyncHook())
		for _, prev := range []string{"job0", "job1", "job2"}[:i] {
			if n, _ := c.Exists(ctx, prev).Result(); n != 1 {
				t.Fatalf("round %d: %s lost", i, prev)
			}
		}
		err := coordinator.NewStore(c).Register(ctx, coordinator.NewJob{Ident: id, URL: "http://" + id + ".example/",
			FetchDepth: "inf", Slug: "x-inf", StartedBy: "alice", StartedIn: "#a", DelayMin: 250,
			DelayMax: 375, Concurrency: 3, SettingsAge: 4, Queue: coordinator.KeyPending})
		if err != nil {
			t.Fatal(err)
		}
		dir = crashCopy(t, dir)
	}
}

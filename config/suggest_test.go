package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// An unknown key is named with its line and, when one is near, the key
// it most likely meant: a typo, or a key put in the wrong table.
func TestUnknownKeyDidYouMean(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	cases := []struct{ text, want string }{
		{"[reaper]\nthreshhold = 5\n", ":2: unknown key reaper.threshhold; did you mean reaper.threshold?"},
		{"[irc]\nchannel = [\"#a\"]\n", ":2: unknown key irc.channel; did you mean irc.channels?"},
		{"[redis]\nignore_sets_dir = \"x\"\n", ":2: unknown key redis.ignore_sets_dir; did you mean jobs.ignore_sets_dir?"},
		{"[http]\nlisten_addr = \"x\"\n", ":2: unknown key http.listen_addr\n"},
		{"[irc]\nbogus = 1\n", ":2: unknown key irc.bogus\n"},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), "c.toml")
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPartial(p, Overrides{})
		var probs Problems
		if !errors.As(err, &probs) || !strings.Contains(err.Error()+"\n", p+c.want) {
			t.Errorf("%q: %v; want %q", c.text, err, p+c.want)
		}
	}
}

// knownKeys, from which suggestions come, holds every key of
// config.example.toml.
func TestKnownKeysCoverTheExample(t *testing.T) {
	var m map[string]any
	if _, err := toml.DecodeFile("../config.example.toml", &m); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, m map[string]any)
	n := 0
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			n++
			if !slices.Contains(knownKeys(), prefix+k) {
				t.Errorf("config.example.toml's %s%s is not among the known keys", prefix, k)
			}
		}
	}
	walk("", m)
	if n < 50 {
		t.Fatalf("only %d keys read from config.example.toml", n)
	}
}

package bot

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/archiveteam/archivebot-go/internal/run"
)

//go:embed defaults
var defaultFiles embed.FS

// Catalog holds the named ignore sets and user-agent aliases, loaded from
// upstream-format JSON files: {"name":…,"patterns":[…]} and
// {"agents":[{"aliases":[…],"name":UA}]}. Other keys are ignored.
type Catalog struct {
	mu     sync.RWMutex
	sets   map[string][]string
	agents map[string]string

	setsDir, agentsDir string
	stamp              string
	log                *slog.Logger
}

// DefaultCatalog returns the sets and agents shipped in the binary.
func DefaultCatalog() *Catalog {
	c, err := LoadCatalog("", "", nil)
	if err != nil {
		panic("bot: embedded defaults are broken: " + err.Error())
	}
	return c
}

// LoadCatalog reads ignore sets from setsDir and user agents from agentsDir;
// an empty directory name selects the embedded defaults.
func LoadCatalog(setsDir, agentsDir string, log *slog.Logger) (*Catalog, error) {
	if log == nil {
		log = slog.Default()
	}
	c := &Catalog{setsDir: setsDir, agentsDir: agentsDir, log: log}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func dirFS(dir, embedded string) (fs.FS, string) {
	if dir == "" {
		sub, _ := fs.Sub(defaultFiles, embedded)
		return sub, "embedded " + embedded
	}
	return os.DirFS(dir), dir
}

// reload reads both directories; on any error the catalog is unchanged.
func (c *Catalog) reload() error {
	sets := map[string][]string{}
	agents := map[string]string{}
	sfs, sname := dirFS(c.setsDir, "defaults/ignore_sets")
	err := eachJSON(sfs, sname, func(name string, data []byte) error {
		var f struct {
			Name     string   `json:"name"`
			Patterns []string `json:"patterns"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return err
		}
		if f.Name == "" {
			return fmt.Errorf("no \"name\"")
		}
		for _, p := range f.Patterns {
			if err := ValidatePattern(p); err != nil {
				return fmt.Errorf("set %s: %w", f.Name, err)
			}
		}
		sets[f.Name] = append(sets[f.Name], f.Patterns...)
		return nil
	})
	if err != nil {
		return err
	}
	afs, aname := dirFS(c.agentsDir, "defaults/user_agents")
	err = eachJSON(afs, aname, func(name string, data []byte) error {
		var f struct {
			Agents []struct {
				Aliases []string `json:"aliases"`
				Name    string   `json:"name"`
			} `json:"agents"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return err
		}
		for _, a := range f.Agents {
			if a.Name == "" || strings.ContainsAny(a.Name, "\r\n\x00") {
				return fmt.Errorf("agent with aliases %v has no usable \"name\"", a.Aliases)
			}
			for _, al := range a.Aliases {
				agents[al] = a.Name
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	stamp := dirStamp(c.setsDir) + "|" + dirStamp(c.agentsDir)
	c.mu.Lock()
	c.sets, c.agents, c.stamp = sets, agents, stamp
	c.mu.Unlock()
	return nil
}

func eachJSON(fsys fs.FS, dirName string, fn func(name string, data []byte) error) error {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return fmt.Errorf("%s: %w", dirName, err)
	}
	if _, err := fs.Stat(fsys, "."); err != nil {
		return fmt.Errorf("%s: %w", dirName, err)
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dirName, n), err)
		}
		if err := fn(n, data); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dirName, n), err)
		}
	}
	return nil
}

// dirStamp summarizes names, sizes and modification times of a
// directory's JSON files, so that a change of any of them is noticed.
func dirStamp(dir string) string {
	if dir == "" {
		return "embedded"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "error:" + err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String()
}

// Watch reloads the catalog when a file in its directories changes (upstream
// watched the directory), checking every interval until ctx ends. A broken
// file is logged and the previous sets stay in force.
func (c *Catalog) Watch(ctx context.Context, interval time.Duration) {
	if c.setsDir == "" && c.agentsDir == "" {
		return
	}
	run.Every(ctx, c.log, "catalog watch", run.Schedule{Interval: interval}, func(context.Context) { c.CheckReload() })
}

// CheckReload reloads the catalog if its files changed since the last load.
// It reports whether a reload happened.
func (c *Catalog) CheckReload() bool {
	stamp := dirStamp(c.setsDir) + "|" + dirStamp(c.agentsDir)
	c.mu.RLock()
	same := stamp == c.stamp
	c.mu.RUnlock()
	if same {
		return false
	}
	if err := c.reload(); err != nil {
		c.log.Error("ignore sets / user agents not reloaded; previous ones stay in force", "err", err)
		// Remember the broken state so the error is logged once per change.
		c.mu.Lock()
		c.stamp = stamp
		c.mu.Unlock()
		return false
	}
	c.log.Info("reloaded ignore sets and user agents", "sets", len(c.SetNames()))
	return true
}

// Set returns the patterns of the named ignore set.
func (c *Catalog) Set(name string) ([]string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.sets[name]
	return p, ok
}

// SetNames lists the known ignore sets, sorted.
func (c *Catalog) SetNames() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.sets))
	for n := range c.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UserAgent resolves a user-agent alias.
func (c *Catalog) UserAgent(alias string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ua, ok := c.agents[alias]
	return ua, ok
}

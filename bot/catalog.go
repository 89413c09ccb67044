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

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/run"
)

//go:embed defaults
var defaultFiles embed.FS

// MaxCatalogFileBytes bounds one file of an ignore-set or user-agent
// directory: the catalog reads each file whole into memory, and a file
// written by mistake (a log, a dump) must not be. Upstream's largest,
// global.json, is 12.6 KB; a bigger file is refused alone and named.
const MaxCatalogFileBytes = 1 << 20

// Catalog holds the named ignore sets and user-agent aliases, loaded from
// upstream-format JSON files: {"name":…,"patterns":[…]} and
// {"agents":[{"aliases":[…],"name":UA}]}. Other keys are ignored, and so
// are files whose names do not end in .json (upstream's db/ignore_patterns
// holds the scripts that write its mediawiki sets).
//
// What the node cannot use is refused alone: a pattern that does not
// compile, or is too long, is left out of its set; a file that is not
// JSON, or has no set name, is left out. Each is a Problem, logged at
// WARN when the catalog is loaded and counted in
// archivebot_catalog_refused_total. A reload that refuses something in a
// set (or a whole file) keeps what that set (or file) had before.
type Catalog struct {
	mu     sync.RWMutex
	sets   map[string][]string
	agents map[string]string
	// setFiles and agentFiles remember what each file gave at the last
	// load, so that a file refused on reload keeps its sets and agents.
	setFiles   map[string][]string          // file → set names
	agentFiles map[string]map[string]string // file → alias → agent
	problems   []Problem
	skipped    []string

	setsDir, agentsDir string
	stamp              string
	log                *slog.Logger
}

// Problem is one thing of a catalog directory the node refused: a
// pattern (Pattern set), an agent (Agent set), or a whole file.
type Problem struct {
	File    string // the file's path, as the directory was given
	Set     string // the set's name, when known
	Pattern string // the refused pattern
	Agent   string // the refused agent's aliases
	Reason  string
	// Kept is how many patterns of the set (or sets and agents of the
	// file) stay in force from the previous load; 0 on a first load.
	Kept int
}

// Kind is "pattern", "agent" or "file": the label of
// archivebot_catalog_refused_total.
func (p Problem) Kind() string {
	switch {
	case p.Pattern != "":
		return "pattern"
	case p.Agent != "":
		return "agent"
	}
	return "file"
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Set != "" {
		fmt.Fprintf(&b, ": set %s", p.Set)
	}
	switch {
	case p.Pattern != "":
		fmt.Fprintf(&b, ": pattern %s refused: %s", quoteCut(p.Pattern, 80), p.Reason)
	case p.Agent != "":
		fmt.Fprintf(&b, ": agent %s refused: %s", p.Agent, p.Reason)
	default:
		fmt.Fprintf(&b, ": file refused: %s", p.Reason)
	}
	if p.Kept > 0 {
		fmt.Fprintf(&b, " (its %d from the previous load stay in force)", p.Kept)
	}
	return b.String()
}

// quoteCut quotes s, cut to about n bytes with its length said.
func quoteCut(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// DefaultCatalog returns the sets and agents shipped in the binary.
func DefaultCatalog() *Catalog {
	c, err := LoadCatalog("", "", slog.New(slog.DiscardHandler))
	if err == nil && len(c.problems) > 0 {
		err = fmt.Errorf("%s", c.problems[0])
	}
	if err != nil {
		panic("bot: embedded defaults are broken: " + err.Error())
	}
	return c
}

// LoadCatalog reads ignore sets from setsDir and user agents from agentsDir;
// an empty directory name selects the embedded defaults. Only a directory
// that cannot be read is an error; what is refused inside it is logged
// and listed by Problems.
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
		return sub, "built-in " + embedded
	}
	return os.DirFS(dir), dir
}

// loaded is what one reading of the directories found.
type loaded struct {
	sets       map[string][]string
	agents     map[string]string
	setFiles   map[string][]string
	agentFiles map[string]map[string]string
	problems   []Problem
	skipped    []string
}

// reload reads both directories. A directory that cannot be read leaves
// the catalog unchanged and is the error; what is refused inside one
// keeps, for its set or file, what the previous load had.
func (c *Catalog) reload() error {
	stamp := dirStamp(c.setsDir) + "|" + dirStamp(c.agentsDir)
	l := loaded{sets: map[string][]string{}, agents: map[string]string{},
		setFiles: map[string][]string{}, agentFiles: map[string]map[string]string{}}
	sfs, sname := dirFS(c.setsDir, "defaults/ignore_sets")
	if err := eachJSON(sfs, sname, &l, l.readSet); err != nil {
		return err
	}
	afs, aname := dirFS(c.agentsDir, "defaults/user_agents")
	if err := eachJSON(afs, aname, &l, l.readAgents); err != nil {
		return err
	}
	c.mu.Lock()
	first := c.sets == nil
	if !first {
		c.keepPrevious(&l)
	}
	c.sets, c.agents, c.setFiles, c.agentFiles = l.sets, l.agents, l.setFiles, l.agentFiles
	c.problems, c.skipped, c.stamp = l.problems, l.skipped, stamp
	c.mu.Unlock()
	for _, p := range l.problems {
		metrics.CatalogRefused(p.Kind())
		c.log.Warn("ignore sets / user agents: "+p.String(), "kind", p.Kind())
	}
	return nil
}

// keepPrevious puts back, for each set with a refused pattern, and each
// file refused whole or with a refused agent, what the previous load had
// from it. c.mu is held.
func (c *Catalog) keepPrevious(l *loaded) {
	for i := range l.problems {
		p := &l.problems[i]
		switch {
		case p.Set != "":
			if old, ok := c.sets[p.Set]; ok {
				l.sets[p.Set] = old
				p.Kept = len(old)
			}
		default:
			for _, name := range c.setFiles[p.File] {
				if old, ok := c.sets[name]; ok {
					l.sets[name] = old
					p.Kept += len(old)
				}
			}
			if old, ok := c.setFiles[p.File]; ok {
				l.setFiles[p.File] = old
			}
			for al, ua := range c.agentFiles[p.File] {
				l.agents[al] = ua
				p.Kept++
			}
			if old, ok := c.agentFiles[p.File]; ok {
				l.agentFiles[p.File] = old
			}
		}
	}
}

// readSet reads one ignore-set file; a pattern the node cannot use is
// left out and recorded.
func (l *loaded) readSet(file string, data []byte) {
	var f struct {
		Name     string   `json:"name"`
		Patterns []string `json:"patterns"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		l.problems = append(l.problems, Problem{File: file, Reason: "not an ignore set: " + err.Error()})
		return
	}
	if f.Name == "" {
		l.problems = append(l.problems, Problem{File: file, Reason: `no "name"`})
		return
	}
	good := make([]string, 0, len(f.Patterns))
	for _, p := range f.Patterns {
		if err := ValidatePattern(p); err != nil {
			l.problems = append(l.problems, Problem{File: file, Set: f.Name, Pattern: p, Reason: err.Error()})
			continue
		}
		good = append(good, p)
	}
	l.sets[f.Name] = append(l.sets[f.Name], good...)
	l.setFiles[file] = append(l.setFiles[file], f.Name)
}

// readAgents reads one user-agent file; an agent without a usable name
// is left out and recorded.
func (l *loaded) readAgents(file string, data []byte) {
	var f struct {
		Agents []struct {
			Aliases []string `json:"aliases"`
			Name    string   `json:"name"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		l.problems = append(l.problems, Problem{File: file, Reason: "not a user-agent file: " + err.Error()})
		return
	}
	mine := map[string]string{}
	for _, a := range f.Agents {
		if a.Name == "" || strings.ContainsAny(a.Name, "\r\n\x00") {
			l.problems = append(l.problems, Problem{File: file, Agent: strings.Join(a.Aliases, ","),
				Reason: `no usable "name" (empty, or with a line break or NUL)`})
			continue
		}
		for _, al := range a.Aliases {
			l.agents[al] = a.Name
			mine[al] = a.Name
		}
	}
	l.agentFiles[file] = mine
}

// eachJSON calls fn with each .json file of fsys, in name order, and
// records the other files as skipped. A file that cannot be read, or is
// too big, is recorded as a problem; only a directory that cannot be
// listed is an error.
func eachJSON(fsys fs.FS, dirName string, l *loaded, fn func(file string, data []byte)) error {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return fmt.Errorf("%s: %w", dirName, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		n, file := e.Name(), filepath.Join(dirName, e.Name())
		if e.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		if !strings.HasSuffix(n, ".json") {
			l.skipped = append(l.skipped, file)
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() > MaxCatalogFileBytes {
			l.problems = append(l.problems, Problem{File: file,
				Reason: fmt.Sprintf("%d bytes; the limit is %d", info.Size(), MaxCatalogFileBytes)})
			continue
		}
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			l.problems = append(l.problems, Problem{File: file, Reason: err.Error()})
			continue
		}
		fn(file, data)
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
// watched the directory), checking every interval until ctx ends. A
// refused pattern or file is logged and its set keeps its previous
// patterns.
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
	c.log.Info("reloaded ignore sets and user agents", "catalog", c.Source(), "sets", len(c.SetNames()), "refused", len(c.Problems()))
	return true
}

// Problems lists what the last load refused.
func (c *Catalog) Problems() []Problem {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]Problem(nil), c.problems...)
}

// Source says where the ignore sets come from: "built-in" or the
// directory.
func (c *Catalog) Source() string {
	if c.setsDir == "" {
		return "built-in"
	}
	return c.setsDir
}

// Describe is one line on the catalog in force, for the start and
// -check-config: which catalog (built-in or the directories), how many
// sets and agents, what was skipped and refused.
func (c *Catalog) Describe() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var b strings.Builder
	if c.setsDir == "" {
		fmt.Fprintf(&b, "Ignore sets: built in (%d, not upstream's; jobs.ignore_sets_dir reads a checkout of upstream's db/ignore_patterns)", len(c.sets))
	} else {
		fmt.Fprintf(&b, "Ignore sets: %d from %s (watched", len(c.sets), c.setsDir)
		if n := len(c.skipped); n > 0 {
			names := make([]string, n)
			for i, s := range c.skipped {
				names[i] = filepath.Base(s)
			}
			fmt.Fprintf(&b, "; skipped, not .json: %s", strings.Join(names, ", "))
		}
		b.WriteString(")")
	}
	if c.agentsDir == "" {
		fmt.Fprintf(&b, "; user agents: built in (%d aliases)", len(c.agents))
	} else {
		fmt.Fprintf(&b, "; user agents: %d aliases from %s (watched)", len(c.agents), c.agentsDir)
	}
	if n := len(c.problems); n > 0 {
		fmt.Fprintf(&b, "; %d refused, named in the warnings", n)
	}
	return b.String()
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

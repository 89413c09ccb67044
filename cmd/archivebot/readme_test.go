package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// readmeTranscript is one shell block of the README's quick start: the
// command after "$ ", the lines typed into it (starting with "!") and the
// lines it prints.
type readmeTranscript struct {
	command string
	inputs  []string
	output  []string
}

// readmeTranscripts reads the indented blocks that follow the markers
// "<!-- transcript: NAME -->" in README.md.
func readmeTranscripts(t *testing.T, readme string) map[string]readmeTranscript {
	t.Helper()
	out := map[string]readmeTranscript{}
	marker := regexp.MustCompile(`^<!-- transcript: ([a-z-]+) -->$`)
	sc := bufio.NewScanner(strings.NewReader(readme))
	name, inBlock := "", false
	var cur readmeTranscript
	flush := func() {
		if name != "" {
			out[name] = cur
		}
		name, inBlock, cur = "", false, readmeTranscript{}
	}
	for sc.Scan() {
		line := sc.Text()
		if m := marker.FindStringSubmatch(line); m != nil {
			flush()
			name = m[1]
			continue
		}
		if name == "" {
			continue
		}
		body, indented := strings.CutPrefix(line, "    ")
		switch {
		case indented:
			inBlock = true
			switch {
			case strings.HasPrefix(body, "$ "):
				cur.command = strings.TrimSpace(strings.SplitN(body[2:], "#", 2)[0])
			case strings.HasPrefix(body, "!"):
				cur.inputs = append(cur.inputs, body)
			default:
				cur.output = append(cur.output, body)
			}
		case inBlock || strings.TrimSpace(line) != "":
			if inBlock {
				flush()
			}
		}
	}
	flush()
	for _, n := range []string{"node", "simulator", "node-after"} {
		if _, ok := out[n]; !ok {
			t.Fatalf("README.md has no block after <!-- transcript: %s -->", n)
		}
	}
	return out
}

var (
	clockPrefix = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d `)
	pipelineID  = regexp.MustCompile(`pipeline:[0-9a-f]{32}`)
)

// normalize hides what changes from run to run: the simulator's clock and
// its pipeline's id.
func normalize(s string) string {
	return pipelineID.ReplaceAllString(clockPrefix.ReplaceAllString(s, "HH:MM:SS.mmm "), "pipeline:ID")
}

// inOrder reports the first expected line that is not in got, in order.
func inOrder(want []string, got string) (missing string, ok bool) {
	lines := strings.Split(got, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && normalize(lines[i]) != normalize(w) {
			i++
		}
		if i == len(lines) {
			return w, false
		}
		i++
	}
	return "", true
}

// The README's quick start is what the program prints today:
// the node's first lines (the data directory under the user's state
// directory), the console's answers to what the README types, the
// simulator's lines, and the start and finish notices, with the console
// nick being the user's name. The README writes the user as "you" and the
// default addresses; the run uses a home directory and free ports of its
// own, substituted before comparing.
func TestReadmeQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeTranscripts(t, string(readme))
	nodeArgs := strings.Fields(blocks["node"].command)
	if len(nodeArgs) < 3 || strings.Join(nodeArgs[:3], " ") != "go run ./cmd/archivebot" {
		t.Fatalf("the node's block runs %q, want the quick start's go run ./cmd/archivebot", blocks["node"].command)
	}
	simArgs := strings.Fields(blocks["simulator"].command)
	if len(simArgs) < 4 || strings.Join(simArgs[:4], " ") != "go run ./cmd/archivebot simulate-pipeline" {
		t.Fatalf("the simulator's block runs %q", blocks["simulator"].command)
	}

	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("ARCHIVEBOT_DATA_DIR", "")
	t.Setenv("ARCHIVEBOT_CONFIG", "")
	redisAddr, webAddr, streamAddr := freePort(t), freePort(t), freePort(t)
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", redisAddr)
	t.Setenv("ARCHIVEBOT_HTTP_LISTEN", webAddr)
	t.Setenv("ARCHIVEBOT_STREAM_LISTEN", streamAddr)
	subst := strings.NewReplacer(
		"/home/you", home,
		"you: ", localUser()+": ",
		"127.0.0.1:6379", redisAddr,
		"127.0.0.1:4567", webAddr,
		"127.0.0.1:4568", streamAddr,
	)
	expect := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = subst.Replace(l)
		}
		return out
	}

	var lastWant []string
	stdinR, stdinW := io.Pipe()
	// Standard output and standard error in one, as a terminal shows them.
	var nodeOut testproc.Buffer
	done := make(chan int, 1)
	go func() { done <- run(nodeArgs[3:], stdinR, &nodeOut, &nodeOut) }()
	defer func() {
		stdinW.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the node did not stop at the end of its input")
		}
	}()
	// The node's lines up to the console's prompt, then its answers to
	// what the README types.
	node := blocks["node"]
	t.Cleanup(func() {
		if t.Failed() {
			missing, _ := inOrder(lastWant, nodeOut.String())
			t.Logf("first README line not printed: %q\nthe node printed (standard output and error):\n%s", missing, nodeOut.String())
		}
	})
	waitFor := func(what string, want []string) {
		t.Helper()
		lastWant = want
		testproc.EventuallyWithin(t, 30*time.Second, what+": the README's lines, in order, in the node's output", func() bool {
			_, ok := inOrder(want, nodeOut.String())
			return ok
		})
	}
	header := expect(node.output[:min(len(node.output), 5)])
	waitFor("the node's start", header)
	for _, in := range node.inputs {
		io.WriteString(stdinW, in+"\n")
	}
	waitFor("the console's answers", expect(node.output))

	// The simulator, as the README runs it, against this node's Redis.
	var simOut, simErr testproc.Buffer
	args := append(simArgs[3:], "-redis", "redis://"+redisAddr+"/0")
	if code := run(args, strings.NewReader(""), &simOut, &simErr); code != 0 {
		t.Fatalf("simulator: exit %d\n%s\n%s", code, simOut.String(), simErr.String())
	}
	want := expect(blocks["simulator"].output)
	// The README's first line names the default Redis; the run was told
	// this node's (the substitution above gives its address).
	if missing, ok := inOrder(want, simOut.String()); !ok {
		t.Fatalf("simulator: the README shows %q, the run printed:\n%s", missing, simOut.String())
	}
	waitFor("the node's notices", expect(blocks["node-after"].output))
	// Nothing else comes between the README's lines (no log line): what
	// the terminal shows is the transcript.
	shown := map[string]bool{}
	for _, l := range expect(append(append([]string{}, node.output...), blocks["node-after"].output...)) {
		shown[normalize(l)] = true
	}
	for _, l := range strings.Split(strings.TrimRight(nodeOut.String(), "\n"), "\n") {
		switch {
		case shown[normalize(l)]:
		case strings.Contains(l, " level=WARN ") || strings.Contains(l, " level=ERROR "):
			// What -log-level warn lets through, as the README says (a
			// loaded machine may give one).
			t.Logf("a warning among the README's lines: %s", l)
		default:
			t.Errorf("the console printed a line the README does not show: %q", l)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "state", "archivebot")); err != nil {
		t.Errorf("the data directory the README shows was not used: %v", err)
	}
}

// The README's commands write nothing into the working tree: every file
// a command line writes or names (a redirect, -key, -config) is an
// absolute path or under the home directory, so that following the
// walk-through leaves no archivebot.toml and no private key (alpha.key)
// to be committed by mistake; the ones that were written there are
// ignored by git all the same.
func TestReadmeWritesNoFileInTheTree(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file := regexp.MustCompile(`(?:^|\s)(?:>|-key|-config)\s+([^\s|;&]+)`)
	n := 0
	for _, line := range strings.Split(string(readme), "\n") {
		cmd, ok := strings.CutPrefix(line, "    $ ")
		if !ok {
			continue
		}
		cmd = strings.SplitN(cmd, "  #", 2)[0]
		for _, m := range file.FindAllStringSubmatch(cmd, -1) {
			n++
			if p := m[1]; !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~/") {
				t.Errorf("the README's command %q writes or names %s in the working tree", cmd, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no command of the README names a file: the test reads nothing")
	}
	gitignore, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/archivebot.toml", "*.key"} {
		if !strings.Contains(string(gitignore), "\n"+want+"\n") {
			t.Errorf(".gitignore does not ignore %s", want)
		}
	}
}

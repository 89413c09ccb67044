package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// dockerfile is what the Dockerfile says about running the binary.
type dockerfile struct {
	env         map[string]string
	entrypoint  []string
	cmd         []string
	healthcheck []string
	volume      string
	// build is the shell command of the RUN line that runs go build.
	build  string
	expose []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines; only the final stage matters, so later
	// instructions overwrite earlier ones.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	d := dockerfile{env: map[string]string{}}
	kv := regexp.MustCompile(`([A-Z_]+)=(\S+)`)
	for _, line := range strings.Split(text, "\n") {
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch instr {
		case "FROM":
			d.env = map[string]string{}
		case "ENV":
			for _, m := range kv.FindAllStringSubmatch(rest, -1) {
				d.env[m[1]] = m[2]
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = rest
			}
		case "EXPOSE":
			d.expose = strings.Fields(rest)
		case "HEALTHCHECK":
			_, runner, ok := strings.Cut(rest, " CMD ")
			if err := json.Unmarshal([]byte(runner), &d.healthcheck); !ok || err != nil {
				t.Fatalf("HEALTHCHECK CMD not in exec form: %q", rest)
			}
		case "ENTRYPOINT", "CMD", "VOLUME":
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("%s not in exec form: %v", instr, err)
			}
			switch instr {
			case "ENTRYPOINT":
				d.entrypoint = v
			case "CMD":
				d.cmd = v
			default:
				d.volume = v[0]
			}
		}
	}
	if len(d.entrypoint) != 1 || d.volume == "" || d.env["ARCHIVEBOT_DATA_DIR"] != d.volume {
		t.Fatalf("Dockerfile: entrypoint %q, volume %q, env %v", d.entrypoint, d.volume, d.env)
	}
	return d
}

// TestDockerCommand runs the node as the image does: the ENTRYPOINT with
// the CMD's arguments and the ENV, the container's paths mapped to
// temporary ones (the data volume, the mounted configuration) and the
// embedded Redis on a free loopback port instead of 0.0.0.0:6379. It
// checks the data directory is the volume, printed at start, and that
// SIGTERM (docker stop) saves the snapshot there.
func TestDockerCommand(t *testing.T) {
	d := readDockerfile(t)
	root := t.TempDir()
	volume := filepath.Join(root, "data")
	os.Mkdir(volume, 0o755)
	mapPath := func(s string) string {
		if strings.HasPrefix(s, "/etc/archivebot/") {
			return filepath.Join(root, filepath.Base(s))
		}
		if s == d.volume {
			return volume
		}
		return s
	}
	args := make([]string, len(d.cmd))
	for i, a := range d.cmd {
		args[i] = mapPath(a)
	}
	// The configuration the Dockerfile's comment asks for.
	cfgPath := args[len(args)-1]
	if err := os.WriteFile(cfgPath, []byte(`[irc]
server = "irc://127.0.0.1:1"
channels = ["#archivebot"]
[redis]
password = "secret"
[http]
listen = "127.0.0.1:0"
stream_listen = "127.0.0.1:0"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{envChild + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for k, v := range d.env {
		if k == "ARCHIVEBOT_REDIS_LISTEN" {
			v = "127.0.0.1:0"
		}
		env = append(env, k+"="+mapPath(v))
	}
	c := startChildWith(t, args, testproc.Options{Env: env})
	exe := c.Cmd.Path
	c.log.waitFor(t, 0, "Data directory: "+volume)
	c.log.waitFor(t, 0, "pipelines connect with REDIS_URL=redis://:xxxxx@127.0.0.1:")
	// The HEALTHCHECK, run as the image runs it (its web address moved to
	// the child's free port): the node answers /readyz with 503, IRC not
	// being connected, so it exits 1 saying so; -live asks /healthz.
	line, _ := c.log.waitFor(t, 0, "Web API on http://")
	webAddr := strings.TrimPrefix(line[strings.Index(line, "http://"):], "http://")
	webAddr, _, _ = strings.Cut(webAddr, "/")
	if len(d.healthcheck) < 2 || d.healthcheck[0] != d.entrypoint[0] {
		t.Fatalf("HEALTHCHECK %q does not run the binary", d.healthcheck)
	}
	hc := func(extra ...string) (int, string) {
		var args []string
		for _, a := range d.healthcheck[1:] {
			args = append(args, mapPath(a))
		}
		cmd := exec.Command(exe, append(args, extra...)...)
		cmd.Env = append(slices.Clone(env), "ARCHIVEBOT_HTTP_LISTEN="+webAddr)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := hc(); code != 1 || !strings.Contains(out, "/readyz: not ready (503") || !strings.Contains(out, "not connected") {
		t.Fatalf("healthcheck: exit %d: %s", code, out)
	}
	if code, out := hc("-live"); code != 0 || !strings.Contains(out, "/healthz: 200") {
		t.Fatalf("healthcheck -live: exit %d: %s", code, out)
	}
	if !slices.Contains(d.expose, "4568") || !slices.Contains(d.expose, "4567") || !slices.Contains(d.expose, "6379") {
		t.Errorf("EXPOSE %q", d.expose)
	}
	if code, took := c.term(); code != 0 {
		t.Fatalf("exit %d after SIGTERM (%v)", code, took.Round(time.Millisecond))
	}
	if _, err := os.Stat(filepath.Join(volume, "redis.json")); err != nil {
		t.Fatalf("no snapshot in the volume: %v", err)
	}
}

// The image's build stamps the commit: the Dockerfile's go build line,
// run as it is (its /out paths moved to a temporary directory), gives a
// binary whose `version` names HEAD. The build context keeps .git for it.
func TestDockerBuildStampsVersion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout: %v", err)
	}
	d := readDockerfile(t)
	if !strings.Contains(d.build, "-X main.stampRevision=") || !strings.Contains(d.build, "/out/archivebot") {
		t.Fatalf("build line stamps no revision: %q", d.build)
	}
	out := t.TempDir()
	line := strings.ReplaceAll(d.build, "/out/", out+"/")
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	v, err := exec.Command(filepath.Join(out, "archivebot"), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v), "revision "+strings.TrimSpace(string(head))) {
		t.Fatalf("version %q does not name HEAD %s", v, head)
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l == ".git" || l == ".git/" || l == "**/.git" {
			t.Errorf(".dockerignore drops %s, which the stamp needs", l)
		}
	}
}

// The unit's Documentation= points at this project's own pages (its
// module's repository, files that exist here), not upstream's repository,
// whose documentation is of the Ruby bot.
func TestServiceUnitDocumentation(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/archivebot.service")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module "))
	prefix := "https://" + module + "/blob/main/"
	var urls []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "Documentation="); ok {
			urls = append(urls, strings.Fields(v)...)
		}
	}
	if len(urls) == 0 {
		t.Fatal("the unit has no Documentation=")
	}
	for _, u := range urls {
		file, ok := strings.CutPrefix(u, prefix)
		if !ok {
			t.Errorf("Documentation=%s: want this project's pages, %s…", u, prefix)
			continue
		}
		if _, err := os.Stat(filepath.Join("..", "..", file)); err != nil {
			t.Errorf("Documentation=%s: %v", u, err)
		}
	}
}

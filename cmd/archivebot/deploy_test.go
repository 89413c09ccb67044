package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dockerfile is what the Dockerfile says about running the binary.
type dockerfile struct {
	env        map[string]string
	entrypoint []string
	cmd        []string
	volume     string
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, log: newLineLog(), exited: make(chan struct{})}
	c.cmd = exec.Command(exe, args...)
	env := []string{envChild + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for k, v := range d.env {
		if k == "ARCHIVEBOT_REDIS_LISTEN" {
			v = "127.0.0.1:0"
		}
		env = append(env, k+"="+mapPath(v))
	}
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		c.state = c.cmd.ProcessState
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("log:\n%s", c.log.tail(100))
		}
	})
	c.log.waitFor(t, 0, "Data directory: "+volume)
	c.log.waitFor(t, 0, "pipelines connect with REDIS_URL=redis://:secret@127.0.0.1:")
	if code, took := c.term(); code != 0 {
		t.Fatalf("exit %d after SIGTERM (%v)", code, took.Round(time.Millisecond))
	}
	if _, err := os.Stat(filepath.Join(volume, "redis.json")); err != nil {
		t.Fatalf("no snapshot in the volume: %v", err)
	}
}

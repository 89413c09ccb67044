package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/embeddedredis"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// freeListeners points every listener of a run at a free port (and the
// data directory at a temporary one), so that -check-config, which binds
// them, does not depend on what else runs on the machine.
func freeListeners(t *testing.T) {
	t.Helper()
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", "127.0.0.1:0")
	t.Setenv("ARCHIVEBOT_HTTP_LISTEN", "127.0.0.1:0")
	t.Setenv("ARCHIVEBOT_STREAM_LISTEN", "127.0.0.1:0")
	t.Setenv("ARCHIVEBOT_DATA_DIR", t.TempDir())
}

func checkRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"-check-config"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// heldDataDir returns a data directory an embedded Redis holds until the
// test ends.
func heldDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	srv, err := embeddedredis.Start(embeddedredis.Options{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return dir
}

// takenPort returns an address that is in use until the test ends.
func takenPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// -check-config refuses what a run refuses: a listen address in use (each
// of the three), and says when the Redis of the configuration (a URL, or
// sentinels) does not answer.
func TestCheckConfigDoesWhatARunDoes(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		toml string
		want string
	}{
		{"web port in use", map[string]string{"ARCHIVEBOT_HTTP_LISTEN": takenPort(t)}, "", "http.listen"},
		{"stream port in use", map[string]string{"ARCHIVEBOT_STREAM_LISTEN": takenPort(t)}, "", "http.stream_listen"},
		{"embedded Redis port in use", map[string]string{"ARCHIVEBOT_REDIS_LISTEN": takenPort(t)}, "", "redis.listen"},
		{"unreachable Redis", map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0"}, "", "does not answer"},
		{"unreachable sentinels", nil, "[redis]\nsentinels = [\"127.0.0.1:1\"]\nmaster_name = \"m\"\n", "redis.sentinels"},
		{"data dir is a file", map[string]string{"ARCHIVEBOT_DATA_DIR": writeTemp(t, "file", "x")}, "", "redis.data_dir"},
		{"data dir held by a running node", map[string]string{"ARCHIVEBOT_DATA_DIR": heldDataDir(t)}, "", "redis.data_dir: embedded redis: data directory in use"},
		// The run failed on it after "configuration OK".
		{"pipeline API port in use", nil, "[pipelines]\nlisten = \"" + takenPort(t) + "\"\n", "pipelines.listen: " + "127.0.0.1"},
		// Two listeners on one address: each binds alone, the run cannot
		// hold both.
		{"pipeline API on the web port", nil, "[pipelines]\nlisten = \"127.0.0.1:PORT\"\n[http]\nlisten = \"127.0.0.1:PORT\"\n", "pipelines.listen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", "")
			freeListeners(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if strings.Contains(c.toml, "PORT") {
				t.Setenv("ARCHIVEBOT_HTTP_LISTEN", "")
				c.toml = strings.ReplaceAll(c.toml, "127.0.0.1:PORT", freePort(t))
			}
			cfg := writeTemp(t, "c.toml", c.toml)
			code, out, errs := checkRun(t, "-config", cfg)
			if code != 1 || !strings.Contains(errs, c.want) || strings.Contains(out, "OK") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want a refusal naming %s", code, out, errs, c.want)
			}
		})
	}
	t.Run("all free", func(t *testing.T) {
		t.Setenv("REDIS_URL", "")
		freeListeners(t)
		if code, out, errs := checkRun(t, "-config", writeTemp(t, "c.toml", "")); code != 0 || !strings.Contains(out, "configuration OK") {
			t.Fatalf("exit %d, %q %q", code, out, errs)
		}
	})
}

// The warning a run prints for an embedded Redis open to other machines
// without a password, -check-config prints too (and still passes, as the
// run starts).
func TestCheckConfigWarnsAsARun(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", "0.0.0.0:0")
	code, out, errs := checkRun(t, "-config", writeTemp(t, "c.toml", ""))
	if code != 0 || !strings.Contains(out, "configuration OK") || !strings.Contains(errs, "level=WARN") ||
		!strings.Contains(errs, "without a password") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", "127.0.0.1:0")
	if _, _, errs := checkRun(t, "-config", writeTemp(t, "c.toml", "")); strings.Contains(errs, "WARN") {
		t.Fatalf("warning on loopback: %q", errs)
	}
}

// The "without a configuration file:" hint is given only without -config.
func TestCheckConfigHintOnlyWithoutConfig(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	t.Setenv("ARCHIVEBOT_CONFIG", "")
	t.Setenv("ARCHIVEBOT_REDIS_LISTEN", takenPort(t))
	code, _, errs := checkRun(t)
	if code != 1 || !strings.Contains(errs, "without a configuration file:") {
		t.Fatalf("without -config: exit %d, %q", code, errs)
	}
	code, _, errs = checkRun(t, "-config", writeTemp(t, "c.toml", ""))
	if code != 1 || strings.Contains(errs, "without a configuration file") {
		t.Fatalf("with -config: exit %d, %q", code, errs)
	}
}

// -http-listen and -stream-listen move the web listeners as the variables
// do, and win over them.
func TestHTTPListenFlags(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	taken := takenPort(t)
	t.Setenv("ARCHIVEBOT_HTTP_LISTEN", taken)
	if code, _, errs := checkRun(t, "-config", writeTemp(t, "c.toml", "")); code != 1 || !strings.Contains(errs, taken) {
		t.Fatalf("env: exit %d, %q", code, errs)
	}
	if code, _, errs := checkRun(t, "-http-listen", "127.0.0.1:0", "-config", writeTemp(t, "c.toml", "")); code != 0 {
		t.Fatalf("-http-listen: exit %d, %q", code, errs)
	}
	if code, _, errs := checkRun(t, "-http-listen", "127.0.0.1:0", "-stream-listen", taken, "-config", writeTemp(t, "c.toml", "")); code != 1 || !strings.Contains(errs, "http.stream_listen") {
		t.Fatalf("-stream-listen: exit %d, %q", code, errs)
	}
}

func TestCheckConfig(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	var out, errb bytes.Buffer
	if code := run([]string{"-check-config", "-config", "../../config.example.toml"}, nil, &out, &errb); code != 0 {
		t.Fatalf("example config refused: %s", errb.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[reaper]\nthreshhold = 5\n"), 0o644)
	out.Reset()
	errb.Reset()
	if code := run([]string{"-check-config", "-config", bad}, nil, &out, &errb); code == 0 || !strings.Contains(errb.String(), "reaper.threshhold") {
		t.Fatalf("bad config: code %d, %s", code, errb.String())
	}
}

// Each case is something a real start refuses: -check-config must refuse
// it too, naming the key.
func TestCheckConfigCases(t *testing.T) {
	dir := t.TempDir()
	// A directory that cannot be listed stops a start; a bad pattern or
	// file in one does not (TestCatalogFixturesCheckAndStart).
	badSets := filepath.Join(dir, "missing")
	badAgents := filepath.Join(dir, "agents")
	os.WriteFile(badAgents, []byte(`{"agents": []}`), 0o644)
	cases := []struct {
		name, toml string
		env        map[string]string
		key        string
	}{
		{"redis url without colon", "[redis]\nurl = \"redis//localhost:6379\"\n", nil, "redis.url"},
		{"redis url of another scheme", "[redis]\nurl = \"http://localhost:6379\"\n", nil, "redis.url"},
		{"REDIS_URL unparsable", "", map[string]string{"REDIS_URL": "localhost:6379"}, "redis.url"},
		{"redis listen port out of range", "[redis]\nlisten = \"127.0.0.1:99999\"\n", nil, "redis.listen"},
		{"redis listen from the environment", "", map[string]string{"ARCHIVEBOT_REDIS_LISTEN": "127.0.0.1:65536"}, "redis.listen"},
		{"http listen port out of range", "[http]\nlisten = \"127.0.0.1:70000\"\n", nil, "http.listen"},
		{"http listen without port", "[http]\nlisten = \"127.0.0.1\"\n", nil, "http.listen"},
		{"unreadable TLS CA", "[irc]\nserver = \"ircs://irc.example.net:6697\"\nchannels = [\"#a\"]\ntls_ca = \"" + filepath.Join(dir, "missing.pem") + "\"\n", nil, "irc.tls_ca"},
		{"ignore sets directory missing", "[jobs]\nignore_sets_dir = \"" + badSets + "\"\n", nil, "jobs.ignore_sets_dir"},
		{"user agents directory is a file", "[jobs]\nuser_agents_dir = \"" + badAgents + "\"\n", nil, "jobs.user_agents_dir"},
		{"server without channels", "[irc]\nserver = \"irc://irc.example.net:6667\"\n", nil, "irc.channels"},
		{"log format", "[log]\nformat = \"xml\"\n", nil, "log.format"},
		{"log level", "[log]\nlevel = \"loud\"\n", nil, "log.level"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", "")
			freeListeners(t)
			// The file's own listen addresses are what the case checks.
			if strings.Contains(c.toml, "[http]\nlisten") {
				t.Setenv("ARCHIVEBOT_HTTP_LISTEN", "")
			}
			if strings.Contains(c.toml, "[redis]\nlisten") {
				t.Setenv("ARCHIVEBOT_REDIS_LISTEN", "")
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			p := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(p, []byte(c.toml), 0o644)
			var out, errb bytes.Buffer
			code := run([]string{"-check-config", "-config", p}, nil, &out, &errb)
			if code == 0 || !strings.Contains(errb.String(), c.key) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want a refusal naming %s", code, out.String(), errb.String(), c.key)
			}
		})
	}
}

// freePort returns an address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// -check-config reports every problem in one run: the file's
// TOML errors with their lines, every key's check, then what a run would
// meet (here the pipeline API's port, taken), and how many there were.
func TestCheckConfigReportsEveryProblem(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	taken := takenPort(t)
	cfg := writeTemp(t, "c.toml", "[irc]\nserver = \"http://irc.example.net\"\nchannels = [\"#a\"]\nburst = \"three\"\n"+
		"[reaper]\nthreshhold = 5\n[pipelines]\nlisten = \""+taken+"\"\n")
	code, out, errs := checkRun(t, "-config", cfg)
	want := []string{
		"archivebot: " + cfg + ":4: irc.burst: incompatible types",
		"archivebot: " + cfg + ":6: unknown key reaper.threshhold",
		"archivebot: " + cfg + ": irc.server: scheme must be irc:// or ircs://",
		"archivebot: pipelines.listen: " + taken + " is already in use",
		"archivebot: 4 problems found",
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if code != 1 || strings.Contains(out, "OK") || len(lines) != len(want) {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant %d lines", code, out, errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i+1, lines[i], w)
		}
	}
}

// -check-config -allow-in-use: before a switch-over, upstream's web app
// and websocket.py hold the ports the node will take; the check that the
// rest is right must be reachable then. A taken web or stream port is a
// warning that says the node needs it, the exit status 0; everything else
// still fails (here: a Redis that does not answer), and without the flag
// the taken ports are problems as before. The flag alone is a usage error.
func TestCheckConfigAllowInUse(t *testing.T) {
	b := redistest.RealOrMini(t)
	freeListeners(t)
	t.Setenv("REDIS_URL", b.URL)
	web, stream := takenPort(t), takenPort(t)
	cfg := writeTemp(t, "c.toml", "[http]\nlisten = \""+web+"\"\nstream_listen = \""+stream+"\"\n")
	t.Setenv("ARCHIVEBOT_HTTP_LISTEN", "")
	t.Setenv("ARCHIVEBOT_STREAM_LISTEN", "")

	if code, out, errs := checkRun(t, "-config", cfg); code != 1 || !strings.Contains(errs, "http.listen: "+web+" is already in use") || strings.Contains(out, "OK") {
		t.Fatalf("without the flag: exit %d, stdout %q, stderr %q; want the taken ports as problems", code, out, errs)
	}
	code, out, errs := checkRun(t, "-config", cfg, "-allow-in-use")
	if code != 0 || !strings.Contains(out, "configuration OK") {
		t.Fatalf("-allow-in-use: exit %d, stdout %q, stderr %q; want OK with warnings", code, out, errs)
	}
	for _, w := range []string{
		"archivebot: warning: http.listen: " + web + " is in use now: the node needs it free when it starts",
		"archivebot: warning: http.stream_listen: " + stream + " is in use now",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
	if !strings.Contains(out, "in use now (warnings above): http.listen, http.stream_listen") {
		t.Errorf("stdout %q does not sum the warnings up", out)
	}
	// Every other problem is still one.
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	if code, _, errs := checkRun(t, "-config", cfg, "-allow-in-use"); code != 1 || !strings.Contains(errs, "1 problem found") {
		t.Fatalf("-allow-in-use with Redis down: exit %d, stderr %q; want the one problem", code, errs)
	}
	var o, e bytes.Buffer
	if code := run([]string{"-config", cfg, "-allow-in-use"}, strings.NewReader(""), &o, &e); code != 2 || !strings.Contains(e.String(), "-allow-in-use goes with -check-config") {
		t.Fatalf("-allow-in-use without -check-config: exit %d, %q", code, e.String())
	}
}

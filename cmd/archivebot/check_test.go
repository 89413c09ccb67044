package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("REDIS_URL", "")
			freeListeners(t)
			for k, v := range c.env {
				t.Setenv(k, v)
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

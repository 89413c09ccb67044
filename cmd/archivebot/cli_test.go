package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each case is something a real start refuses: -check-config must refuse
// it too, naming the key.
func TestCheckConfigCases(t *testing.T) {
	dir := t.TempDir()
	badSets := filepath.Join(dir, "sets")
	os.Mkdir(badSets, 0o755)
	os.WriteFile(filepath.Join(badSets, "bad.json"), []byte(`{"name": "bad", "patterns": ["(unclosed"]}`), 0o644)
	badAgents := filepath.Join(dir, "agents")
	os.Mkdir(badAgents, 0o755)
	os.WriteFile(filepath.Join(badAgents, "agents.json"), []byte(`{"agents": [`), 0o644)
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
		{"ignore set regex", "[jobs]\nignore_sets_dir = \"" + badSets + "\"\n", nil, "jobs.ignore_sets_dir"},
		{"user agents file", "[jobs]\nuser_agents_dir = \"" + badAgents + "\"\n", nil, "jobs.user_agents_dir"},
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

// The example configuration passes the check as it is, and with the IRC
// server set it needs the channels it shows commented out.
func TestExampleConfigChannels(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	freeListeners(t)
	b, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	p := filepath.Join(t.TempDir(), "c.toml")
	withServer := strings.Replace(text, "server = \"\"", "server = \"irc://irc.example.net:6667\"", 1)
	os.WriteFile(p, []byte(withServer), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"-check-config", "-config", p}, nil, &out, &errb); code == 0 || !strings.Contains(errb.String(), "irc.channels") {
		t.Fatalf("server without channels: exit %d, %q", code, errb.String())
	}
	withChannels := strings.Replace(withServer, "# channels = [\"#archivebot\"]", "channels = [\"#archivebot\"]", 1)
	os.WriteFile(p, []byte(withChannels), 0o644)
	errb.Reset()
	if code := run([]string{"-check-config", "-config", p}, nil, &out, &errb); code != 0 {
		t.Fatalf("server with the example's channels: %q", errb.String())
	}
}

// help lists every command, every flag of every command and every
// environment variable; -h of each command shows its own usage.
func TestHelpListsEverything(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	help := out.String()
	for _, c := range commands() {
		if !strings.Contains(help, "\n  "+c.name) {
			t.Errorf("help does not list %s", c.name)
		}
		if c.name == "help" || c.name == "version" {
			continue
		}
		var o bytes.Buffer
		if code := run([]string{c.name, "-h"}, nil, &o, &o); code != 0 {
			t.Errorf("%s -h: exit %d: %s", c.name, code, o.String())
		}
		if !strings.HasPrefix(o.String(), "Usage: archivebot "+c.name) {
			t.Errorf("%s -h: %q", c.name, o.String())
		}
		for _, line := range strings.Split(o.String(), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
				name, _, _ := strings.Cut(f, " ")
				if !strings.Contains(help, "\nFlags of "+c.name+":") || !strings.Contains(help, "  -"+name) {
					t.Errorf("help does not list %s -%s", c.name, name)
				}
			}
		}
	}
	nodeFS, _ := nodeFlags(&bytes.Buffer{})
	for _, name := range []string{"config", "check-config", "debug", "version", "redis-listen", "data-dir"} {
		if nodeFS.Lookup(name) == nil || !strings.Contains(help, "  -"+name) {
			t.Errorf("node flag -%s missing", name)
		}
	}
	for _, env := range []string{"REDIS_URL", "ARCHIVEBOT_CONFIG", "ARCHIVEBOT_REDIS_LISTEN", "ARCHIVEBOT_DATA_DIR"} {
		if !strings.Contains(help, env) {
			t.Errorf("help does not name %s", env)
		}
	}
	// -h is the same text, exit 0.
	out.Reset()
	errb.Reset()
	if code := run([]string{"-h"}, nil, &out, &errb); code != 0 || out.String() != help {
		t.Errorf("-h: exit %d, differs from help", code)
	}
}

func TestIdentHelp(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"ident", "-h"}, nil, &out, &errb)
	if code != 0 || strings.Contains(errb.String(), "not an absolute URL") || !strings.Contains(errb.String(), "Usage: archivebot ident") {
		t.Fatalf("ident -h: exit %d, %q", code, errb.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !strings.HasPrefix(out.String(), "archivebot github.com/archiveteam/archivebot-go ") || !strings.Contains(out.String(), "revision") {
			t.Errorf("%v: %q", args, out.String())
		}
	}
}

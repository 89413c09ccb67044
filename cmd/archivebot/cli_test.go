package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// archivebot help documents the exit statuses.
func TestHelpExitStatus(t *testing.T) {
	var out bytes.Buffer
	run([]string{"help"}, strings.NewReader(""), &out, &out)
	_, sect, ok := strings.Cut(out.String(), "\nExit status:\n")
	if !ok {
		t.Fatalf("no exit status section:\n%s", out.String())
	}
	for _, code := range []string{"0 ", "1 ", "2 ", "3 "} {
		if !strings.Contains(sect, "  "+code) {
			t.Errorf("exit status %q not documented:\n%s", code, sect)
		}
	}
}

// Help texts: -cpuprofile's argument is FILE (not `go tool pprof`), and
// the operator's commands' -config does not speak of the console.
func TestHelpTexts(t *testing.T) {
	var out bytes.Buffer
	run([]string{"-h"}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "-cpuprofile FILE") {
		t.Errorf("-cpuprofile:\n%s", out.String())
	}
	out.Reset()
	run([]string{"abort", "-h"}, strings.NewReader(""), &out, &out)
	_, cfg, _ := strings.Cut(out.String(), "-config")
	cfg, _, _ = strings.Cut(cfg, "\n  -")
	if strings.Contains(cfg, "console") || !strings.Contains(cfg, "REDIS_URL") {
		t.Errorf("abort -config help: %q", cfg)
	}
}

func TestIdentSubcommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"ident", "HTTP://Example.COM:80", "example.com"}, nil, &out, &errb)
	if code == 0 {
		t.Fatal("unparsable URL gave exit code 0")
	}
	if out.String() != "http://example.com/\t9tfs9o6557kgozy0wlqrzal3o\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if !strings.HasPrefix(errb.String(), "example.com: ") {
		t.Fatalf("stderr %q", errb.String())
	}
	out.Reset()
	code = run([]string{"ident"}, strings.NewReader("http://example.com/\nftp://ftp.example.org/pub/\n"), &out, &errb)
	if code != 0 || out.String() != "http://example.com/\t9tfs9o6557kgozy0wlqrzal3o\nftp://ftp.example.org/pub/\t2sav7kxlo07xuzhq48m0kzzg9\n" {
		t.Fatalf("stdin mode: %d %q", code, out.String())
	}
}

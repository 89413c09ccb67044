package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeWebConfig is a console + embedded Redis configuration with the web
// server on httpListen.
func writeWebConfig(t *testing.T, dir, httpListen string) string {
	t.Helper()
	p := filepath.Join(dir, "web.toml")
	text := fmt.Sprintf("[redis]\nlisten = \"127.0.0.1:0\"\ndata_dir = %q\n[http]\nlisten = %q\nstream_listen = \"127.0.0.1:0\"\n", filepath.Join(dir, "data"), httpListen)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The node prints the web address at start and answers on it; a job
// queued on the console is visible at /jobs/IDENT.
func TestWebServesWithTheNode(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	s := start(t, "-config", writeWebConfig(t, t.TempDir(), "127.0.0.1:0"))
	line := s.expect("Web API on http://")
	base := strings.Fields(strings.TrimPrefix(line, "Web API on "))[0]
	s.expect("ArchiveBot console")
	s.send("!a http://example.com/")
	id := strings.Fields(strings.TrimPrefix(s.expect("Use !status "), "Use !status "))[0]

	res, err := http.Get(base + "jobs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ State, Queue, URL string }
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	res.Body.Close()
	if v.State != "queued" || v.Queue != "pending" || v.URL != "http://example.com/" {
		t.Fatalf("/jobs/%s: %+v", id, v)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// Shut down with the process.
	if _, err := http.Get(base + "healthz"); err == nil {
		t.Fatal("web server still answering after exit")
	}
}

func TestWebListenTaken(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	if msg := runRefused(t, "-config", writeWebConfig(t, t.TempDir(), takenPort(t))); !strings.Contains(msg, "http.listen") || !strings.Contains(msg, "already in use") {
		t.Fatalf("message does not name the key:\n%s", msg)
	}
}

func TestWebOff(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	s := start(t, "-config", writeWebConfig(t, t.TempDir(), ""))
	s.expect("ArchiveBot console")
	if code := s.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if strings.Contains(s.err.String(), "web server listening") {
		t.Fatal("web server started with listen = \"\"")
	}
}

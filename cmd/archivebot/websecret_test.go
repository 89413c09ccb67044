package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/config"
)

// The dashboard's key: made once in the data directory (0600, the log
// says so and, under HA, that the nodes must share it), read back the
// same at the next start; a configured file too short or missing stops
// the start with a message naming web.secret_file.
func TestWebSecret(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{}
	cfg.Redis.DataDir = filepath.Join(dir, "data")
	cfg.HA.Enabled = true
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	k1, err := loadWebSecret(cfg, log)
	if err != nil || len(k1) != 64 {
		t.Fatalf("first start: %d bytes, %v", len(k1), err)
	}
	path := filepath.Join(cfg.Redis.DataDir, config.WebSecretFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", fi, err)
	}
	if l := logs.String(); !strings.Contains(l, "made a new key for dashboard sessions") || !strings.Contains(l, "copy this file to every node") {
		t.Errorf("the log: %s", l)
	}
	k2, err := loadWebSecret(cfg, log)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second start: another key (%v)", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tooshort\n"), 0o600)
	cfg.Web.SecretFile = short
	if _, err := loadWebSecret(cfg, log); err == nil || !strings.Contains(err.Error(), "web.secret_file") || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short key: %v", err)
	}
	cfg.Web.SecretFile = filepath.Join(dir, "missing")
	if _, err := loadWebSecret(cfg, log); err == nil || !strings.Contains(err.Error(), "web.secret_file") {
		t.Errorf("a missing configured key: %v", err)
	}
}

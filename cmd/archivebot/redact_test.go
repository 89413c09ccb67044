package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/config"
)

// TestEmbeddedRedisURLRedacted: the line that
// tells operators the REDIS_URL for pipelines does not print the embedded
// Redis's password on standard output.
func TestEmbeddedRedisURLRedacted(t *testing.T) {
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Redis.URL = ""
	cfg.Redis.Listen = "127.0.0.1:0"
	cfg.Redis.Password = "s3cret-pw"
	cfg.Redis.DataDir = t.TempDir()
	var out bytes.Buffer
	rdb, srv, err := openRedis(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), &out)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	srv.Close()
	if strings.Contains(out.String(), "s3cret-pw") {
		t.Fatalf("standard output shows the password:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "REDIS_URL=redis://:xxxxx@127.0.0.1:") {
		t.Fatalf("standard output does not show the redacted URL:\n%s", out.String())
	}
}

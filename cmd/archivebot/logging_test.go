package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/config"
	"github.com/archiveteam/archivebot-go/store"
)

func TestOneServicePerLine(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			logger, buf := bufLogger(t, format, "info")
			// What serve.go and the IRC client do: both name the service.
			irc := logger.With("service", "irc").With("service", "irc", "server", "x")
			irc.Info("connected", "nick", "ArchiveBot")
			// A record naming its own service (services.go's cycle
			// warnings) wins over the logger's.
			logger.With("service", "coordinator").Warn("cycle failed", "service", "reaper")
			// Groups keep the service at the top.
			logger.With("service", "web").WithGroup("req").Info("served", "path", "/")
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 3 {
				t.Fatalf("lines: %q", lines)
			}
			want := []string{"irc", "reaper", "web"}
			for i, l := range lines {
				if n := strings.Count(l, "service"); n != 1 {
					t.Errorf("%d service attributes in %s", n, l)
				}
				if format == "json" {
					var m map[string]any
					if err := json.Unmarshal([]byte(l), &m); err != nil {
						t.Fatalf("%s: %v", l, err)
					}
					if m["service"] != want[i] {
						t.Errorf("service %v in %s", m["service"], l)
					}
				} else if !strings.Contains(l, "service="+want[i]) {
					t.Errorf("no service=%s in %s", want[i], l)
				}
			}
			if !strings.Contains(lines[0], "server=x") && !strings.Contains(lines[0], `"server":"x"`) {
				t.Errorf("other attributes lost: %s", lines[0])
			}
		})
	}
}

func TestLogLevel(t *testing.T) {
	logger, buf := bufLogger(t, "text", "warn")
	logger.Info("hidden")
	logger.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("log: %q", buf.String())
	}
	if _, err := newLogger(buf, "xml", "info"); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Fatalf("bad format: %v", err)
	}
}

// go-redis's own messages (here: the pool failing to dial) come out as
// slog records with service=redis, not as its own "redis: 2026/…" lines.
func TestRedisLogThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	logger, _ := newLogger(&buf, "json", "info")
	routeRedisLog(logger)
	t.Cleanup(func() {
		quiet, _ := newLogger(&bytes.Buffer{}, "text", "error")
		routeRedisLog(quiet)
	})
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = adminStore(context.Background(), cfg)
	if err == nil || !store.IsUnavailable(err) {
		t.Fatalf("connect to a closed port: %v", err)
	}
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["service"] == "redis" && strings.Contains(m["msg"].(string), "dial") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no go-redis line through slog in %q", buf.String())
	}
}

// TestLogValuesCut: attribute values are cut at 1 KiB, whether logged
// with the line, attached with With, or an error; short ones are left
// alone.
func TestLogValuesCut(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		logger, buf := bufLogger(t, format, "info")
		log := logger.With("service", "finish-notifier", "ctx", strings.Repeat("c", 5000))
		huge := strings.Repeat("é", 512*1024) // 1 MiB, cut inside a rune
		log.Error("dropping malformed finish notification", "doc", huge, "err", errors.New(strings.Repeat("e", 3000)), "short", "kept")
		line := buf.String()
		if n := len(line); n > 4*maxLogValue+500 {
			t.Fatalf("%s: log line of %d bytes", format, n)
		}
		for _, want := range []string{"(cut, 1048576 bytes in all)", "(cut, 5000 bytes in all)", "(cut, 3000 bytes in all)", "kept", "finish-notifier"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: log line lacks %q: %.300s…", format, want, line)
			}
		}
		if strings.Contains(line, "\uFFFD") {
			t.Errorf("%s: a rune was cut in half", format)
		}
	}
}

// Durations are written as Go durations in both formats, also attributes
// given to With and inside groups: JSON would write nanoseconds.
func TestLogDurationsAsStrings(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		logger, buf := bufLogger(t, format, "info")
		logger.With("every", 90*time.Second).WithGroup("g").Info("cycle", "interval", 2*time.Minute)
		out := buf.String()
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if m["every"] != "1m30s" || m["g"].(map[string]any)["interval"] != "2m0s" {
				t.Errorf("json: %s", out)
			}
			continue
		}
		if !strings.Contains(out, "every=1m30s") || !strings.Contains(out, "g.interval=2m0s") {
			t.Errorf("text: %s", out)
		}
	}
}

// bufLogger is newLogger writing to a buffer the test reads.
func bufLogger(t *testing.T, format, level string) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	logger, err := newLogger(&buf, format, level)
	if err != nil {
		t.Fatal(err)
	}
	return logger, &buf
}

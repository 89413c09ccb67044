package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogValuesCut: attribute values are cut at 1 KiB, whether logged
// with the line, attached with With, or an error; short ones are left
// alone.
func TestLogValuesCut(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, slog.LevelInfo).With("service", "finish-notifier", "ctx", strings.Repeat("c", 5000))
	huge := strings.Repeat("é", 512*1024) // 1 MiB, cut inside a rune
	log.Error("dropping malformed finish notification", "doc", huge, "err", errors.New(strings.Repeat("e", 3000)), "short", "kept")
	line := buf.String()
	if n := len(line); n > 4*maxLogValue+500 {
		t.Fatalf("log line of %d bytes", n)
	}
	for _, want := range []string{"(cut, 1048576 bytes in all)", "(cut, 5000 bytes in all)", "(cut, 3000 bytes in all)", "short=kept", "service=finish-notifier"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %q: %.300s…", want, line)
		}
	}
	if strings.Contains(line, "\uFFFD") {
		t.Error("a rune was cut in half")
	}
}

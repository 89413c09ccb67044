package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/coordinator"
	"github.com/archiveteam/archivebot-go/coordinator/redistest"
)

// Issue 14: `archivebot status` names the lease holder and its age, and
// says when nobody leads.
func TestStatusCommand(t *testing.T) {
	b := redistest.Mini(t)
	cfg := writeTemp(t, "status.toml", "[redis]\nurl = \""+b.URL+"\"\n")
	var out, errb bytes.Buffer
	if code := run([]string{"status", "-config", cfg}, strings.NewReader(""), &out, &errb); code != 3 || !strings.Contains(out.String(), "leader: none") {
		t.Fatalf("no leader: exit %d, %q %q", code, out.String(), errb.String())
	}
	s := coordinator.NewStore(b.Client)
	s.Now = func() time.Time { return time.Now().Add(-90 * time.Second) }
	if _, _, err := s.AcquireLease(context.Background(), "node-7", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"status", "-config", cfg}, strings.NewReader(""), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "leader: node-7 (fencing token 1), lease held for 1m30") {
		t.Fatalf("node-7 leads: exit %d, %q %q", code, out.String(), errb.String())
	}
}

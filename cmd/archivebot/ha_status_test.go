package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// `archivebot status` names the lease holder and its age, and
// says when nobody leads; a node without ha.enabled leads alone.
func TestStatusCommand(t *testing.T) {
	b := redistest.Mini(t)
	cfg := writeTemp(t, "status.toml", "[irc]\nserver = \"irc://127.0.0.1:1\"\nchannels = [\"#a\"]\n[redis]\nurl = \""+b.URL+"\"\n[ha]\nenabled = true\n")
	var out, errb bytes.Buffer
	if code := run([]string{"status", "-config", cfg}, strings.NewReader(""), &out, &errb); code != 3 || !strings.Contains(out.String(), "leader: none") {
		t.Fatalf("no leader: exit %d, %q %q", code, out.String(), errb.String())
	}
	s := store.New(b.Client, store.WithClock(func() time.Time { return time.Now().Add(-90 * time.Second) }))
	if _, _, err := s.AcquireLease(context.Background(), "node-7", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"status", "-config", cfg}, strings.NewReader(""), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "leader: node-7 (fencing token 1), lease held for 1m30") {
		t.Fatalf("node-7 leads: exit %d, %q %q", code, out.String(), errb.String())
	}
	single := writeTemp(t, "single.toml", "[redis]\nurl = \""+b.URL+"\"\n")
	out.Reset()
	if code := run([]string{"status", "-config", single}, strings.NewReader(""), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "single node") {
		t.Fatalf("single node: exit %d, %q %q", code, out.String(), errb.String())
	}
}

// A single node leads: status -json says leader true, as /metrics does
// (archivebot_leader 1).
func TestStatusSingleNodeLeads(t *testing.T) {
	b := redistest.Mini(t)
	single := writeTemp(t, "single.toml", "[redis]\nurl = \""+b.URL+"\"\n")
	var out, errb bytes.Buffer
	if code := run([]string{"status", "-json", "-config", single}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v leaderView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || !v.Leader || !v.SingleNode {
		t.Fatalf("status -json: %v %s", err, out.String())
	}
}

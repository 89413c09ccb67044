package main

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

func TestPipelineKeyCommand(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		pub, _, _ := ed25519.GenerateKey(nil)
		text := wire.FormatPublicKey(pub)
		// Refusals change nothing.
		for _, args := range [][]string{
			{"pipeline-key"},
			{"pipeline-key", "add", "-bad", text},
			{"pipeline-key", "add", "alpha", "not a key"},
			{"pipeline-key", "add", "alpha"},
			{"pipeline-key", "frob"},
		} {
			if code, _, errs := admin(t, b, args...); code != 2 || errs == "" {
				t.Errorf("%v: exit %d, stderr %q", args, code, errs)
			}
		}
		if n := b.Client.DBSize(t.Context()).Val(); n != 0 {
			t.Fatalf("refused commands wrote %d keys", n)
		}
		// Without the prefix, as base64 only.
		if code, out, errs := admin(t, b, "pipeline-key", "add", "alpha", strings.TrimPrefix(text, "ed25519:")); code != 0 || !strings.Contains(out, "alpha added") {
			t.Fatalf("add: %d %q %q", code, out, errs)
		}
		if got := b.Client.HGet(t.Context(), store.KeyPipelineKeys, "alpha").Val(); got != text {
			t.Errorf("stored %q, want %q", got, text)
		}
		var rows []struct {
			Name     string `json:"name"`
			Revoked  bool   `json:"revoked"`
			JobsHeld int64  `json:"jobs_held"`
		}
		adminJSON(t, b, &rows, "pipeline-key", "list")
		if len(rows) != 1 || rows[0].Name != "alpha" || rows[0].Revoked {
			t.Errorf("list %+v", rows)
		}
		if code, _, errs := admin(t, b, "pipeline-key", "revoke", "beta"); code != 1 || !strings.Contains(errs, "no active key") {
			t.Errorf("revoke unknown: %d %q", code, errs)
		}
		if code, _, errs := admin(t, b, "pipeline-key", "revoke", "alpha"); code != 0 {
			t.Fatalf("revoke: %d %q", code, errs)
		}
		adminJSON(t, b, &rows, "pipeline-key", "list")
		if len(rows) != 1 || !rows[0].Revoked {
			t.Errorf("list after revoke %+v", rows)
		}
		if code, out, _ := admin(t, b, "pipeline-key", "list"); code != 0 || !strings.Contains(out, "revoked") {
			t.Errorf("table: %q", out)
		}
	})
}

// The table shows when each key was added, as doc/pipeline-api.md says
// (before: it had no such column; -json had added_at).
func TestPipelineKeyListShowsAdded(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		pub, _, _ := ed25519.GenerateKey(nil)
		before := time.Now().UTC()
		if code, _, errs := admin(t, b, "pipeline-key", "add", "alpha", wire.FormatPublicKey(pub)); code != 0 {
			t.Fatalf("add: %d %q", code, errs)
		}
		code, out, _ := admin(t, b, "pipeline-key", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 {
			t.Fatalf("list: exit %d, %q", code, out)
		}
		header, row := strings.Fields(lines[0]), lines[1]
		if len(header) < 3 || header[2] != "ADDED" {
			t.Errorf("header %q: want ADDED after NAME and STATE", lines[0])
		}
		// The minute it was added (or the next one, if the minute turned).
		if !strings.Contains(row, before.Format("2006-01-02 15:04 UTC")) &&
			!strings.Contains(row, before.Add(time.Minute).Format("2006-01-02 15:04 UTC")) {
			t.Errorf("row %q does not show when the key was added (%s)", row, before.Format("2006-01-02 15:04 UTC"))
		}
	})
}

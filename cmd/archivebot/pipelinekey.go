package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// runPipelineKey is `archivebot pipeline-key add NAME PUBKEY | list |
// revoke NAME`: the pipeline API's keys (doc/pipeline-api.md, Keys).
func runPipelineKey(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	a := newAdminCmd("pipeline-key", stdout, stderr)
	pos, err := parseInterspersed(a.fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 {
		a.failf("needs add NAME PUBKEY, list, revoke NAME or set NAME SETTING...")
		return 2
	}
	if pos[0] == "set" {
		if len(pos) < 3 {
			a.failf("set needs NAME and at least one of avoid=DOMAIN,... targeted_only=1|0")
			return 2
		}
		return pipelineKeySet(a, pos[1], pos[2:])
	}
	want := map[string]int{"add": 3, "list": 1, "revoke": 2}
	n, ok := want[pos[0]]
	if !ok {
		a.failf("unknown action %q: add NAME PUBKEY, list or revoke NAME", pos[0])
		return 2
	}
	if len(pos) != n {
		a.failf("%s needs %d argument(s) (add NAME PUBKEY, list, revoke NAME), got %d", pos[0], n-1, len(pos)-1)
		return 2
	}
	switch pos[0] {
	case "add":
		name := pos[1]
		if !wire.ValidKeyName(name) {
			a.failf("%q is not a key name: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
			return 2
		}
		pub, err := wire.ParsePublicKey(pos[2])
		if err != nil {
			a.failf("%v (the public key is base64 of 32 bytes, as archivebot bridge -init prints it, e.g. ed25519:…)", err)
			return 2
		}
		return a.session(func(ctx context.Context) int {
			if err := a.store.AddPipelineKey(ctx, name, wire.FormatPublicKey(pub)); err != nil {
				return a.refusal("", err)
			}
			fmt.Fprintf(a.stdout, "Pipeline key %s added (%s). Its pipeline is shown as %s, record %s.\n",
				name, wire.FormatPublicKey(pub), name, store.APIPipelineKey(name))
			return 0
		})
	case "revoke":
		name := pos[1]
		return a.session(func(ctx context.Context) int {
			err := a.store.RevokePipelineKey(ctx, name)
			if errors.Is(err, store.ErrNoPipelineKey) {
				a.failf("no active key named %s; nothing was done (archivebot pipeline-key list shows them)", name)
				return 1
			}
			if err != nil {
				return a.refusal("", err)
			}
			fmt.Fprintf(a.stdout, "Pipeline key %s revoked: its requests are refused and its control streams closed within a second. The jobs it holds stay in working (archivebot pipelines shows them).\n", name)
			return 0
		})
	}
	return a.session(func(ctx context.Context) int {
		keys, err := a.store.ListPipelineKeys(ctx)
		if err != nil {
			return a.refusal("", err)
		}
		if a.json {
			type row struct {
				Name        string `json:"name"`
				PublicKey   string `json:"public_key,omitempty"`
				Revoked     bool   `json:"revoked"`
				RevokedAt   int64  `json:"revoked_at,omitempty"`
				AddedAt     int64  `json:"added_at,omitempty"`
				LastSeen    int64  `json:"last_seen,omitempty"`
				JobsHeld    int64  `json:"jobs_held"`
				Refusals    int64  `json:"refusals"`
				LastRefusal string `json:"last_refusal,omitempty"`
				PipelineID  string `json:"pipeline_id"`
			}
			out := make([]row, len(keys))
			unix := func(t time.Time) int64 {
				if t.IsZero() {
					return 0
				}
				return t.Unix()
			}
			for i, k := range keys {
				out[i] = row{k.Name, k.PublicKey, k.Revoked, unix(k.RevokedAt), unix(k.AddedAt), unix(k.LastSeen),
					k.Held, k.Refusals, k.LastRefusal, store.APIPipelineKey(k.Name)}
			}
			return a.writeJSON(out)
		}
		if len(keys) == 0 {
			fmt.Fprintln(a.stdout, "No pipeline keys. Add one with: archivebot pipeline-key add NAME PUBKEY")
			return 0
		}
		now := time.Now()
		ago := func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return now.Sub(t).Round(time.Second).String() + " ago"
		}
		// When a key was added, in UTC to the minute (a key recorded
		// before the node kept the time shows "unknown").
		added := func(t time.Time) string {
			if t.IsZero() {
				return "unknown"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		}
		tw := a.table()
		fmt.Fprintln(tw, "NAME\tSTATE\tADDED\tLAST SEEN\tJOBS HELD\tREFUSALS\tLAST REFUSAL\tPUBLIC KEY")
		for _, k := range keys {
			state := "active"
			if k.Revoked {
				state = "revoked " + ago(k.RevokedAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", k.Name, state, added(k.AddedAt), ago(k.LastSeen), k.Held, k.Refusals, k.LastRefusal, k.PublicKey)
		}
		tw.Flush()
		return 0
	})
}

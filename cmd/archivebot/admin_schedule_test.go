package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// archivebot pause/resume and pipeline-key set: bad input refused with the
// reason and nothing written; the changes made are the ones asked for.
func TestAdminPauseResumeAndKeyRules(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"pause", "pendng"}, 2, `"pendng" is not a queue`},
			{[]string{"resume", "pending", "extra"}, 2, "at most one queue"},
			{[]string{"resume", "pending"}, 1, "not paused"},
			{[]string{"pipeline-key", "set", "alpha"}, 2, "set needs NAME"},
			{[]string{"pipeline-key", "set", "alpha", "avoid=*.com"}, 2, "not a site"},
			{[]string{"pipeline-key", "set", "alpha", "avoid=co.uk"}, 2, "public suffix"},
			{[]string{"pipeline-key", "set", "alpha", "avoid=10.0.0.0/8"}, 2, "IP range"},
			{[]string{"pipeline-key", "set", "alpha", "targeted_only=maybe"}, 2, "targeted_only=1|0"},
			{[]string{"pipeline-key", "set", "alpha", "avoid=example.com"}, 1, "no active key"},
		} {
			code, _, errs := admin(t, b, c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
			}
		}
		if n := b.Client.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("refused commands wrote %d keys", n)
		}
		if code, out, errs := admin(t, b, "pause", "pending", "deploy", "now"); code != 0 || !strings.Contains(out, "Paused pending") {
			t.Fatalf("pause: %d %q %q", code, out, errs)
		}
		st := store.NewStore(b.Client)
		ps, err := st.Pauses(ctx)
		if err != nil || len(ps) != 1 || ps[0].Reason != "deploy now" || ps[0].By == "" {
			t.Fatalf("pauses %+v %v", ps, err)
		}
		if code, _, errs := admin(t, b, "pause", "pending"); code != 1 || !strings.Contains(errs, "already paused") {
			t.Errorf("pause again: %d %q", code, errs)
		}
		if code, out, _ := admin(t, b, "resume", "pending"); code != 0 || !strings.Contains(out, "Resumed pending") {
			t.Errorf("resume: %d %q", code, out)
		}
		if err := st.AddPipelineKey(ctx, "alpha", "ed25519:x"); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := admin(t, b, "pipeline-key", "set", "alpha", "avoid=*.Example.org,bücher.example", "targeted_only=1"); code != 0 ||
			!strings.Contains(out, "example.org,xn--bcher-kva.example") || !strings.Contains(out, "targeted only: true") {
			t.Fatalf("set: %d %q %q", code, out, errs)
		}
		r, err := st.PipelineKeyRules(ctx, "alpha")
		if err != nil || !slices.Equal(r.Avoid, []string{"example.org", "xn--bcher-kva.example"}) || !r.TargetedOnly {
			t.Fatalf("rules %+v %v", r, err)
		}
	})
}

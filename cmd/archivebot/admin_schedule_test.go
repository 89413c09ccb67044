package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		st := store.New(b.Client)
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

// archivebot reroute: bad input refused with the reason and nothing
// written (no line queued either); a running API job goes back to the
// front of pending with its key avoiding the site, the output says the
// same as !reroute, and the job's channel gets its line through the admin
// notices, printed as "Queued for CHANNEL: ..." (in -json, "notice").
func TestAdminReroute(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		st := store.New(b.Client)
		for _, k := range []string{"pipe-a", "pipe-b"} {
			if err := st.AddPipelineKey(ctx, k, "ed25519:"+k); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"jobone", "jobtwo"} {
			if err := st.Register(ctx, store.NewJob{Ident: id, URL: "http://www." + id + ".example.com/", FetchDepth: "inf",
				StartedBy: "erin", StartedIn: "#a", Queue: store.KeyPending}); err != nil {
				t.Fatal(err)
			}
		}
		if j, err := st.APITake(ctx, "pipe-a", "ed25519:pipe-a", []string{store.KeyPending}); err != nil || j == nil || j.Ident != "jobone" {
			t.Fatalf("take %v %v", j, err)
		}
		before := b.Dump(t)
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"reroute"}, 2, "needs exactly 1 argument"},
			{[]string{"reroute", "jobone", "jobtwo"}, 2, "needs exactly 1 argument"},
			{[]string{"reroute", "jobone", "-avoid", "pipe\r\nb"}, 2, "not a pipeline key name"},
			{[]string{"reroute", "jobone", "-avoid", strings.Repeat("k", 100)}, 2, "not a pipeline key name"},
			{[]string{"reroute", "nosuchjob"}, 1, "no job nosuchjob"},
			{[]string{"reroute", "jobone", "-avoid", "nokey"}, 1, "no such pipeline key: nokey"},
			{[]string{"reroute", "jobtwo"}, 1, "no pipeline holds it"},
		} {
			code, _, errs := admin(t, b, c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
			}
			if strings.ContainsAny(errs[:max(len(errs)-1, 0)], "\r") {
				t.Errorf("%q: raw CR in %q", c.args, errs)
			}
			if diff := cmp.Diff(before, b.Dump(t)); diff != "" {
				t.Fatalf("%q changed Redis: %s", c.args, diff)
			}
		}
		code, out, errs := admin(t, b, "reroute", "jobone")
		line := "erin: Job jobone for http://www.jobone.example.com/ was rerouted by " + operator() +
			" (operator): taken from pipe-a and queued again at the front of pending; pipe-a avoids example.com."
		want := "Job jobone rerouted: aborted on pipe-a, queued again at the front of pending; pipe-a now avoids example.com.\n" +
			"Queued for #a: " + line + "\n"
		if code != 0 || out != want {
			t.Fatalf("reroute: %d %q %q; want %q", code, out, errs, want)
		}
		if q := b.Client.LRange(ctx, store.KeyPending, 0, -1).Val(); !slices.Equal(q, []string{"jobtwo", "jobone"}) {
			t.Errorf("pending %q", q)
		}
		if n := adminNotices(t, b); len(n) != 1 || n[0] != (store.AdminNotice{Channel: "#a", Text: line}) {
			t.Fatalf("admin notices %+v, want the one line for #a", n)
		}
		code, out, errs = admin(t, b, "reroute", "jobtwo", "-avoid", "pipe-b", "-json")
		line2 := "erin: Job jobtwo for http://www.jobtwo.example.com/ was rerouted by " + operator() +
			" (operator): moved to the front of pending; pipe-b avoids example.com."
		if code != 0 || !strings.Contains(out, `"avoid": "pipe-b"`) || !strings.Contains(out, `"rule": "example.com"`) ||
			!strings.Contains(out, `"notice": {`) || !strings.Contains(out, `"channel": "#a"`) || !strings.Contains(out, `"text": "`+line2+`"`) {
			t.Errorf("reroute -json: %d %q %q", code, out, errs)
		}
		if n := adminNotices(t, b); len(n) != 2 || n[1] != (store.AdminNotice{Channel: "#a", Text: line2}) {
			t.Fatalf("admin notices %+v, want the line for jobtwo last", n)
		}
	})
}

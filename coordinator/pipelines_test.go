package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// TestPipelineNotifier: pipelines present at startup (one of them already
// silent) are not announced; a pipeline connecting, changing version,
// going silent and disconnecting is announced once each, in every channel;
// lines that could not be posted while IRC was down come out once later.
func TestPipelineNotifier(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		clock := &svcClock{t: time.Unix(1_800_000_000, 0)}
		pipe := func(nick, version string) *pipelinesim.Pipeline {
			return pipelinesim.New(b.Client, pipelinesim.Config{Nickname: nick, Version: version, Now: clock.Now})
		}
		report := func(ps ...*pipelinesim.Pipeline) {
			t.Helper()
			for _, p := range ps {
				if err := p.Report(ctx, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		old, stale := pipe("old", "1"), pipe("stale", "1")
		clock.Add(-time.Hour)
		report(stale) // crashed an hour ago
		clock.Add(time.Hour)
		report(old)

		ann := newSvcAnnouncer("#a", "#b")
		n := NewPipelineNotifier(st, ann, PipelineNotifierConfig{SilentAfter: 5 * time.Minute, Now: clock.Now}, svcLog(t))
		cycle := func() []svcLine {
			t.Helper()
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			return ann.take()
		}
		both := func(text string) []svcLine { return []svcLine{{"#a", text}, {"#b", text}} }

		steps := []struct {
			name string
			do   func()
			want []svcLine
		}{
			{"startup", func() {}, nil},
			{"new pipeline", func() { report(pipe("fresh", "20250101.01")) },
				both(`Pipeline "fresh" (pipeline:` + md5s("fresh") + `, version 20250101.01) connected.`)},
			{"nothing changed", func() { report(old, pipe("fresh", "20250101.01")) }, nil},
			{"version change", func() { report(pipe("fresh", "20250202.02")) },
				both(`Pipeline "fresh" (pipeline:` + md5s("fresh") + `) changed version from 20250101.01 to 20250202.02.`)},
			{"old exits", func() {
				if err := old.Exit(ctx); err != nil {
					t.Fatal(err)
				}
			}, both(`Pipeline "old" (pipeline:` + md5s("old") + `) disconnected.`)},
			{"fresh goes silent", func() { clock.Add(6 * time.Minute) },
				both(`Pipeline "fresh" (pipeline:` + md5s("fresh") + `) has not reported for 6m; it may have crashed.`)},
			{"still silent: said once", func() { clock.Add(time.Minute) }, nil},
		}
		for _, s := range steps {
			s.do()
			if diff := cmp.Diff(s.want, cycle()); diff != "" {
				t.Errorf("%s: lines (-want +got):\n%s", s.name, diff)
			}
		}

		// IRC down: a pipeline connects and the silent one exits.
		ann.setDown(errIRCDown)
		report(pipe("late", "3"))
		if err := pipe("fresh", "").Exit(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := n.runOnce(ctx); err == nil {
				t.Error("cycle with IRC down succeeded")
			}
		}
		ann.setDown(nil)
		want := append(both(`Pipeline "fresh" (pipeline:`+md5s("fresh")+`) disconnected.`),
			both(`Pipeline "late" (pipeline:`+md5s("late")+`, version 3) connected.`)...)
		if diff := cmp.Diff(want, cycle()); diff != "" {
			t.Errorf("after IRC came back (-want +got):\n%s", diff)
		}
		if l := cycle(); len(l) != 0 {
			t.Errorf("repeated: %v", l)
		}
	})
}

func md5s(s string) string {
	return pipelinesim.New(nil, pipelinesim.Config{Nickname: s}).Key()[len("pipeline:"):]
}

// A pipeline's ts that is not a sane time (1e300, NaN, Inf, negative, far
// in the future) is never turned into an absurd silence ("2562047h47m16s");
// it is reported once as unreadable, and IRC formatting codes in pipeline
// names never reach the channel.
func TestPipelineBadTS(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		now := time.Unix(1_800_000_000, 0)
		ann := newSvcAnnouncer("#a")
		n := NewPipelineNotifier(s, ann, PipelineNotifierConfig{SilentAfter: 5 * time.Minute, Now: func() time.Time { return now }}, svcLog(t))
		if err := n.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for nick, ts := range map[string]string{"huge": "1e300", "nan": "NaN", "inf": "inf", "neg": "-5", "future": "2800000000"} {
			key := "pipeline:" + nick
			b.Client.HSet(ctx, key, "id", key, "nickname", "\x02\x0304,04"+nick+"\x0f", "version", "1", "ts", ts)
			b.Client.SAdd(ctx, store.KeyPipelines, key)
		}
		var lines []svcLine
		for i := 0; i < 3; i++ {
			now = now.Add(time.Hour)
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, ann.take()...)
		}
		bad := 0
		for _, l := range lines {
			if strings.Contains(l.Text, "2562047h") || strings.ContainsAny(l.Text, "\x02\x03\x0f") {
				t.Errorf("line %q", l.Text)
			}
			if strings.Contains(l.Text, "ts") && strings.Contains(l.Text, "not a time") {
				bad++
			}
		}
		if bad != 5 {
			t.Errorf("%d lines about an unreadable ts, want 5 (one per pipeline): %q", bad, lines)
		}
	})
}

// IRC colour and formatting codes in text a pipeline wrote (red on red
// hides text) are removed before the line is posted.
func TestFormattingCodesStripped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		doc := `{"aborted":false,"started_by":"\u0002ev\u0003il\u000f","started_in":"#ab",` +
			`"url":"http://x.example.com/\u000304,04hidden\u0003 \u0004ff0000,ff0000red\u0004 \u0011\u0016\u001d\u001e\u001fend"}`
		b.Client.RPush(ctx, store.KeyFinishNotifications, doc)
		ann := newSvcAnnouncer("#ab")
		f := NewFinishNotifier(s, ann, FinishConfig{}, svcLog(t))
		if err := f.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		got := ann.take()
		if len(got) != 1 {
			t.Fatalf("lines %q", got)
		}
		if strings.ContainsFunc(got[0].Text, func(r rune) bool { return r < 0x20 }) {
			t.Errorf("control characters left: %q", got[0].Text)
		}
		if !strings.HasPrefix(got[0].Text, "evil: Your job for http://x.example.com/hidden red end") {
			t.Errorf("line %q", got[0].Text)
		}
	})
}

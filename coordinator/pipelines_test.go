package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// TestPipelineNotifier: pipelines present at startup (one of them already
// silent) are not announced; a pipeline connecting, changing version,
// going silent and disconnecting is announced once each, in every channel;
// lines that could not be posted while IRC was down come out once later.
func TestPipelineNotifier(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
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
		n := NewPipelineNotifier(store.NewStore(b.Client), ann, PipelineNotifierConfig{SilentAfter: 5 * time.Minute}, svcLog(t))
		n.Now = clock.Now
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

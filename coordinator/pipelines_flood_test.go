package coordinator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/metrics"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// heldNotices is archivebot_pipeline_notices_held_total.
func heldNotices() float64 {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "archivebot_pipeline_notices_held_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestPipelineReportCannotFloodChannel: what a
// pipeline reports reaches the channel capped (a 400-character version
// is "(unusual version)", a long nickname or id is cut), and a pipeline
// whose version changes every cycle gets one "changed version" line an
// hour (the default), the next one saying how many changes it sums up;
// the limit holds across a restart of the notifier, and the changes held
// back are counted in /metrics.
func TestPipelineReportCannotFloodChannel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		clock := &svcClock{t: time.Unix(1_800_000_000, 0)}
		ann := newSvcAnnouncer("#a")
		newNotifier := func() *PipelineNotifier {
			n := NewPipelineNotifier(st, ann, PipelineNotifierConfig{SilentAfter: time.Hour, Now: clock.Now}, svcLog(t))
			if err := n.runOnce(ctx); err != nil { // the baseline
				t.Fatal(err)
			}
			return n
		}
		n := newNotifier()
		nicks := strings.Repeat("alice bob chfoo JAA ", 20) // 400 characters
		longNick := strings.Repeat("n", 300)
		p := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: longNick, Version: nicks, Now: clock.Now})
		report := func(version string) {
			t.Helper()
			p = pipelinesim.New(b.Client, pipelinesim.Config{Nickname: longNick, Version: version, Now: clock.Now})
			if err := p.Report(ctx, ""); err != nil {
				t.Fatal(err)
			}
		}
		cycle := func() []string {
			t.Helper()
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, l := range ann.take() {
				out = append(out, l.Text)
			}
			return out
		}
		report(nicks)
		lines := cycle()
		if len(lines) != 1 || !strings.Contains(lines[0], "(unusual version)") || strings.Contains(lines[0], "chfoo") || len(lines[0]) > 160 {
			t.Fatalf("connect line (%d bytes): %q", len(strings.Join(lines, "")), lines)
		}

		// A new version every 30 s cycle for two hours and a cycle, the notifier
		// restarted after 20 minutes.
		held := heldNotices()
		var changed []string
		for i := 1; i <= 241; i++ {
			clock.Add(30 * time.Second)
			v := fmt.Sprintf("%s%d", nicks, i)
			if i%2 == 0 {
				v = fmt.Sprintf("2026.%d", i)
			}
			report(v)
			if i == 40 {
				n = newNotifier()
			}
			for _, l := range cycle() {
				if strings.Contains(l, "changed version") {
					changed = append(changed, l)
				}
				if len(l) > 200 {
					t.Errorf("line of %d bytes: %q", len(l), l)
				}
			}
		}
		// The first change, one an hour later and one two hours later (the
		// change the restarted notifier found in its first snapshot is not
		// announced, as at any start).
		if len(changed) != 3 {
			t.Fatalf("%d version lines in two hours, want 3: %q", len(changed), changed)
		}
		if !strings.Contains(changed[0], "from (unusual version) to (unusual version).") {
			t.Errorf("first line %q", changed[0])
		}
		for _, l := range changed[1:] {
			if !strings.Contains(l, "changes in 1h") {
				t.Errorf("line after an hour %q: want how many changes it sums up", l)
			}
		}
		if got := heldNotices() - held; got != 237 {
			t.Errorf("changes held back: %v, want 237", got)
		}
	})
}

// TestPipelineFlapCannotFloodChannel: a key that reports and unregisters
// in turn, every 30 s cycle for two hours, gets at most connBurst
// connected/disconnected lines an hour (the default
// notifier.pipeline_change_every) and one line an hour summing up the
// rest; the lines held back are counted. The old notifier said one line
// per cycle: 240.
func TestPipelineFlapCannotFloodChannel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, st *store.Store, ctx context.Context) {
		clock := &svcClock{t: time.Unix(1_800_000_000, 0)}
		ann := newSvcAnnouncer("#a")
		n := NewPipelineNotifier(st, ann, PipelineNotifierConfig{SilentAfter: time.Hour, Now: clock.Now}, svcLog(t))
		if err := n.runOnce(ctx); err != nil { // the baseline
			t.Fatal(err)
		}
		if err := st.AddPipelineKey(ctx, "flap", "ed25519:flap"); err != nil {
			t.Fatal(err)
		}
		held := heldNotices()
		var lines []string
		for i := range 240 {
			clock.Add(30 * time.Second)
			var err error
			if i%2 == 0 {
				err = st.APIReport(ctx, "flap", map[string]string{"nickname": "flap", "version": "1", "ts": fmt.Sprint(clock.Now().Unix())})
			} else {
				err = st.APIUnregister(ctx, "flap")
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := n.runOnce(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range ann.take() {
				lines = append(lines, l.Text)
			}
		}
		summaries := 0
		for _, l := range lines {
			if strings.Contains(l, "connects and disconnects in") {
				summaries++
			}
		}
		if len(lines) > 2*(connBurst+1) || summaries == 0 {
			t.Fatalf("%d lines in two hours of flapping (%d summing up), want at most %d and a summary:\n%s",
				len(lines), summaries, 2*(connBurst+1), strings.Join(lines, "\n"))
		}
		if got := heldNotices() - held; got < 200 {
			t.Errorf("%.0f lines counted as held back, want the rest of 240", got)
		}
		t.Logf("%d lines, e.g. %q", len(lines), lines[len(lines)-1])
	})
}

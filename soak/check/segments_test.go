package check

// Invariant 6's segments: after each restart of a process and each
// change of leader its series starts a new segment whose first
// SegmentWarmUp is not judged, and each segment is judged on its own.

import (
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/soak/history"
)

func sample(r *run, s float64, actor string, num map[string]float64) {
	r.add(s, history.Event{Kind: history.Sample, Actor: actor, Num: num})
}

// TestLeakInASegmentFails: node-b is restarted at 120 s and leads from
// then on; past its warm-up (a ramp of 20 MB in 30 s, not judged) it
// leaks 2 MB a minute (its segment starts when it is up again, at 125 s;
// it already led) for the rest of the 10-minute run: 14 MB over the
// 7 minutes judged, more than the 8.3 MB ten minutes allow.
func TestLeakInASegmentFails(t *testing.T) {
	r := clean().longer(600, true)
	r.add(120, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "start"})
	r.add(125, history.Event{Kind: history.Fault, Fault: "kill-leader", Target: "node-b", Outcome: "end"})
	r.add(126, history.Event{Kind: history.Leader, Actor: "node-b"})
	for s := 0.0; s <= 600; s += 5 {
		v := 30e6
		switch {
		case s >= 125 && s < 155:
			v = 25e6 + (s-125)/30*20e6
		case s >= 155:
			v = 45e6 + (s-155)/60*2e6
		}
		sample(r, s, "node-b", map[string]float64{"rss_bytes": v, "goroutines": 50, "fds": 20})
	}
	failsOnly(t, r.check(t), 6, "node-b/rss_bytes grows +120.0 MB per hour after warm-up in its segment from 05:02:05")
}

// TestRestartJumpIsNotGrowth: seed 5's bridge (ci scale), its samples
// as recorded (seconds from the run's start, fds, RSS in MB): restarted
// at 192 s of a 5-minute run, its fds climb from 16 to 51 in 45 s as the
// pipelines behind it connect again and settle at 35–37, its RSS from
// 20.9 to 25.4 MB. A new process filling up is not growth.
func TestRestartJumpIsNotGrowth(t *testing.T) {
	r := clean().longer(300, true)
	r.add(192.2, history.Event{Kind: history.Fault, Fault: "restart-bridge", Target: "bridge-0", Outcome: "start"})
	r.add(192.2, history.Event{Kind: history.Fault, Fault: "restart-bridge", Target: "bridge-0", Outcome: "end"})
	for _, x := range [][3]float64{
		{13.3, 16, 21.0}, {18.3, 16, 21.1}, {23.3, 16, 21.1}, {28.4, 16, 21.2}, {33.3, 16, 21.3},
		{38.3, 16, 21.3}, {43.3, 16, 21.3}, {48.3, 15, 22.4}, {53.3, 18, 22.6}, {58.3, 21, 22.9},
		{63.3, 17, 23.4}, {68.3, 17, 23.5}, {73.3, 17, 23.5}, {78.3, 17, 23.5}, {83.3, 18, 23.5},
		{88.3, 18, 23.5}, {93.3, 20, 23.8}, {98.3, 20, 23.8}, {103.3, 22, 24.3},
		{108.3, 22, 24.9}, {113.3, 21, 25.0}, {120.3, 21, 25.1}, {125.3, 29, 25.2},
		{130.3, 37, 25.2}, {135.3, 42, 25.2}, {140.3, 43, 25.3}, {143.4, 43, 25.4},
		{148.3, 31, 25.5}, {153.3, 30, 25.7}, {158.3, 31, 25.7}, {163.3, 31, 25.8},
		{168.3, 30, 26.0}, {173.3, 30, 26.0}, {178.3, 30, 26.0}, {183.3, 30, 26.0},
		{188.4, 30, 26.0}, {193.3, 16, 20.9}, {198.3, 16, 21.0}, {203.5, 18, 21.0},
		{208.3, 18, 21.2}, {215.3, 18, 21.2}, {220.3, 24, 21.4}, {225.3, 32, 21.5},
		{230.3, 40, 22.6}, {235.3, 44, 22.6}, {238.3, 51, 23.2}, {243.3, 36, 23.8},
		{248.4, 37, 24.6}, {253.3, 35, 24.8}, {258.3, 36, 24.9}, {263.3, 37, 25.1},
		{268.3, 37, 25.3}, {273.3, 37, 25.3}, {278.3, 35, 25.4}, {283.3, 35, 25.4},
		{288.3, 35, 25.4}, {293.3, 35, 25.4},
	} {
		sample(r, x[0], "bridge-0", map[string]float64{"fds": x[1], "rss_bytes": x[2] * 1e6})
	}
	res := r.check(t)
	if !res.Invariant(6).Pass {
		t.Fatalf("a restarted bridge's first 45 s count as growth:\n%s", res.Summary())
	}
	judged := false
	for _, sl := range res.Slopes {
		judged = judged || sl.Series == "bridge-0/fds" && sl.Judged && sl.From.Equal(r.t0.Add(192200*time.Millisecond))
	}
	if !judged {
		t.Errorf("the bridge's life after its restart was not judged: %+v", res.Slopes)
	}
}

// TestLeaderWarmUpIsNotGrowth: seed 3's node-b (ci scale): a standby at
// 28 MB until it takes the lease at 150 s, then 28 → 48 MB in 45 s as
// it takes on the load, then flat. node-a takes the lease back at 240 s:
// node-b's last segment has 4 samples after its warm-up, too few to
// judge: counted as "segment too short", not failed.
func TestLeaderWarmUpIsNotGrowth(t *testing.T) {
	r := clean().longer(300, true)
	r.add(149, history.Event{Kind: history.Leader, Actor: ""})
	r.add(150, history.Event{Kind: history.Leader, Actor: "node-b"})
	r.add(240, history.Event{Kind: history.Leader, Actor: "node-a"})
	for s := 0.0; s <= 300; s += 5 {
		v, g := 28e6+float64(int(s)%2)*2e5, 22.0
		switch {
		case s >= 150 && s < 195:
			v, g = 28e6+(s-150)/45*20e6, 22+(s-150)/45*80
		case s >= 195:
			v, g = 48e6+float64(int(s)%2)*2e5, 102-float64(int(s)%3)
		}
		sample(r, s, "node-b", map[string]float64{"rss_bytes": v, "goroutines": g, "fds": 20})
	}
	res := r.check(t)
	if !res.Invariant(6).Pass {
		t.Fatalf("a new leader's first 45 s count as growth:\n%s", res.Summary())
	}
	sk := skipOf(res, "segment too short")
	if !sk.Pass || !strings.Contains(strings.Join(sk.Examples, "\n"), "node-b/fds from 05:04:00: 4 samples") {
		t.Errorf("skipped \"segment too short\" = %+v, want node-b's last segment counted", sk)
	}
}

package soak

// The schedule of faults, quiet points and pipeline deaths, drawn up
// front from the seed.

import (
	"math/rand/v2"
	"slices"
	"time"
)

// step is one entry of the schedule, drawn up front from the seed.
type step struct {
	At   time.Duration
	What string // a fault name, "quiet" or "pipeline-death"
	Dur  time.Duration
	Pick float64
}

// faultKinds, in the priority order.
var faultKinds = []string{
	"kill-leader", "freeze-leader", "kill-redis-master", "pause-pipeline",
	"revoke-waiting", "restart-bridge",
	"partition-node-redis", "partition-pipeline-node", "partition-leader-irc", "clock-skew",
}

// makeSchedule draws the schedule: a warm-up, then faults one at a time
// 12–24 s apart, a quiet point every 40 s or so, now and then a
// pipeline's silent death, and a cool-down. Faults come in rounds, each
// a permutation of the kinds (those in only, or all when only is
// empty), so that a long run injects each kind about as often; the
// first round starts with revoke-waiting, whose invariant (3) has no
// other witness and must be checked by a short run too.
func makeSchedule(r *rand.Rand, d time.Duration, only map[string]bool) []step {
	var out []step
	warm, cool := 25*time.Second, 20*time.Second
	var kinds []string
	for _, f := range faultKinds {
		if len(only) == 0 || only[f] {
			kinds = append(kinds, f)
		}
	}
	for _, f := range optInFaults {
		if only[f] {
			kinds = append(kinds, f)
		}
	}
	var round []string
	first := true
	next := func() string {
		if len(round) == 0 {
			round = append([]string(nil), kinds...)
			r.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			if first {
				if i := slices.Index(round, "revoke-waiting"); i > 0 {
					round[0], round[i] = round[i], round[0]
				}
				first = false
			}
		}
		f := round[0]
		round = round[1:]
		return f
	}
	lastQuiet := time.Duration(0)
	for at := warm; at < d-cool; {
		if at-lastQuiet > 40*time.Second {
			out = append(out, step{At: at, What: "quiet", Dur: 3 * time.Second})
			lastQuiet = at
			at += 12 * time.Second
			continue
		}
		if r.IntN(5) == 0 {
			out = append(out, step{At: at, What: "pipeline-death", Pick: r.Float64()})
		}
		if len(kinds) == 0 {
			at += 15 * time.Second
			continue
		}
		out = append(out, step{At: at, What: next(), Dur: time.Duration(3+r.IntN(5)) * time.Second, Pick: r.Float64()})
		at += time.Duration(12+r.IntN(12)) * time.Second
	}
	return out
}

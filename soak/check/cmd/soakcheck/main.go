// Command soakcheck checks a kept soak run again: it reads DIR's
// history.jsonl and final dump, writes DIR/report.html (and
// DIR/report.png unless -png=false), prints the verdict, and exits 1
// when an invariant fails (2 when the run cannot be read).
//
//	go run ./soak/check/cmd/soakcheck [flags] DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/archiveteam/archivebot-go/soak/check"
)

func main() {
	opts := check.DefaultOptions()
	flag.BoolVar(&opts.PNG, "png", opts.PNG, "render report.png with headless Chromium")
	flag.BoolVar(&opts.AllowEmpty, "allow-empty", opts.AllowEmpty, "pass an invariant that had nothing to check")
	flag.StringVar(&opts.Chromium, "chromium", opts.Chromium, "path of the Chromium binary")
	flag.DurationVar(&opts.ReplyP99, "reply-p99", opts.ReplyP99, "limit of the command reply p99 outside faults")
	flag.DurationVar(&opts.FinishP99, "finish-p99", opts.FinishP99, "limit of the finish report p99 outside faults")
	flag.DurationVar(&opts.FaultGrace, "fault-grace", opts.FaultGrace, "grace after each fault window")
	flag.DurationVar(&opts.RevokeGrace, "revoke-grace", opts.RevokeGrace, "how long after its revocation a key may still take")
	flag.DurationVar(&opts.EndGrace, "end-grace", opts.EndGrace, "a job that ended this close to the end may be unreported")
	flag.DurationVar(&opts.ProbeSlack, "probe-slack", opts.ProbeSlack, "how far from a probe the model's state may be read")
	flag.DurationVar(&opts.SegmentWarmUp, "segment-warm-up", opts.SegmentWarmUp, "after each restart of a process and each change of leader, how long its series is not judged")
	flag.DurationVar(&opts.MinAloneWindow, "min-alone-window", opts.MinAloneWindow, "in a run long enough for a common slope, a segment judged over less than this is judged only in it")
	flag.DurationVar(&opts.MinSlopeWindow, "min-slope-window", opts.MinSlopeWindow, "over a shorter window a series may rise by what its limit adds in this long")
	flag.IntVar(&opts.MinSamples, "min-samples", opts.MinSamples, "samples after warm-up a series with a limit needs to be judged (fewer fail)")
	flag.Float64Var(&opts.MinViewerEntries, "min-viewer-entries", opts.MinViewerEntries, "entries each v2 viewer needs outside faults (fewer fail)")
	flag.Float64Var(&opts.WarmUp, "warm-up", opts.WarmUp, "fraction of the run left out of the slopes")
	for _, m := range []string{"rss_bytes", "goroutines", "fds", "redis_used_memory"} {
		m := m
		v := opts.SlopeLimits[m]
		flag.Func("limit-"+m, fmt.Sprintf("largest slope per hour of %s (default %g)", m, v), func(s string) error {
			var f float64
			if _, err := fmt.Sscan(s, &f); err != nil {
				return err
			}
			opts.SlopeLimits[m] = f
			return nil
		})
	}
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: soakcheck [flags] DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	res, err := check.RunWith(flag.Arg(0), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakcheck:", err)
		os.Exit(2)
	}
	fmt.Print(res.Summary())
	if res.Failed() {
		os.Exit(1)
	}
}

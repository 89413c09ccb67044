package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// TestDashboardPerf is the dashboard under load in headless chromium:
// ARCHIVEBOT_BROWSER_PERF=SECONDS runs JOBS (ARCHIVEBOT_BROWSER_PERF_JOBS,
// default 200) running jobs logging 2,000 entries/s in total for that
// long, and reports the longest task and the p95 frame interval the page
// saw. On demand only (it is a measurement, not a check).
func TestDashboardPerf(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("ARCHIVEBOT_BROWSER_PERF"))
	if secs <= 0 {
		t.Skip("set ARCHIVEBOT_BROWSER_PERF=SECONDS to measure the dashboard under load")
	}
	jobs := 200
	if n, err := strconv.Atoi(os.Getenv("ARCHIVEBOT_BROWSER_PERF_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	ctx := browser(t)
	b := redistest.RealOrMini(t)
	node := startConsoleNode(t, b, "")
	s, dir, base := node.session, node.dir, node.base
	bg := context.Background()
	st := store.New(b.Client)
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "perfpipe"})
	pipe.Report(bg, "Running")
	var running []*pipelinesim.Job
	for i := range jobs {
		id := fmt.Sprintf("perfjob%04d", i)
		err := st.Register(bg, store.NewJob{Ident: id, URL: fmt.Sprintf("http://perf%d.example/", i), FetchDepth: "inf",
			Slug: "x", StartedBy: "perf", StartedIn: "#ab", DelayMin: 250, DelayMax: 375, Concurrency: 3, SettingsAge: 1, Queue: "pending"})
		if err != nil {
			t.Fatal(err)
		}
		j, err := pipe.Take(bg)
		if err != nil || j == nil {
			t.Fatal(err)
		}
		running = append(running, j)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	waitJS(t, ctx, "all jobs", fmt.Sprintf(`document.querySelectorAll(".job").length >= %d`, jobs))
	// Long tasks and frame intervals, collected in the page.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`(() => {
		window.__perf = {long: [], frames: []};
		new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__perf.long.push(e.duration); })
			.observe({type: "longtask", buffered: false});
		let last = performance.now();
		const tick = (now) => { window.__perf.frames.push(now - last); last = now; requestAnimationFrame(tick); };
		requestAnimationFrame(tick);
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	const rate = 2000 // entries/s in total
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	n := 0
	for time.Now().Before(end) {
		<-tick.C
		for range rate / 100 {
			j := running[n%len(running)]
			code := []int{200, 200, 200, 301, 404, 500}[n%6]
			if _, err := j.LogDownload(bg, fmt.Sprintf("http://perf.example/page/%d", n), code); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`(() => {
		const f = window.__perf.frames.slice(1).sort((a, b) => a - b);
		const p = (q) => f.length ? f[Math.min(f.length - 1, Math.floor(q * f.length))] : 0;
		return {frames: f.length, p50: p(0.5), p95: p(0.95), p99: p(0.99), longTasks: window.__perf.long.length,
			longestTask: Math.max(0, ...window.__perf.long), lines: document.querySelectorAll(".log div").length};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs, %d entries in %d s (%d/s offered): frames %v, frame interval p50 %.1f ms, p95 %.1f ms, p99 %.1f ms; long tasks %v, longest %.0f ms; %v lines on the page",
		jobs, n, secs, rate, res["frames"], res["p50"], res["p95"], res["p99"], res["longTasks"], res["longestTask"], res["lines"])
	screenshot(t, ctx, dir, "perf")
	s.stop()
}

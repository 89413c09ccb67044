package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// chromiumPath finds Debian's chromium. Without it the browser tests skip,
// except in CI (CI set), where they fail: .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	return testproc.Bin(t, "chromium", "chromium-browser", "google-chrome")
}

// browser opens a headless chromium tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot saves the page as NAME.png in the test's temp dir and prints
// the path.
func screenshot(t *testing.T, ctx context.Context, dir, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if keep := os.Getenv("ARCHIVEBOT_SCREENSHOTS"); keep != "" {
		dir = keep // keep them after the test
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// waitJS waits until the JavaScript expression is truthy.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(30*time.Second),
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		dbg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("status")||{}).textContent + " subscribed=" + document.body.dataset.subscribed + " jobs=" + document.querySelectorAll(".job").length + " error=" + document.body.dataset.error`))
		t.Fatalf("waiting for %s (%s): %v; page: %s", what, expr, err, dbg)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

func freeAddr(t testing.TB) string { return testproc.FreeAddr(t) }

// consoleNode is the node run in this process with its console on a pipe
// (session), on a Redis of the test's, serving the web API at base.
type consoleNode struct {
	*session
	t              *testing.T
	cfg, dir, base string
}

// startConsoleNode writes the configuration (the web API on a free
// address, the upstream stream on stream, "" for none) and starts the
// node; it returns once the console is up, and logs the node's stderr when
// the test fails.
func startConsoleNode(t *testing.T, b *redistest.Backend, stream string) *consoleNode {
	t.Helper()
	n := &consoleNode{t: t, dir: t.TempDir(), base: "http://" + freeAddr(t)}
	n.cfg = filepath.Join(n.dir, "node.toml")
	text := fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = %q\n", b.URL, strings.TrimPrefix(n.base, "http://"), stream)
	if err := os.WriteFile(n.cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node stderr:\n%s", n.err.String())
		}
	})
	n.restart()
	return n
}

// restart starts the node again (after session.stop) and returns its new
// session once the console is up.
func (n *consoleNode) restart() *session {
	n.t.Helper()
	n.session = start(n.t, "-config", n.cfg)
	n.expect("ArchiveBot console")
	return n.session
}

// TestDashboardInBrowser drives the dashboard in headless chromium against
// the whole node (console front end, real Redis when configured) and the
// pipeline simulator: a job queued by a command appears when a pipeline
// takes it; its log lines come with upstream's colours; finished, aborted
// and failed jobs turn grey, purple and red; the filter and the
// errors-only toggle work; the per-job page shows the job and its history
// (newest first, untrusted strings as text); after the node
// restarts, the page reconnects and the stream resumes.
func TestDashboardInBrowser(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	ctx := browser(t)
	b := redistest.RealOrMini(t)
	n := startConsoleNode(t, b, "127.0.0.1:0")
	s, dir, base := n.session, n.dir, n.base

	bg := context.Background()
	st := store.NewStore(b.Client)
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "browserpipe"})
	if err := pipe.Report(bg, "Running"); err != nil {
		t.Fatal(err)
	}
	queue := func(url string) *pipelinesim.Job {
		t.Helper()
		s.send("!a " + url)
		id := strings.Fields(strings.TrimPrefix(s.expect("Use !status "), "Use !status "))[0]
		j, err := pipe.Take(bg)
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take: %v %v (want %s)", j, err, id)
		}
		j.LogStdout(bg, fmt.Sprintf(pipelinesim.StdoutReceived, j.Ident))
		return j
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)

	fin := queue("http://finished.example/")
	abo := queue("http://aborted.example/")
	fai := queue("http://failed.example/")
	run := queue("http://running.example/")
	for _, j := range []*pipelinesim.Job{fin, abo, fai, run} {
		waitJS(t, ctx, "job "+j.Ident+" on the page", fmt.Sprintf(`document.getElementById("job-%s") !== null`, j.Ident))
	}
	// The page subscribes to the jobs on screen; lines of others are not sent.
	waitJS(t, ctx, "the subscription", fmt.Sprintf(`["%s","%s","%s","%s"].every(id => (document.body.dataset.subscribed || "").includes(id))`,
		fin.Ident, abo.Ident, fai.Ident, run.Ident))
	// Log lines with upstream's colours.
	for i, code := range []int{200, 301, 404, 500} {
		if _, err := fin.LogDownload(bg, fmt.Sprintf("http://finished.example/p%d", i), code); err != nil {
			t.Fatal(err)
		}
	}
	fin.LogIgnore(bg, "http://finished.example/x.css", `\.css$`, "global")
	fin.LogStdout(bg, "INFO a line the crawler printed\n")
	waitJS(t, ctx, "six lines", fmt.Sprintf(`document.querySelectorAll("#job-%s .log div").length >= 6`, fin.Ident))
	colours := evalJS[map[string]string](t, ctx, fmt.Sprintf(`(() => {
		const out = {};
		for (const c of ["line-redirect", "line-warning", "line-error", "line-stdout"]) {
			const e = document.querySelector("#job-%s ." + c);
			out[c] = e ? getComputedStyle(e).backgroundColor : "missing";
		}
		const ig = document.querySelector("#job-%s .line-ignore");
		out.ignore = ig ? ig.textContent : "missing";
		return out;
	})()`, fin.Ident, fin.Ident))
	want := map[string]string{"line-redirect": "rgb(231, 206, 234)", "line-warning": "rgb(247, 219, 125)",
		"line-error": "rgb(255, 185, 185)", "line-stdout": "rgb(220, 216, 203)",
		"ignore": `IGNOR (global): http://finished.example/x.css by \.css$`}
	for k, v := range want {
		if colours[k] != v {
			t.Errorf("%s: %q, want %q", k, colours[k], v)
		}
	}
	screenshot(t, ctx, dir, "1-running")

	// The end of jobs: grey, purple, red.
	fin.LogStdout(bg, fmt.Sprintf(pipelinesim.StdoutFinished, fin.Ident))
	if err := fin.Done(bg); err != nil {
		t.Fatal(err)
	}
	abo.LogStdout(bg, pipelinesim.StdoutAborted)
	if err := abo.Abort(bg); err != nil {
		t.Fatal(err)
	}
	if err := abo.Done(bg); err != nil {
		t.Fatal(err)
	}
	// An ignore pattern and a nick with markup, for the job page's history:
	// Redis-provided strings, to show as text.
	evilPattern := `<img src=x onerror="document.body.dataset.pwned=1">`
	if _, err := st.ChangeSettings(bg, fai.Ident, store.Change{Bump: 1, By: "<b>mallory</b>",
		AddPatterns: []string{evilPattern}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FailJob(bg, fai.Ident, "failed by an operator"); err != nil {
		t.Fatal(err)
	}
	for id, state := range map[string]string{fin.Ident: "finished", abo.Ident: "aborted", fai.Ident: "failed", run.Ident: "running"} {
		waitJS(t, ctx, id+" "+state, fmt.Sprintf(`document.getElementById("job-%s").classList.contains("state-%s")`, id, state))
	}
	bgs := evalJS[map[string]string](t, ctx, fmt.Sprintf(`(() => {
		const bg = (id) => getComputedStyle(document.querySelector("#job-" + id + " .job-header")).backgroundColor;
		return {finished: bg("%s"), aborted: bg("%s"), failed: bg("%s")};
	})()`, fin.Ident, abo.Ident, fai.Ident))
	if fmt.Sprint(bgs) != "map[aborted:rgb(215, 184, 243) failed:rgb(243, 166, 166) finished:rgb(208, 208, 208)]" {
		t.Errorf("header colours of ended jobs: %v", bgs)
	}
	screenshot(t, ctx, dir, "2-ended")

	// The filter: a regexp on the URL.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#filter"), "running\\.example")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter", fmt.Sprintf(`document.getElementById("job-%s").classList.contains("hidden") &&
		!document.getElementById("job-%s").classList.contains("hidden")`, fin.Ident, run.Ident))

	// Errors only: after the server confirms, only error lines arrive.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#errors-only"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "errors-only confirmed", `(document.body.dataset.subscribed || "").includes('"errors_only":true')`)
	before := evalJS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll("#job-%s .log div").length`, run.Ident))
	run.LogDownload(bg, "http://running.example/fine", 200)
	run.LogDownload(bg, "http://running.example/broken", 503)
	waitJS(t, ctx, "the error line", fmt.Sprintf(`[...document.querySelectorAll("#job-%s .log div")].some(d => d.textContent.includes("/broken"))`, run.Ident))
	if got := evalJS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll("#job-%s .log div").length`, run.Ident)); got != before+1 {
		t.Errorf("errors only: %d new lines, want 1 (the 503)", got-before)
	}
	screenshot(t, ctx, dir, "3-filtered-errors-only")

	// The per-job page.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/"+fai.Ident)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the job page", `document.getElementById("job-state") !== null`)
	page := evalJS[string](t, ctx, `document.body.innerText`)
	for _, wantText := range []string{fai.Ident, "http://failed.example/", "failed", "Permalink", "Ignore patterns"} {
		if !strings.Contains(page, wantText) {
			t.Errorf("job page lacks %q:\n%s", wantText, page)
		}
	}
	// Its history, newest first: time (UTC), event, who, detail; markup
	// in nicks and patterns shown as text, never parsed.
	waitJS(t, ctx, "the history", `document.querySelectorAll("#history tbody tr").length >= 3`)
	rows := evalJS[[][]string](t, ctx, `[...document.querySelectorAll("#history tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
	var events []string
	for _, r := range rows {
		if len(r) != 4 || !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$`).MatchString(r[0]) {
			t.Errorf("history row %q: want time (UTC), event, by, detail", r)
			continue
		}
		// "started" comes from the node's start scan, which may not have
		// seen the job before it failed.
		if ev := r[1] + " by " + r[2] + ": " + r[3]; r[1] != "started" {
			events = append(events, ev)
		} else if want := "started by " + pipe.Key() + ": pipeline browserpipe"; ev != want {
			t.Errorf("history: %q, want %q", ev, want)
		}
	}
	wantEvents := []string{
		"failed by node: failed by an operator",
		"ignore_added by <b>mallory</b>: " + evilPattern,
		"queued by " + localUser() + ": in console, queue pending",
	}
	if strings.Join(events, "\n") != strings.Join(wantEvents, "\n") {
		t.Errorf("job page history:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(wantEvents, "\n"))
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#history img, #history b").length`); n != 0 {
		t.Errorf("history: %d elements made from Redis strings", n)
	}
	if evalJS[bool](t, ctx, `"pwned" in document.body.dataset`) {
		t.Error("history: an ignore pattern ran as HTML")
	}
	screenshot(t, ctx, dir, "4-job-page")
	// The same in dark mode (prefers-color-scheme: dark).
	dark := func(on bool) {
		t.Helper()
		v := "light"
		if on {
			v = "dark"
		}
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	dark(true)
	if bg := evalJS[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(22, 24, 27)" {
		t.Errorf("dark mode: body background %s", bg)
	}
	screenshot(t, ctx, dir, "4-job-page-dark")
	dark(false)
	for _, p := range []string{"/pipelines", "/pending", "/finished"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p)); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, p, `document.getElementById("status").textContent.startsWith("loaded")`)
		screenshot(t, ctx, dir, "5"+strings.ReplaceAll(p, "/", "-"))
	}

	// A node restart: the page reconnects and the stream resumes.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	if code := s.stop(); code != 0 {
		t.Fatalf("node exit code %d", code)
	}
	waitJS(t, ctx, "the page sees the node go", `document.getElementById("status").textContent.startsWith("disconnected")`)
	s = n.restart()
	waitJS(t, ctx, "the page reconnects", `document.getElementById("status").textContent.startsWith("live")`)
	run.LogDownload(bg, "http://running.example/after-restart", 200)
	waitJS(t, ctx, "a line after the restart", fmt.Sprintf(`[...document.querySelectorAll("#job-%s .log div")].some(d => d.textContent.includes("after-restart"))`, run.Ident))
	screenshot(t, ctx, dir, "6-after-restart")
	if code := s.stop(); code != 0 {
		t.Fatalf("node exit code %d", code)
	}
}

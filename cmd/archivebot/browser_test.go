package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// chromiumPath finds Debian's chromium. Without it the browser tests skip,
// except in CI (CI set), where they fail: .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	return testproc.Bin(t, "chromium", "chromium-browser", "google-chrome")
}

// The package's one chromium: started by the first browser test, each
// test's tab in a browser context of its own (cookies, storage and cache
// not shared: a fresh profile, as a chromium of its own had), stopped by
// TestMain. Starting and stopping a chromium per test cost a few seconds
// each on the 2-core CI machine.
var chrome struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab: its contexts derive from it
	err    error
	cancel func()
}

// stopChrome stops the package's chromium, if a test started it.
func stopChrome() {
	if chrome.cancel != nil {
		chrome.cancel()
	}
}

// browser opens a headless chromium tab, in a browser context (an
// incognito profile) of its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	chrome.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.Headless, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelB := chromedp.NewContext(actx)
		chrome.ctx, chrome.cancel = bctx, func() { cancelB(); cancelA() }
		chrome.err = chromedp.Do(bctx) // start the browser
	})
	if chrome.err != nil {
		t.Fatalf("start chromium: %v", chrome.err)
	}
	ctx, cancelC := chromedp.NewContext(chrome.ctx, chromedp.WithNewBrowserContext())
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC() })
	if err := chromedp.Do(ctx); err != nil { // open the tab
		t.Fatalf("open a chromium tab: %v", err)
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
	t.Setenv("REDIS_URL", "") // the configuration's Redis, not one inherited
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

// dashNode is a consoleNode that also serves the upstream stream, with a
// pipeline simulator that reports "Running", and a way to queue and
// start a job.
type dashNode struct {
	*consoleNode
	rdb  redis.UniversalClient
	pipe *pipelinesim.Pipeline
}

// startDashNode starts a dashNode on b; nickname is the simulated
// pipeline's.
func startDashNode(t *testing.T, b *redistest.Backend, nickname string) *dashNode {
	t.Helper()
	n := startConsoleNode(t, b, "127.0.0.1:0")
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: nickname})
	if err := pipe.Report(context.Background(), "Running"); err != nil {
		t.Fatal(err)
	}
	return &dashNode{consoleNode: n, rdb: b.Client, pipe: pipe}
}

// queue queues url with !a on the console and has the pipeline take the
// job.
func (d *dashNode) queue(url string) *pipelinesim.Job {
	d.t.Helper()
	d.send("!a " + url)
	id := strings.Fields(strings.TrimPrefix(d.expect("Use !status "), "Use !status "))[0]
	j, err := d.pipe.Take(context.Background())
	if err != nil || j == nil || j.Ident != id {
		d.t.Fatalf("take: %v %v (want %s)", j, err, id)
	}
	return j
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
	ctx := browser(t)
	b := redistest.RealOrMini(t)
	n := startDashNode(t, b, "browserpipe")
	s, dir, base, pipe := n.session, n.dir, n.base, n.pipe

	bg := context.Background()
	st := store.New(b.Client)
	queue := func(url string) *pipelinesim.Job {
		t.Helper()
		j := n.queue(url)
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
	// The whole page, every job in it: doc/dashboard.png is this picture
	// (ARCHIVEBOT_SCREENSHOTS=DIR keeps it).
	if keep := os.Getenv("ARCHIVEBOT_SCREENSHOTS"); keep != "" {
		full, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("full-page screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(keep, "2-ended-full.png"), full, 0o644); err != nil {
			t.Fatal(err)
		}
	}

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
	pg := evalJS[string](t, ctx, `document.body.innerText`)
	for _, wantText := range []string{fai.Ident, "http://failed.example/", "failed", "Permalink", "Ignore patterns"} {
		if !strings.Contains(pg, wantText) {
			t.Errorf("job page lacks %q:\n%s", wantText, pg)
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
	// A paused queue shows on the pending page, with who, when and why.
	if err := st.PauseQueue(bg, store.KeyPendingAO, "JAA", "deploy <b>now</b>"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/pipelines", "/pending", "/finished"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p)); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, p, `document.getElementById("status").textContent.startsWith("loaded")`)
		if p == "/pending" {
			banner := evalJS[string](t, ctx, `(document.getElementById("paused") || {}).textContent || ""`)
			if !regexp.MustCompile(`^Queue pending-ao is paused by JAA since \d{4}-\d\d-\d\d \d\d:\d\d UTC \(deploy <b>now</b>\): no pipeline gets its jobs until !resume\.$`).MatchString(banner) {
				t.Errorf("pending page's pause banner: %q", banner)
			}
			if n := evalJS[int](t, ctx, `document.querySelectorAll("#paused b").length`); n != 0 {
				t.Error("pause banner: the reason ran as HTML")
			}
		}
		screenshot(t, ctx, dir, "5"+strings.ReplaceAll(p, "/", "-"))
	}
	if err := st.ResumeQueue(bg, store.KeyPendingAO); err != nil {
		t.Fatal(err)
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

// lineNumbers reads the numbers of the "line N" stdout lines under the
// CSS selector sel.
func lineNumbers(t *testing.T, ctx context.Context, sel string) []int {
	t.Helper()
	texts := evalJS[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent)`, sel))
	re := regexp.MustCompile(`^line (\d+)$`)
	var out []int
	for _, s := range texts {
		if m := re.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

// TestDashboardNoGapAtStart: a pipeline writes a line every
// few milliseconds while the dashboard and the job page load. Each page
// subscribes first, then loads /logs/recent, and shows every line once:
// the numbers on the page are consecutive up to the last line written (no
// line lost between the history and the stream, none twice).
func TestDashboardNoGapAtStart(t *testing.T) {
	ctx := browser(t)
	d := startDashNode(t, redistest.RealOrMini(t), "hardpipe")
	bg := context.Background()
	for _, pg := range []struct{ name, path, sel string }{
		{"dashboard", "/", "#job-%s .log .line-stdout"},
		{"job page", "/jobs/%s", "#job-log .line-stdout"},
	} {
		t.Run(pg.name, func(t *testing.T) {
			j := d.queue("http://gapless-" + strings.ReplaceAll(pg.name, " ", "-") + ".example/")
			path, sel := pg.path, pg.sel
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, j.Ident)
			}
			if strings.Contains(sel, "%s") {
				sel = fmt.Sprintf(sel, j.Ident)
			}
			var mu sync.Mutex
			last := 0
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					case <-time.After(3 * time.Millisecond):
					}
					mu.Lock()
					last++
					n := last
					mu.Unlock()
					if _, err := j.LogStdout(bg, fmt.Sprintf("line %d\n", n)); err != nil {
						t.Errorf("log: %v", err)
						return
					}
				}
			}()
			time.Sleep(200 * time.Millisecond) // some history before the page loads
			mu.Lock()
			atNav := last
			mu.Unlock()
			if err := chromedp.Do(ctx, chromedp.Navigate(d.base+path)); err != nil {
				t.Fatal(err)
			}
			waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
			time.Sleep(500 * time.Millisecond) // lines while the stream runs
			close(stop)
			<-done
			mu.Lock()
			want := last
			mu.Unlock()
			waitJS(t, ctx, "the last line", fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent === "line %d")`, sel, want))
			got := lineNumbers(t, ctx, sel)
			screenshot(t, ctx, d.dir, "gapless-"+strings.ReplaceAll(pg.name, " ", "-"))
			if len(got) < 2 || want <= atNav {
				t.Fatalf("lines shown %v; %d written before the page loaded, %d in all", got, atNav, want)
			}
			for i := 1; i < len(got); i++ {
				if got[i] != got[i-1]+1 {
					t.Fatalf("lines %d then %d: %s (%d lines shown, %d..%d)", got[i-1], got[i],
						map[bool]string{true: "a duplicate", false: "a gap"}[got[i] <= got[i-1]], len(got), got[0], got[len(got)-1])
				}
			}
			if got[len(got)-1] != want {
				t.Errorf("last line shown %d, want %d", got[len(got)-1], want)
			}
		})
	}
}

// TestDashboardBoundedAndSafeLinks: "finished" events
// for jobs the page never showed create nothing; a job that ended leaves
// the page after its time (set short here); and a URL that is not http(s)
// (javascript:, data:) in the job header or a log line is text, never a
// live link, on the dashboard, the job page and the recent-logs page.
func TestDashboardBoundedAndSafeLinks(t *testing.T) {
	ctx := browser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.dashboardConfig = {endedKeepS: 2, maxEnded: 50};`}); err != nil {
		t.Fatal(err)
	}
	d := startDashNode(t, redistest.RealOrMini(t), "hardpipe")
	bg := context.Background()
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)

	// 300 "finished" events for jobs nobody queued.
	for i := 0; i < 300; i++ {
		ev := fmt.Sprintf(`{"ts":%d,"ident":"ghost%d","event":"finished","by":"x","detail":{"url":"http://ghost%d.example/"}}`, time.Now().Unix(), i, i)
		if err := d.rdb.Publish(bg, store.ChannelJobEvents, ev).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A real job after them: once it shows, the events before it were read.
	j := d.queue("http://links.example/")
	waitJS(t, ctx, "the real job", fmt.Sprintf(`document.getElementById("job-%s") !== null`, j.Ident))
	time.Sleep(300 * time.Millisecond)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("section.job").length`); n != 1 {
		t.Errorf("%d job sections after 300 events for unknown jobs and one real job, want 1", n)
	}

	// A pipeline writes URLs that are not http(s).
	const jsURL = "javascript:alert(document.domain)"
	if err := d.rdb.HSet(bg, j.Ident, "url", jsURL).Err(); err != nil {
		t.Fatal(err)
	}
	j.LogDownload(bg, "javascript:alert(1)", 200)
	j.LogIgnore(bg, "data:text/html,<script>alert(2)</script>", `x`, "global")
	j.LogDownload(bg, "JaVaScRiPt:alert(3)", 404)
	j.LogDownload(bg, "http://links.example/fine", 200)
	checkLinks := func(where string) {
		t.Helper()
		bad := evalJS[[]string](t, ctx, `[...document.querySelectorAll("a[href]")].map(a => a.href).filter(h => !/^https?:/i.test(h))`)
		if len(bad) > 0 {
			t.Errorf("%s: live links that are not http(s): %q", where, bad)
		}
	}
	waitJS(t, ctx, "four log lines", fmt.Sprintf(`document.querySelectorAll("#job-%s .log a, #job-%s .log span").length >= 4`, j.Ident, j.Ident))
	waitJS(t, ctx, "the header from the pipeline's hash", fmt.Sprintf(`document.querySelector("#job-%s .url").textContent === %q`, j.Ident, jsURL))
	checkLinks("dashboard")
	if ok := evalJS[bool](t, ctx, fmt.Sprintf(`!!document.querySelector('#job-%s .log a[href="http://links.example/fine"]')`, j.Ident)); !ok {
		t.Error("the http URL is not a link")
	}
	screenshot(t, ctx, d.dir, "links-dashboard")

	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/jobs/"+j.Ident)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the job page's log", `document.querySelectorAll("#job-log div").length >= 4`)
	checkLinks("job page")
	screenshot(t, ctx, d.dir, "links-job-page")

	// The recent-logs page builds its header from the job's URL too.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/logs/recent")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the recent-logs page's job", fmt.Sprintf(`document.querySelector('section.job[data-ident=%q] .url') !== null`, j.Ident))
	checkLinks("recent-logs page")

	// The job ends: on the dashboard it leaves after endedKeepS.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the job", fmt.Sprintf(`document.getElementById("job-%s") !== null`, j.Ident))
	j.LogStdout(bg, fmt.Sprintf(pipelinesim.StdoutFinished, j.Ident))
	if err := j.Done(bg); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "finished", fmt.Sprintf(`document.querySelector("#job-%s.state-finished") !== null`, j.Ident))
	waitJS(t, ctx, "the ended job gone", fmt.Sprintf(`document.getElementById("job-%s") === null`, j.Ident))
}

// TestDashboardJobEndedBeforeStream: a job that ends after the dashboard
// loaded the running jobs but before its stream connected (the
// "finished" event went out before the page was subscribed) does not stay
// on the page as running: the first hello resyncs, as a reconnect does.
// The page's WebSocket is made to connect 2 s late to hold that window
// open.
func TestDashboardJobEndedBeforeStream(t *testing.T) {
	ctx := browser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `(() => {
	const Real = window.WebSocket;
	function Late(url) {
		const self = this;
		let ws = null;
		this.send = (d) => ws && ws.send(d);
		this.close = (...a) => ws && ws.close(...a);
		Object.defineProperty(this, "readyState", { get: () => ws ? ws.readyState : 0 });
		setTimeout(() => {
			ws = new Real(url);
			ws.onmessage = (m) => self.onmessage && self.onmessage(m);
			ws.onclose = (e) => self.onclose && self.onclose(e);
			window.__streamOpened = true;
		}, 2000);
	}
	Late.CONNECTING = 0; Late.OPEN = 1; Late.CLOSING = 2; Late.CLOSED = 3;
	window.WebSocket = Late;
})();`}); err != nil {
		t.Fatal(err)
	}
	d := startDashNode(t, redistest.RealOrMini(t), "hardpipe")
	bg := context.Background()
	j := d.queue("http://ended-early.example/")
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the running job from /jobs", fmt.Sprintf(`document.getElementById("job-%s") !== null`, j.Ident))
	if evalJS[bool](t, ctx, `!!window.__streamOpened`) {
		t.Fatal("the stream connected before the job ended: the test did not hold the window open")
	}
	if err := j.Done(bg); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	waitJS(t, ctx, "finished", fmt.Sprintf(`document.querySelector("#job-%s.state-finished") !== null`, j.Ident))
}

// What a newcomer saw on the pages (issue "first hour"), in chromium: the
// dashboard's toolbar is laid out (the CSP refused its style attribute:
// "6 shownj/k", the filter box flush left), every time is UTC (no
// 12-hour local "loaded 11:45:37 AM"), and /logs/recent in a browser is a
// page showing each running job's last entries.
func TestPagesTextAndRecentInBrowser(t *testing.T) {
	ctx := browser(t)
	n := startDashNode(t, redistest.Mini(t), "recentpipe")
	dir, base := n.dir, n.base
	bg := context.Background()
	j := n.queue("http://recent.example/")
	id := j.Ident
	for i, code := range []int{200, 404, 301} {
		if _, err := j.LogDownload(bg, fmt.Sprintf("http://recent.example/p%d", i), code); err != nil {
			t.Fatal(err)
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	waitJS(t, ctx, "the job", fmt.Sprintf(`document.getElementById("job-%s") !== null`, id))
	bar := evalJS[map[string]any](t, ctx, `(() => {
		const box = document.getElementById("filter").getBoundingClientRect();
		const count = document.getElementById("num-jobs").getBoundingClientRect();
		const help = document.getElementById("num-jobs").nextElementSibling.getBoundingClientRect();
		return {display: getComputedStyle(document.getElementById("filter").parentElement).display,
			boxLeft: box.left, gap: help.top >= count.bottom ? 100 : help.left - count.right};
	})()`)
	if bar["display"] != "flex" || bar["boxLeft"].(float64) < 8 || bar["gap"].(float64) < 6 {
		t.Errorf("toolbar %v: want flex, the filter box indented, a gap between the count and the keys", bar)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/pipelines")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the pipelines page", `document.getElementById("status").textContent.startsWith("loaded")`)
	if st := evalJS[string](t, ctx, `document.getElementById("status").textContent`); !regexpMatch(`^loaded \d\d:\d\d:\d\dZ$`, st) {
		t.Errorf("status %q: want UTC like the other times", st)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/logs/recent")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the recent page", fmt.Sprintf(`document.querySelectorAll('[data-ident="%s"] .log div').length === 3`, id))
	got := evalJS[map[string]string](t, ctx, fmt.Sprintf(`(() => ({
		title: document.title, head: document.querySelector("h2").textContent,
		url: document.querySelector('[data-ident="%s"] .url').textContent,
		redirect: document.querySelector('[data-ident="%s"] .line-redirect').textContent}))()`, id, id))
	want := map[string]string{"title": "ArchiveBot recent logs", "head": "Recent log entries of 1 running job",
		"url": "http://recent.example/", "redirect": "301 Moved Permanently http://recent.example/p2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("/logs/recent %s: %q, want %q", k, got[k], v)
		}
	}
	screenshot(t, ctx, dir, "recent")
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

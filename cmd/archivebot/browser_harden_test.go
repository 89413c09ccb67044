package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/coordinator/store"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// Browser tests for issue 18 (findings 10, 12 and 15).

// dashNode is a whole node (console front end) with its web server, a
// pipeline simulator, and a way to queue and start a job.
type dashNode struct {
	base  string
	dir   string
	rdb   redis.UniversalClient
	pipe  *pipelinesim.Pipeline
	queue func(url string) *pipelinesim.Job
}

func startDashNode(t *testing.T) *dashNode {
	t.Helper()
	t.Setenv("REDIS_URL", "")
	b := redistest.RealOrMini(t)
	n := startConsoleNode(t, b, "127.0.0.1:0")
	s := n.session
	bg := context.Background()
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "hardpipe"})
	if err := pipe.Report(bg, "Running"); err != nil {
		t.Fatal(err)
	}
	d := &dashNode{base: n.base, dir: n.dir, rdb: b.Client, pipe: pipe}
	d.queue = func(url string) *pipelinesim.Job {
		t.Helper()
		s.send("!a " + url)
		id := strings.Fields(strings.TrimPrefix(s.expect("Use !status "), "Use !status "))[0]
		j, err := pipe.Take(bg)
		if err != nil || j == nil || j.Ident != id {
			t.Fatalf("take: %v %v (want %s)", j, err, id)
		}
		return j
	}
	return d
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

// TestDashboardNoGapAtStart (finding 10): a pipeline writes a line every
// few milliseconds while the dashboard and the job page load. Each page
// subscribes first, then loads /logs/recent, and shows every line once:
// the numbers on the page are consecutive up to the last line written (no
// line lost between the history and the stream, none twice).
func TestDashboardNoGapAtStart(t *testing.T) {
	ctx := browser(t)
	d := startDashNode(t)
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

// TestDashboardBoundedAndSafeLinks (findings 12 and 15): "finished" events
// for jobs the page never showed create nothing; a job that ended leaves
// the page after its time (set short here); and a URL that is not http(s)
// (javascript:, data:) in the job header or a log line is text, never a
// live link, on the dashboard and on the job page.
func TestDashboardBoundedAndSafeLinks(t *testing.T) {
	ctx := browser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.dashboardConfig = {endedKeepS: 2, maxEnded: 50};`}); err != nil {
		t.Fatal(err)
	}
	d := startDashNode(t)
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
	d := startDashNode(t)
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

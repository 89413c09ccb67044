package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// What a newcomer saw after the README's tour, in chromium: the
// simulator's rows read "404 OK" and "500 OK" (upstream's pipeline sends
// wget_code "OK" whenever wpull met no error), and the dashboard opened
// after the job ended said "loading…" and then showed an empty page, with
// no word that the job had ended nor a pointer to Finished.
func TestDashboardAfterTheTour(t *testing.T) {
	ctx := browser(t)
	d := startDashNode(t, redistest.Mini(t), "tourpipe")
	bg := context.Background()
	j := d.queue("http://tour.example/")
	for i, code := range []int{200, 404, 500, 0} {
		if _, err := j.LogDownload(bg, fmt.Sprintf("http://tour.example/p%d", i), code); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the job's four lines", fmt.Sprintf(`document.querySelectorAll("#job-%s .log div").length === 4`, j.Ident))
	rows := evalJS[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#job-%s .log div")].map((e) => e.textContent)`, j.Ident))
	want := []string{"200 OK http://tour.example/p0", "404 Not Found http://tour.example/p1",
		"500 Internal Server Error http://tour.example/p2", "0 NETWORK_ERROR http://tour.example/p3"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("rows %q, want %q", rows, want)
	}
	if evalJS[bool](t, ctx, `!document.getElementById("empty").hidden`) {
		t.Error("the empty-page note is shown beside a running job")
	}
	// A failure's reason comes with the event and again with the job's
	// record: the 2-ended screenshot showed "job failed: failed by an
	// operator" twice. Told twice, the page shows it once.
	if n := evalJS[float64](t, ctx, fmt.Sprintf(`(() => { const j = S.jobs.get(%q);
		setState(j, "failed", "told twice"); setState(j, "failed", "told twice");
		return [...j.log.children].filter((e) => e.textContent === "job failed: told twice").length; })()`, j.Ident)); n != 1 {
		t.Errorf("a failure told twice shows %v lines, want 1", n)
	}

	if err := j.Done(bg); err != nil {
		t.Fatal(err)
	}
	// The tour's order: the job has ended when the page is opened.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the note naming the job that ended", `!document.getElementById("last-ended").hidden`)
	got := evalJS[map[string]any](t, ctx, `(() => { const e = document.getElementById("empty"); return {
		hidden: e.hidden, text: e.textContent,
		links: [...e.querySelectorAll("a")].map((a) => a.getAttribute("href")).join(" ")}; })()`)
	text, _ := got["text"].(string)
	for _, w := range []string{"No job is running now.", "jobs that ended on Finished", "The last job to end: http://tour.example/ finished at "} {
		if !strings.Contains(text, w) {
			t.Errorf("the empty page says %q, want %q in it", text, w)
		}
	}
	if links, _ := got["links"].(string); got["hidden"] != false || !strings.Contains(links, "/finished") || !strings.Contains(links, "/jobs/"+j.Ident) {
		t.Errorf("the note: %v; want it shown with links to /finished and /jobs/%s", got, j.Ident)
	}
	screenshot(t, ctx, t.TempDir(), "after-the-tour")
}

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/archiveteam/archivebot-go/coordinator/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
)

// What a newcomer saw on the pages (issue "first hour"), in chromium: the
// dashboard's toolbar is laid out (the CSP refused its style attribute:
// "6 shownj/k", the filter box flush left), every time is UTC (no
// 12-hour local "loaded 11:45:37 AM"), and /logs/recent in a browser is a
// page showing each running job's last entries.
func TestPagesTextAndRecentInBrowser(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	ctx := browser(t)
	b := redistest.Mini(t)
	n := startConsoleNode(t, b, "127.0.0.1:0")
	s, dir, base := n.session, n.dir, n.base
	bg := context.Background()
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "recentpipe"})
	if err := pipe.Report(bg, "Running"); err != nil {
		t.Fatal(err)
	}
	s.send("!a http://recent.example/")
	id := strings.Fields(strings.TrimPrefix(s.expect("Use !status "), "Use !status "))[0]
	j, err := pipe.Take(bg)
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %v %v", j, err)
	}
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
		"url": "http://recent.example/", "redirect": "301 OK http://recent.example/p2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("/logs/recent %s: %q, want %q", k, got[k], v)
		}
	}
	screenshot(t, ctx, dir, "recent")
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

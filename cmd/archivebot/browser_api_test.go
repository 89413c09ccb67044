package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelineapi/apitest"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/archiveteam/archivebot-go/store"
)

// TestAPIPipelineInBrowser: a pipeline on the
// pipeline API is shown like a direct one. Its row on the pipelines page
// has no "undefined" where it reported no load (the API takes any subset
// of upstream's fields), and while its job logs, the dashboard's header
// counts its lines per second.
func TestAPIPipelineInBrowser(t *testing.T) {
	ctx := browser(t)
	b := redistest.RealOrMini(t)
	t.Setenv("REDIS_URL", "")
	dir := t.TempDir()
	base, api := "http://"+freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "node.toml")
	text := fmt.Sprintf("[redis]\nurl = %q\n[http]\nlisten = %q\nstream_listen = \"\"\n[pipelines]\nlisten = %q\n",
		b.URL, strings.TrimPrefix(base, "http://"), api)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node stderr:\n%s", s.err.String())
		}
	})
	s.expect("ArchiveBot console")

	bg := context.Background()
	st := store.New(b.Client)
	c := apitest.Client(t, st, "http://"+api, "apibrowser")
	// A report without load, memory or disk (a pipeline that does not
	// measure them).
	if _, err := c.Report(bg, map[string]string{"version": "20250101.01", "hostname": "apihost"}); err != nil {
		t.Fatal(err)
	}
	s.send("!a http://apibrowser.example/")
	id := strings.Fields(strings.TrimPrefix(s.expect("Use !status "), "Use !status "))[0]
	j, err := c.Take(bg, wire.TakeRequest{})
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %+v %v (want %s)", j, err, id)
	}
	// The dashboard is open before the job logs.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	// The job logs "line N" ten times a second until the test ends.
	var mu sync.Mutex
	last := 0
	lctx, stopLog := context.WithCancel(bg)
	logging := make(chan struct{})
	go func() {
		defer close(logging)
		for i := 1; lctx.Err() == nil; i++ {
			e, _ := json.Marshal(map[string]any{"type": "stdout", "message": fmt.Sprintf("line %d\n", i), "ts": time.Now().Unix()})
			if _, err := c.Update(lctx, id, wire.UpdateRequest{Heartbeat: 1, Log: []json.RawMessage{e}}); err != nil {
				if lctx.Err() == nil {
					t.Errorf("update: %v", err)
				}
				return
			}
			mu.Lock()
			last = i
			mu.Unlock()
			select {
			case <-lctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopLog(); <-logging })
	sel := fmt.Sprintf("#job-%s .log .line-stdout", id)
	waitJS(t, ctx, "the API job's lines", fmt.Sprintf(`document.querySelectorAll(%q).length >= 5`, sel))
	waitJS(t, ctx, "a line rate above 0 in the header", `/^live · [1-9]\d* lines\/s/.test(document.getElementById("status").textContent)`)
	screenshot(t, ctx, dir, "api-dashboard")

	// Entries the leader's publisher dropped (told in a message of its
	// own, as when nothing else is queued): the job's log marks the hole
	// and the header counts them.
	if err := b.Client.Publish(bg, store.ChannelAPILog, fmt.Sprintf(`{"jobs":{},"entries":[],"dropped":{%q:1234}}`, id)).Err(); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the hole marked in the job's log", fmt.Sprintf(`[...document.querySelectorAll("#job-%s .log .line-dropped")].some(e => e.textContent.includes("1,234 lines dropped by the leader"))`, id))
	waitJS(t, ctx, "the header's count", `document.getElementById("status").textContent.includes("1,234 lines dropped by the leader")`)
	screenshot(t, ctx, dir, "api-dashboard-dropped")

	// Loaded again while the job logs: the recent lines (from the API's
	// memory) and the stream's join without a gap or a repeat.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream", `document.getElementById("status").textContent.startsWith("live")`)
	mu.Lock()
	want := last + 3
	mu.Unlock()
	waitJS(t, ctx, "three more lines", fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent === "line %d")`, sel, want))
	got := lineNumbers(t, ctx, sel)
	screenshot(t, ctx, dir, "api-dashboard-reloaded")
	if len(got) < 5 {
		t.Errorf("lines shown after the reload: %v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Errorf("after the reload, lines %v: %d then %d", got, got[i-1], got[i])
			break
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/pipelines")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the pipelines page", `document.getElementById("status").textContent.startsWith("loaded")`)
	row := evalJS[string](t, ctx, `[...document.querySelectorAll("#pipelines tr")].map((r) => r.textContent).find((t) => t.includes("apibrowser")) || ""`)
	if row == "" || strings.Contains(row, "undefined") || strings.Contains(row, "NaN") {
		t.Errorf("pipelines row of the API pipeline: %q", row)
	}
	screenshot(t, ctx, dir, "api-pipelines")
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/pipelinesim"
	"github.com/archiveteam/archivebot-go/store"
)

// webNodeConfig is nodeConfig's file with the web server on a known
// address and http.public_url set (dashboard sign-in on).
func webNodeConfig(t *testing.T, cfg string) (string, string) {
	t.Helper()
	addr := freeAddr(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "[http]\nlisten = \"127.0.0.1:0\"\n",
		fmt.Sprintf("[http]\nlisten = %q\npublic_url = \"http://%s/\"\n", addr, addr), 1)
	// The simulated pipeline does not heartbeat: no death timer here.
	text = strings.Replace(text, "threshold = 10\n", "threshold = 1000000\n", 1)
	if text == string(b) {
		t.Fatal("no [http] listen line to replace")
	}
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, "http://" + addr
}

// End to end through ngircd: a voiced user types !login, opens
// the link from the bot's private message in chromium, signs in, and adds
// an ignore pattern from a log line (right-click, pattern edited before
// sending); the channel sees "vera (web): Added ignore pattern …" and
// !history names "vera (web)". Devoiced, the same session is refused by
// the command table and nothing changes. A form another site posts is
// refused. Opped, the user pauses and resumes a queue from the pending
// page and sees the banner come and go. Screenshots: ARCHIVEBOT_SCREENSHOTS=DIR keeps them.
func TestDashboardActionsThroughIRC(t *testing.T) {
	ctx := browser(t)
	b := redistest.RealOrMini(t)
	const ch = "#webact"
	_, cfg, op, voice, _ := channelWithRoles(t, b, ch)
	cfg, base := webNodeConfig(t, cfg)
	startNode(t, cfg)
	op.WaitBotIn(botNick, ch)
	dir := t.TempDir()
	bg := context.Background()
	st := store.New(b.Client)

	// A running job with a log line.
	reply := strings.Join(voice.Ask(botNick, ch, "!a http://weblogin.example/"), "\n")
	_, id := identOf(t, "http://weblogin.example/")
	if !strings.Contains(reply, id) {
		t.Fatalf("!a: %q", reply)
	}
	pipe := pipelinesim.New(b.Client, pipelinesim.Config{Nickname: "webpipe"})
	if err := pipe.Report(bg, "Running"); err != nil {
		t.Fatal(err)
	}
	j, err := pipe.Take(bg)
	if err != nil || j == nil || j.Ident != id {
		t.Fatalf("take: %v %v", j, err)
	}
	j.LogStdout(bg, fmt.Sprintf(pipelinesim.StdoutReceived, id))
	if _, err := j.LogDownload(bg, "http://weblogin.example/calendar/2024/01/day.html", 200); err != nil {
		t.Fatal(err)
	}

	patterns := func() []string {
		m, _, err := st.IgnoreSets(bg, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		return m[id]
	}
	before := len(patterns()) // the global ignore set's

	// !login in the channel: the link comes in private.
	voice.Say(ch, "!login")
	pm := voice.Expect("the sign-in link in private", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && strings.EqualFold(m.Params[0], "vera") && strings.Contains(m.Params[1], "/login?code=")
	})
	link := regexp.MustCompile(`http://\S+/login\?code=[A-Za-z0-9_-]+`).FindString(pm.Params[1])
	if !strings.HasPrefix(link, base+"/login?code=") {
		t.Fatalf("link %q in %q", link, pm.Params[1])
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the sign-in button", `document.getElementById("signin") !== null`)
	if got := evalJS[string](t, ctx, `document.getElementById("signin").textContent`); got != "Sign in as vera" {
		t.Errorf("button %q", got)
	}
	screenshot(t, ctx, dir, "actions-0-login")
	evalJS[bool](t, ctx, `(setTimeout(() => document.getElementById("signin").click(), 10), true)`)
	waitNavigated(t, ctx, base+"/")
	waitJS(t, ctx, "signed in", `(document.getElementById("signed-in-as")||{textContent:""}).textContent.includes("vera")`)
	if got := evalJS[string](t, ctx, `document.cookie`); strings.Contains(got, "archivebot_session") {
		t.Errorf("the session cookie is readable by scripts: %q", got)
	}
	waitJS(t, ctx, "the log line", fmt.Sprintf(`document.querySelector("#job-%s .log a") !== null`, id))

	// Right-click the log URL: "Ignore…" entries; take the /calendar/ one,
	// edit the pattern, send.
	evalJS[bool](t, ctx, fmt.Sprintf(`document.querySelector("#job-%s .log a").dispatchEvent(new MouseEvent("contextmenu", {bubbles: true, clientX: 300, clientY: 300})) || true`, id))
	waitJS(t, ctx, "the menu's act entries", `document.querySelectorAll("#menu .act-ig").length > 0`)
	evalJS[bool](t, ctx, `[...document.querySelectorAll("#menu .act-ig")].find(e => e.textContent.endsWith("calendar/")).click() || true`)
	waitJS(t, ctx, "the act dialog", `document.getElementById("act-pattern") !== null`)
	if got := evalJS[string](t, ctx, `document.getElementById("act-pattern").value`); got != `^https?://weblogin\.example/calendar/` {
		t.Errorf("suggested pattern %q", got)
	}
	pattern := `^https?://weblogin\.example/calendar/\d{4}/`
	evalJS[bool](t, ctx, fmt.Sprintf(`(document.getElementById("act-pattern").value = %q, true)`, pattern))
	evalJS[bool](t, ctx, `(document.getElementById("act-send").click(), true)`)
	waitJS(t, ctx, "the reply", `document.getElementById("act-result").textContent.includes("Added ignore pattern")`)
	screenshot(t, ctx, dir, "actions-1-signed-in-ignore")
	said := fmt.Sprintf("vera (web): Added ignore pattern %s to job %s.", pattern, id)
	op.Expect("the channel told", fromBot(ch, textIs(said)))
	hist := strings.Join(op.Ask(botNick, ch, "!history "+id), "\n")
	if !strings.Contains(hist, "vera (web)") {
		t.Errorf("!history does not name vera (web):\n%s", hist)
	}
	job, _ := st.GetJob(bg, id)
	if job == nil {
		t.Fatal("job gone")
	}
	pats := patterns()
	if len(pats) != before+1 || !slices.Contains(pats, pattern) {
		t.Fatalf("patterns %q", pats)
	}

	// The viewers' asks: a note (sent from here) titles the job; filters
	// by starter nick and hiding ended jobs come from the URL, go back
	// into it, and one button resets them.
	evalJS[bool](t, ctx, fmt.Sprintf(`(openAct(%q, "explain", {note: "calendar trap"}), document.getElementById("act-send").click(), true)`, id))
	waitJS(t, ctx, "the note's reply", `/note/i.test(document.getElementById("act-result").textContent)`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?nick=nobody&hide=ended")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the job, hidden by the nick filter", fmt.Sprintf(`document.getElementById("job-%s") !== null && document.getElementById("job-%s").classList.contains("hidden")`, id, id))
	if got := evalJS[string](t, ctx, `document.getElementById("nick-filter").value + " " + document.getElementById("hide-ended").checked`); got != "nobody true" {
		t.Errorf("filters from the URL: %q", got)
	}
	waitJS(t, ctx, "the note in the job's title", fmt.Sprintf(`document.getElementById("job-%s").title === "note: calendar trap"`, id))
	evalJS[bool](t, ctx, `(document.getElementById("reset-filters").click(), true)`)
	waitJS(t, ctx, "the job shown after reset", fmt.Sprintf(`!document.getElementById("job-%s").classList.contains("hidden") && location.search === ""`, id))
	evalJS[bool](t, ctx, `(() => { const n = document.getElementById("nick-filter"); n.value = "VERA"; n.dispatchEvent(new Event("input")); return true; })()`)
	waitJS(t, ctx, "the nick filter in the URL", fmt.Sprintf(`location.search === "?nick=VERA" && !document.getElementById("job-%s").classList.contains("hidden")`, id))
	screenshot(t, ctx, dir, "actions-2-filters")

	// Devoiced: the same session is refused by the command table.
	op.Send("MODE %s -v vera", ch)
	op.Ask(botNick, ch, "!status") // the bot saw the MODE before this
	waitJS(t, ctx, "signed in again after the reload", `typeof openAct === "function" && window.actSignedIn()`)
	evalJS[bool](t, ctx, fmt.Sprintf(`(openAct(%q, "ignore", {pattern: "^https?://weblogin\\.example/other/"}), document.getElementById("act-send").click(), true)`, id))
	waitJS(t, ctx, "the refusal", `document.getElementById("act-result").textContent.includes("only channel operators or voiced users")`)
	screenshot(t, ctx, dir, "actions-3-devoiced")
	if pats := patterns(); len(pats) != before+1 {
		t.Errorf("devoiced action changed the patterns: %q", pats)
	}

	// Opped, vera pauses a queue from the pending page (!pause, judged in
	// the first channel) and sees the banner; then resumes it. On ngircd
	// (no accounts) a session never acts above the rank it had at !login:
	// she signs in again.
	op.Send("MODE %s +o vera", ch)
	op.Ask(botNick, ch, "!status") // the bot saw the MODE before this
	voice.Say(ch, "!login")
	pm = voice.Expect("the second sign-in link", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && strings.EqualFold(m.Params[0], "vera") && strings.Contains(m.Params[1], "/login?code=") &&
			!strings.Contains(m.Params[1], link)
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(regexp.MustCompile(`http://\S+/login\?code=[A-Za-z0-9_-]+`).FindString(pm.Params[1]))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the second sign-in button", `document.getElementById("signin") !== null`)
	evalJS[bool](t, ctx, `(setTimeout(() => document.getElementById("signin").click(), 10), true)`)
	waitNavigated(t, ctx, base+"/")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/pending")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the queue controls", `document.body.classList.contains("signed-in") && document.querySelector('.queue-pause[data-queue="pending-ao"]') !== null && getComputedStyle(document.getElementById("queue-actions")).display !== "none"`)
	evalJS[bool](t, ctx, `(document.querySelector('.queue-reason[data-queue="pending-ao"]').value = "deploy", document.querySelector('.queue-pause[data-queue="pending-ao"]').click(), true)`)
	waitJS(t, ctx, "the pause banner", `(document.getElementById("paused") || {textContent: ""}).textContent.includes("Queue pending-ao is paused by vera") && document.getElementById("queue-result").textContent.includes("Paused queue pending-ao")`)
	screenshot(t, ctx, dir, "actions-4-pause")
	if got := evalJS[string](t, ctx, `document.getElementById("queue-result").textContent`); !strings.Contains(got, "!pause pending-ao deploy (in "+ch+", your rank there: op)") {
		t.Errorf("the pause's reply: %q", got)
	}
	if ps, err := st.Pauses(bg); err != nil || len(ps) != 1 || ps[0].Queue != "pending-ao" || ps[0].By != "vera" || ps[0].Reason != "deploy" {
		t.Errorf("after the pause, Redis has %+v (%v)", ps, err)
	}
	evalJS[bool](t, ctx, `(document.querySelector('.queue-resume[data-queue="pending-ao"]').click(), true)`)
	waitJS(t, ctx, "the banner gone", `document.getElementById("paused") === null && document.getElementById("queue-result").textContent.includes("Resumed queue pending-ao")`)
	if ps, err := st.Pauses(bg); err != nil || len(ps) != 0 {
		t.Errorf("after the resume, Redis has %+v (%v)", ps, err)
	}

	// A form on another site posting to the node: refused, nothing changes.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/actions/abort"><input name="ident" value="%s"><input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`, base, id)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site than 127.0.0.1
	if err := chromedp.Do(ctx, chromedp.Navigate(evilURL)); err != nil {
		t.Fatal(err)
	}
	waitNavigated(t, ctx, base+"/actions/abort")
	waitJS(t, ctx, "the refusal of the cross-site post", `document.body && document.body.textContent.includes("another site")`)
	screenshot(t, ctx, dir, "actions-5-cross-site")
	if job, _ := st.GetJob(bg, id); job == nil || job.AbortRequested {
		t.Errorf("cross-site post aborted the job: %+v", job)
	}
}

// waitNavigated waits until the tab shows url (a form's submission
// navigates it; polls across the navigation fail, so this asks again).
func waitNavigated(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var loc string
	var err error
	for time.Now().Before(deadline) {
		loc, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" ? location.href : ""`))
		if err == nil && loc == url {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	t.Fatalf("the tab never showed %s: at %q (%v): %s", url, loc, err, text)
}

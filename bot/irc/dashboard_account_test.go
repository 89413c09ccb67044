package irc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ergochat/irc-go/ircmsg"
	"github.com/redis/go-redis/v9"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/testproc"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/archiveteam/archivebot-go/web"
)

// TestDashboardAccountTakeover (scripted server, since ngircd
// tells no accounts): erin, voiced and logged into the account erinacct,
// signs in to the dashboard in chromium with the link !login sent her and
// acts; then her nick is taken by someone logged into malloryacct, voiced
// too. The session, bound to erinacct, cannot act through it: the page
// says why and nothing changes. ARCHIVEBOT_SCREENSHOTS=DIR keeps the
// screenshot.
func TestDashboardAccountTakeover(t *testing.T) {
	chromium := testproc.Bin(t, "chromium", "chromium-browser", "google-chrome")
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := store.New(rdb)
	var srv *web.Server
	b := bot.New(st, bot.Options{Logger: testLogger(t),
		Login: func(ctx context.Context, req bot.Request) (string, error) { return srv.LoginLink(ctx, req) }})
	s := newFakeServer(t)
	c := New(testIRCConfig(s.url(), "#c"), b, testLogger(t))
	fast(c)
	h := runHarness(t, c, b, m, rdb)

	srv, _ = serveDashboard(t, st, testLogger(t), b, c, nil)

	const ident = "acctjob1"
	if err := st.Register(context.Background(), store.NewJob{Ident: ident, URL: "http://acct.example/", FetchDepth: "inf",
		Slug: "acct", StartedBy: "erin", StartedIn: "#c", Queue: store.KeyPending}); err != nil {
		t.Fatal(err)
	}

	p := s.accept()
	registerOffering(h, p, accountCaps, "PREFIX=(ov)@+ CHANTYPES=#")
	p.Expect("JOIN", cmdIs("JOIN", "#c"))
	joinWith(p, "#c", "@ArchiveBot")
	p.Send(":erin!u@h JOIN #c erinacct :Erin")
	p.Send(":fake MODE #c +v erin")
	wantAccount(t, c, "erin", "erinacct", true)
	p.Send("@account=erinacct :erin!u@h PRIVMSG #c :!login")
	pm := p.Expect("the sign-in link", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && len(m.Params) == 2 && m.Params[0] == "erin" && strings.Contains(m.Params[1], "/login?code=")
	})
	link := regexp.MustCompile(`http://\S+/login\?code=[A-Za-z0-9_-]+`).FindString(pm.Params[1])

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1200, 700), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelC := chromedp.NewContext(actx)
	bctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("eval %s: %v", expr, err)
		}
		return v
	}
	wait := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr)); err == nil && v {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		v, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + " " + (document.body ? document.body.innerText : "")`))
		t.Fatalf("waiting for %s: %s", what, v)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	wait("the sign-in button", `document.getElementById("signin") !== null`)
	eval(`(setTimeout(() => document.getElementById("signin").click(), 10), "")`)
	wait("signed in", `location.pathname === "/" && (document.getElementById("signed-in-as")||{textContent:""}).textContent.includes("account erinacct")`)

	act := func(note string) {
		t.Helper()
		eval(fmt.Sprintf(`(openAct(%q, "explain", {note: %q}), document.getElementById("act-result").textContent = "", setTimeout(() => document.getElementById("act-send").click(), 10), "")`, ident, note))
	}
	act("checked by erin")
	wait("erin's action", `/note/i.test(document.getElementById("act-result").textContent) && !/Sorry|Refused/.test(document.getElementById("act-result").textContent)`)
	p.Expect("the channel told", func(m ircmsg.Message) bool {
		return m.Command == "PRIVMSG" && m.Params[0] == "#c" && strings.HasPrefix(m.Params[1], "erin (web): ")
	})

	// The nick changes hands: erin quits, someone logged into malloryacct
	// takes the nick and is voiced.
	p.Send(":erin!u@h QUIT :bye")
	p.Send(":erin!m@evil JOIN #c malloryacct :Mallory")
	p.Send(":fake MODE #c +v erin")
	wantAccount(t, c, "erin", "malloryacct", true)
	testproc.Eventually(t, "erin voiced again", func() bool { return c.Rank("#c", "erin") == bot.RankVoice })
	before := m.Dump()
	act("mallory was here")
	wait("the refusal", `document.getElementById("act-result").textContent.includes("now logged into malloryacct")`)
	if got := eval(`document.getElementById("act-result").textContent`); !strings.Contains(got, "Nothing was changed") {
		t.Errorf("refusal %q", got)
	}
	png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err == nil {
		dir := os.Getenv("ARCHIVEBOT_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, "actions-4-account-takeover.png")
		os.WriteFile(path, png, 0o644)
		t.Logf("screenshot: %s", path)
	}
	if after := m.Dump(); after != before {
		t.Errorf("the refused action changed Redis")
	}
	job, _ := st.GetJob(context.Background(), ident)
	if job.Note.Value != "checked by erin" {
		t.Errorf("note %q", job.Note.Value)
	}
}

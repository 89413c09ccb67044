package web

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// What the sign-in pages say, as a newcomer on the console read them:
// the page said the link was "sent to root on IRC" (it was printed on
// the console), and the link's validity read "2 minutes" on one page and
// "10 minutes" on another. Every page now says the one validity, from
// bot.LoginLinkTTL, and names who the link was made for and by what.
func TestSignInPagesSayOneValidity(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test")
	validity := "links work for " + bot.LoginLinkValidity()
	link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: "root", Where: "console"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	page := body(t, rig.do(t, "GET", u.RequestURI(), nil, nil, nil))
	if !strings.Contains(page, "This link was made for root by !login.") || strings.Contains(page, "on IRC") {
		t.Errorf("the sign-in page says:\n%s", page)
	}
	for _, c := range []struct{ name, code string }{{"never issued", "BBBBBBBBBBBBBBBBBBBBBB"}, {"malformed", "x"}} {
		res := rig.do(t, "GET", "/login?code="+c.code, nil, nil, nil)
		b := body(t, res)
		if res.StatusCode != http.StatusNotFound || !strings.Contains(b, validity) || strings.Contains(b, "10 minutes") {
			t.Errorf("%s: %d\n%s\nwant %q and no other duration", c.name, res.StatusCode, b, validity)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "`!login`") || !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "valid once within "+bot.LoginLinkValidity()) {
		t.Errorf("the README does not tell of !login and its link's validity (%s)", bot.LoginLinkValidity())
	}
}

package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// Ops can always sign in, whatever strangers did: !login is open to
// anyone, and rankless sign-ins fill at most web.sessions_rankless of the
// pool; the refusal is said, counted and logged. (Before, 20 junk
// sessions locked every op out of a pool of 20.)
func TestStrangersCannotLockOpsOut(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	rig.srv.opt.Actions.SessionsTotal = 5
	rig.srv.opt.Actions.SessionsRankless = 3
	refused := 0
	for i := 0; i < 10; i++ {
		nick := fmt.Sprintf("junk%d", i)
		link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: nick})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(link)
		res := rig.do(t, "POST", "/login", url.Values{"code": {u.Query().Get("code")}}, nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if res.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("ten rankless sign-ins into a pool of 5: none refused")
	}
	for _, op := range []string{"opal", "olive"} {
		rig.p.set("#archivebot", op, bot.RankOp)
		c, csrf := rig.signIn(t, op)
		if res, b := rig.act(t, "explain", c, csrf, url.Values{"note": {"op " + op}}, nil); res.StatusCode != 200 || strings.Contains(b, "Sorry") {
			t.Errorf("%s after the strangers: %d %s", op, res.StatusCode, b)
		}
	}
	if l := rig.logs.String(); !strings.Contains(l, "class=web_sessions_rankless") {
		t.Errorf("the rankless refusals are not logged:\n%s", l)
	}
}

// A sign-in POST that carries neither Sec-Fetch-Site nor Origin cannot
// be told from another site's form in an old browser (no session needed,
// so no CSRF token binds it): refused with the reason; the code stays
// usable from the page.
func TestSignInNeedsItsPage(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	form := url.Values{"code": {u.Query().Get("code")}}
	res := rig.do(t, "POST", "/login", form, nil, nil)
	if b := body(t, res); res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 || !strings.Contains(b, "Nothing was changed") {
		t.Errorf("POST /login with neither Sec-Fetch-Site nor Origin: %d %s", res.StatusCode, b)
	}
	res = rig.do(t, "POST", "/login", form, nil, map[string]string{"Origin": "http://node.test"})
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("POST /login from the page (Origin): %d %s", res.StatusCode, body(t, res))
	}
}

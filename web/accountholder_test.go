package web

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// holderPresence is a fakePresence that also tells which nicks are logged
// into an account (AccountHolders), as the IRC front end does.
type holderPresence struct{ *fakePresence }

func (p holderPresence) NicksOf(account string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n, a := range p.accounts {
		if a != "" && strings.EqualFold(a, account) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// A session bound to an account follows the account's holder to another
// nick, with that nick's rank; whoever takes the old nick neither acts
// through the session nor ends it with !logout; the holder does end it.
// (The same on a real server: bot/irc's TestDashboardSessionFollowsAccount.)
func TestActionFollowsAccountHolder(t *testing.T) {
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	rig.srv.opt.Actions.Presence = func() Presence { return holderPresence{rig.p} }
	rig.p.setAccount("erin", "erin-acct")
	c, csrf := rig.signIn(t, "erin")
	saidLast := func() string {
		rig.mu.Lock()
		defer rig.mu.Unlock()
		if len(rig.said) == 0 {
			return ""
		}
		return rig.said[len(rig.said)-1]
	}
	note := func(text string) (int, string) {
		res, b := rig.act(t, "explain", c, csrf, url.Values{"note": {text}}, nil)
		return res.StatusCode, b
	}

	// Renamed to erin2, still logged in, voiced; the old nick is gone.
	rig.p.setAccount("erin", "")
	rig.p.setAccount("erin2", "erin-acct")
	rig.p.set("#archivebot", "erin2", bot.RankVoice)
	if code, b := note("by erin2"); code != 200 || strings.Contains(b, "Sorry") {
		t.Fatalf("the holder under another nick: %d %s", code, b)
	}
	if got := saidLast(); !strings.HasPrefix(got, "#archivebot erin2 (web): ") {
		t.Errorf("said %q, want it as erin2", got)
	}
	// mallory takes the nick erin and is voiced: the session still acts
	// as erin2, and mallory's !logout leaves it.
	rig.p.setAccount("erin", "mallory")
	rig.p.set("#archivebot", "erin", bot.RankVoice)
	if code, _ := note("still erin2"); code != 200 || !strings.HasPrefix(saidLast(), "#archivebot erin2 (web): ") {
		t.Errorf("with mallory on the nick: %d, said %q", code, saidLast())
	}
	if n, err := rig.srv.Logout(context.Background(), bot.Request{Nick: "erin"}); err != nil || n != 0 {
		t.Errorf("!logout by mallory on the nick erin ended %d sessions (%v), want 0", n, err)
	}
	// With no nick logged into the account, refused.
	rig.p.setAccount("erin2", "")
	if code, b := note("mallory"); code != 403 || !strings.Contains(b, "now logged into mallory") {
		t.Errorf("no holder: %d %s", code, b)
	}
	// The holder, logged in again, ends it.
	rig.p.setAccount("erin2", "erin-acct")
	if n, err := rig.srv.Logout(context.Background(), bot.Request{Nick: "erin2"}); err != nil || n != 1 {
		t.Errorf("!logout by the holder ended %d sessions (%v), want 1", n, err)
	}
	if code, _ := note("after logout"); code != 401 {
		t.Errorf("after the holder's !logout: %d, want 401", code)
	}
}

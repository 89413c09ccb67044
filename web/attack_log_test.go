package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/internal/testproc"
)

// loggedRefusals sums, per class, the refused= counts of the refusal
// lines in logs.
func loggedRefusals(logs string) map[string]int {
	out := map[string]int{}
	re := regexp.MustCompile(`msg=refused .*?class=(\S+) refused=(\d+)`)
	for _, m := range re.FindAllStringSubmatch(logs, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] += n
	}
	return out
}

// This attacks on the dashboard, as the log shows them: every
// refusal is in a rate-limited WARN line with its count, and the counts
// add up to what was refused (nothing dropped silently). The lines are
// logged with -v for doc/benchmarks.md (Attacks, as the log shows them).
func TestDashboardAttacksLeaveATrace(t *testing.T) {
	t.Parallel() // it waits out the refusal log's 10 s summary: time the CPU can spend elsewhere
	be := redistest.Mini(t)
	rig := newActionsRig(t, be, "http://node.test/")
	rig.p.limit = 20 // irc.commands_per_minute's default
	rig.srv.opt.Actions.SessionsTotal, rig.srv.opt.Actions.SessionsRankless = 1000, 100

	// Web actions past the throttle: five rankless sessions from five addresses, 30 op-only
	// actions each.
	refused := map[string]int{}
	for i := 0; i < 5; i++ {
		nick := fmt.Sprintf("anon%d", i)
		c, csrf := rig.signIn(t, nick)
		for j := 0; j < 30; j++ {
			res, b := rig.act(t, "pause", c, csrf, url.Values{"queue": {"pending"}}, map[string]string{"X-Forwarded-For": ""})
			switch {
			case res.StatusCode == http.StatusTooManyRequests:
				refused["web_rate_irc"]++
			case strings.Contains(b, "only channel operators"):
				refused["web_action_denied"]++
			default:
				t.Fatalf("%s's pause %d: %d %s", nick, j, res.StatusCode, b)
			}
		}
	}
	if len(rig.said) != 0 {
		t.Errorf("the channel heard %d lines of refused actions", len(rig.said))
	}

	// The sign-in pool: 120 rankless sign-ins (the rankless bound is 100, five
	// are held already).
	for i := 0; i < 120; i++ {
		nick := fmt.Sprintf("junk%d", i)
		link, err := rig.srv.LoginLink(context.Background(), bot.Request{Nick: nick})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(link)
		res := rig.do(t, "POST", "/login", url.Values{"code": {u.Query().Get("code")}}, nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if res.StatusCode == http.StatusTooManyRequests {
			refused["web_sessions_rankless"]++
		}
	}
	rig.p.set("#archivebot", "opal", bot.RankOp)
	rig.signIn(t, "opal") // an op still signs in

	testproc.EventuallyWithin(t, 30*time.Second, "every refusal logged (a summary line per class and 10 s)", func() bool {
		got := loggedRefusals(rig.logs.String())
		for class, n := range refused {
			if got[class] != n {
				return false
			}
		}
		return true
	})
	for _, l := range strings.Split(rig.logs.String(), "\n") {
		if strings.Contains(l, "msg=refused") {
			t.Log(l)
		}
	}
	t.Logf("refused: %v", refused)
}

// The stream flood as the log shows it: 900 WebSockets from
// 9 addresses against caps of 512 in total and 64 per address; every
// refusal is answered 503, and the log's counts add up to them.
func TestStreamFloodLeavesATrace(t *testing.T) {
	t.Parallel() // it waits out the refusal log's 10 s summary: time the CPU can spend elsewhere
	_, addr, logs := limitedServer(t, ConnLimits{Total: 512, PerAddr: 64}, HubOptions{})
	refused := map[string]int{}
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for a := 1; a <= 9; a++ {
		d := websocket.Dialer{NetDial: func(network, target string) (net.Conn, error) {
			return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.1.%d", a))}}).Dial(network, target)
		}}
		for i := 0; i < 100; i++ {
			c, res, err := d.Dial("ws://"+addr+"/stream", nil)
			if err == nil {
				open = append(open, c)
				continue
			}
			if res == nil || res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("connection %d from 127.0.1.%d: %v", i, a, err)
			}
			b, _ := io.ReadAll(res.Body)
			switch {
			case strings.Contains(string(b), "max_conns_per_addr"):
				refused["web_conns_max_conns_per_addr"]++
			case strings.Contains(string(b), "max_conns"):
				refused["web_conns_max_conns"]++
			}
		}
	}
	if len(open) != 512 {
		t.Errorf("%d streams held, want 512", len(open))
	}
	testproc.EventuallyWithin(t, 30*time.Second, "every refusal logged (a summary line per class and 10 s)", func() bool {
		got := loggedRefusals(logs.String())
		for class, n := range refused {
			if got[class] != n {
				return false
			}
		}
		return true
	})
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=refused") {
			t.Log(l)
		}
	}
	t.Logf("refused: %v", refused)
}

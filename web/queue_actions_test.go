package web

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/bot"
	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// pausesOf reads the paused queues as "QUEUE by BY (REASON)".
func pausesOf(t *testing.T, st *store.Store) []string {
	t.Helper()
	ps, err := st.Pauses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Queue+" by "+p.By+" ("+p.Reason+")")
	}
	return out
}

// The queue actions pause and resume are !pause and !resume, judged in
// the first configured channel: an op pauses and resumes (Redis shows
// the pause, then not); a voiced non-op, an op of another channel only,
// a missing CSRF token and a bad queue are refused with the reason and
// change nothing.
func TestQueueActions(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		rig := newActionsRig(t, be, "http://node.test/")
		// Signed in as an op: a session without an account never acts above its rank at sign-in.
		rig.p.set("#archivebot", "erin", bot.RankOp)
		c, csrf := rig.signIn(t, "erin")
		q := func(queue, reason string) url.Values {
			v := url.Values{"queue": {queue}}
			if reason != "" {
				v.Set("reason", reason)
			}
			return v
		}

		// Voiced in the first channel, op only in the job's: refused by
		// the command table in #main; nothing changes.
		rig.p.set("#main", "erin", bot.RankVoice)
		rig.p.set("#archivebot", "erin", bot.RankOp)
		before := be.Dump(t)
		res, b := rig.act(t, "pause", c, csrf, q("pending", "deploy"), nil)
		if res.StatusCode != 200 || !strings.Contains(b, "only channel operators may") || !strings.Contains(b, `"channel":"#main"`) || !strings.Contains(b, `"rank":"voice"`) {
			t.Errorf("voiced pause: %d %s", res.StatusCode, b)
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused pause changed Redis")
		}
		if got := pausesOf(t, rig.st); len(got) != 0 {
			t.Errorf("paused after a refusal: %q", got)
		}
		// The command table's refusal is the page's alone: the channel
		// hears nothing of it.
		if len(rig.said) != 0 {
			t.Errorf("channel saw %q", rig.said)
		}
		rig.said = nil

		// Refused before the command table: no CSRF, a bad or missing
		// queue, a reason with a line break, a resume with no queue.
		rig.p.set("#main", "erin", bot.RankOp)
		for _, tc := range []struct {
			name   string
			action string
			form   url.Values
			csrf   string
			hdr    map[string]string
			status int
			says   string
		}{
			{"no csrf", "pause", q("pending", ""), "", map[string]string{"X-CSRF-Token": ""}, 403, "no CSRF token"},
			{"wrong csrf", "resume", q("all", ""), "x" + csrf, nil, 403, "wrong CSRF token"},
			{"cross-site", "pause", q("all", ""), csrf, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "another site"},
			{"not a queue", "pause", q("working", ""), csrf, nil, 400, "queue must be pending, pending-ao, pending-large, pending:NAME or all"},
			{"no queue", "resume", url.Values{}, csrf, nil, 400, "queue is missing"},
			{"two words", "pause", q("pending ao", ""), csrf, nil, 400, "one word"},
			{"line break", "pause", q("pending", "a\r\nPRIVMSG #x :hi"), csrf, nil, 400, "control character"},
		} {
			before := be.Dump(t)
			res, b := rig.act(t, tc.action, c, tc.csrf, tc.form, tc.hdr)
			if res.StatusCode != tc.status || !strings.Contains(b, tc.says) || !strings.Contains(b, "Nothing was changed") {
				t.Errorf("%s: %d %s", tc.name, res.StatusCode, b)
			}
			if after := be.Dump(t); !reflect.DeepEqual(before, after) {
				t.Errorf("%s changed Redis", tc.name)
			}
		}
		if len(rig.said) != 0 {
			t.Errorf("refusals reached the channel: %q", rig.said)
		}

		// An op of the first channel pauses a queue with a reason…
		res, b = rig.act(t, "pause", c, csrf, q("pending-ao", "deploy now"), nil)
		if res.StatusCode != 200 || !strings.Contains(b, `"command":"!pause pending-ao deploy now"`) || !strings.Contains(b, `"rank":"op"`) ||
			!strings.Contains(b, "Paused queue pending-ao") {
			t.Fatalf("op pause: %d %s", res.StatusCode, b)
		}
		if got := pausesOf(t, rig.st); !reflect.DeepEqual(got, []string{"pending-ao by erin (deploy now)"}) {
			t.Errorf("after pause, Redis has %q", got)
		}
		if len(rig.said) != 1 || !strings.HasPrefix(rig.said[0], "#main erin (web): Paused queue pending-ao") {
			t.Errorf("channel saw %q", rig.said)
		}
		// …pausing it again is the command's refusal, changing nothing…
		before = be.Dump(t)
		if _, b := rig.act(t, "pause", c, csrf, q("pending-ao", "again"), nil); !strings.Contains(b, "Queue pending-ao is paused by erin") || !strings.Contains(b, "Nothing was changed") {
			t.Errorf("second pause: %s", b)
		}
		if after := be.Dump(t); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused second pause changed Redis")
		}
		// …and resumes it.
		res, b = rig.act(t, "resume", c, csrf, q("pending-ao", ""), nil)
		if res.StatusCode != 200 || !strings.Contains(b, `"command":"!resume pending-ao"`) || !strings.Contains(b, "Resumed queue pending-ao") {
			t.Fatalf("op resume: %d %s", res.StatusCode, b)
		}
		if got := pausesOf(t, rig.st); len(got) != 0 {
			t.Errorf("after resume, Redis has %q", got)
		}
		// Every queue, without a reason.
		if _, b := rig.act(t, "pause", c, csrf, q("all", ""), nil); !strings.Contains(b, "Paused every queue") {
			t.Errorf("pause all: %s", b)
		}
		if got := pausesOf(t, rig.st); !reflect.DeepEqual(got, []string{"all by erin ()"}) {
			t.Errorf("after pause all, Redis has %q", got)
		}
		if _, b := rig.act(t, "resume", c, csrf, q("all", ""), nil); !strings.Contains(b, "Resumed every queue") {
			t.Errorf("resume all: %s", b)
		}
		if got := pausesOf(t, rig.st); len(got) != 0 {
			t.Errorf("after resume all, Redis has %q", got)
		}
		m := body(t, rig.do(t, "GET", "/metrics", nil, nil, nil))
		if !strings.Contains(m, `archivebot_web_refused_total{reason="csrf"}`) || !strings.Contains(m, `action="pause"`) {
			t.Errorf("/metrics lacks the csrf refusal or the pause action")
		}
	})
}

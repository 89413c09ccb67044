package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// !login (!web) sends the link in private, wherever it was
// typed, and not from the dashboard itself; !logout ends sessions; both
// say so when signing in is off.
func TestLoginCommand(t *testing.T) {
	be := redistest.Mini(t)
	var asked []Request
	b := New(store.New(be.Client), Options{
		Login: func(ctx context.Context, req Request) (string, error) {
			asked = append(asked, req)
			return "http://node/login?code=abc", nil
		},
		Logout: func(ctx context.Context, req Request) (int, error) { return 2, nil },
	})
	got := say(b, RankNone, "#a", "!login")
	want := []string{"[privmsg carol] Your dashboard sign-in link, for you alone, valid once within 2 minutes: http://node/login?code=abc",
		"carol: I sent you a sign-in link in private."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("!login in a channel:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := say(b, RankNone, "", "!web"); len(got) != 1 || !strings.HasPrefix(got[0], "[privmsg carol] Your dashboard sign-in link") {
		t.Errorf("!web in private: %q", got)
	}
	if len(asked) != 2 || asked[0].Nick != "carol" {
		t.Errorf("Login hook asked %+v", asked)
	}
	rec := &recorder{nick: "carol"}
	b.Handle(context.Background(), Request{Nick: "carol", Channel: "#a", Text: "!login", Where: WhereWeb}, rec)
	if len(rec.replies) != 1 || !strings.Contains(rec.replies[0], "only from IRC") || len(asked) != 2 {
		t.Errorf("!login from the web: %q (hook asked %d times)", rec.replies, len(asked))
	}
	if got := say(b, RankNone, "#a", "!logout"); len(got) != 1 || got[0] != "carol: Ended your 2 dashboard sessions." {
		t.Errorf("!logout: %q", got)
	}
	off := New(store.New(be.Client), Options{})
	for _, cmd := range []string{"!login", "!logout"} {
		if got := say(off, RankOp, "#a", cmd); len(got) != 1 || !strings.Contains(got[0], "signing in to the dashboard is off") {
			t.Errorf("%s while off: %q", cmd, got)
		}
	}
}

// A dashboard action is the IRC command, with where=web in the
// audit line (the channel beside it) and "(web)" after the nick in the
// job's history; !pending links the pending page when http.public_url is
// set.
func TestWebRequestAuditHistoryPending(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		var buf bytes.Buffer
		st := store.New(be.Client)
		b := New(st, Options{Catalog: referenceCatalog(t), PublicURL: "https://bot.example/",
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		say(b, RankOp, "#a", "!a http://example.com/")
		rec := &recorder{nick: "erin"}
		b.Handle(context.Background(), Request{Nick: "erin", Channel: "#a", Rank: RankVoice, Where: WhereWeb,
			Text: "!ig " + refIdent + " ^https?://example\\.com/trap/"}, rec)
		if len(rec.replies) != 1 || !strings.HasPrefix(rec.replies[0], "erin: Added ignore pattern") {
			t.Fatalf("web !ig: %q", rec.replies)
		}
		var audit map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			json.Unmarshal([]byte(l), &m)
			if m["msg"] == "command" && m["nick"] == "erin" {
				audit = m
			}
		}
		if audit["where"] != "web" || audit["channel"] != "#a" || audit["command"] != "!ignore" || audit["outcome"] != "ok" {
			t.Errorf("audit line of the web action: %v", audit)
		}
		h, err := st.History(context.Background(), refIdent, 10)
		if err != nil || len(h) < 2 || h[len(h)-1].By != "erin (web)" {
			t.Errorf("history = %+v, %v; want the last entry by \"erin (web)\"", h, err)
		}
		hist := say(b, RankNone, "#a", "!history "+refIdent)
		if !strings.Contains(strings.Join(hist, "\n"), "erin (web)") {
			t.Errorf("!history does not show the web action: %q", hist)
		}
		pend := say(b, RankNone, "#a", "!pending")
		if last := pend[len(pend)-1]; last != "[privmsg carol] Every queue, live: https://bot.example/pending" {
			t.Errorf("!pending ends with %q", last)
		}
	})
}

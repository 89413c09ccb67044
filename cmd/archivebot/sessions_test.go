package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// `archivebot sessions list|revoke` lists the dashboard's
// sessions without their tokens and ends one by id prefix or all of a
// nick's; bad arguments change nothing.
func TestSessionsCommand(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		st := store.New(b.Client)
		for i, nick := range []string{"erin", "Erin", "frank"} {
			code := "code-" + nick
			st.CreateLoginCode(ctx, code, store.LoginCode{Nick: nick, NickKey: strings.ToLower(nick), Expires: time.Now().Add(time.Minute), MAC: "m"})
			now := time.Now()
			if _, err := st.LoginWithCode(ctx, code, "m", store.WebSession{ID: fmt.Sprintf("%c%063d", 'a'+i, i), Nick: nick, NickKey: strings.ToLower(nick),
				Created: now, Expires: now.Add(time.Hour)}, store.SessionBounds{PerNick: 5, Total: 10}); err != nil {
				t.Fatal(i, err)
			}
		}
		if code, _, errs := admin(t, b, "sessions"); code != 2 || errs == "" {
			t.Errorf("no action: %d %q", code, errs)
		}
		code, out, _ := admin(t, b, "sessions", "list")
		if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, "frank") || strings.Contains(out, "token-") {
			t.Fatalf("list: %d\n%s", code, out)
		}
		var rows []struct {
			ID, Nick string
		}
		adminJSON(t, b, &rows, "sessions", "list")
		if len(rows) != 3 {
			t.Fatalf("json list %+v", rows)
		}
		if code, _, errs := admin(t, b, "sessions", "revoke", "nobody"); code != 1 || !strings.Contains(errs, "nothing was done") {
			t.Errorf("revoke unknown: %d %q", code, errs)
		}
		frank := ""
		for _, r := range rows {
			if r.Nick == "frank" {
				frank = r.ID
			}
		}
		if code, out, _ := admin(t, b, "sessions", "revoke", frank[:10]); code != 0 || !strings.Contains(out, "of frank ended") {
			t.Errorf("revoke by id: %d %q", code, out)
		}
		if code, out, _ := admin(t, b, "sessions", "revoke", "ERIN"); code != 0 || !strings.Contains(out, "2 session(s) of ERIN ended") {
			t.Errorf("revoke by nick: %d %q", code, out)
		}
		if list, _ := st.WebSessions(ctx); len(list) != 0 {
			t.Errorf("left: %+v", list)
		}
	})
}

package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// code stores a sign-in code under id (the web server's keyed hash, here
// the name itself) with a stand-in MAC.
func code(t *testing.T, ctx context.Context, s *store.Store, id, nick string, rank int, ttl time.Duration) {
	t.Helper()
	if err := s.CreateLoginCode(ctx, id, store.LoginCode{Nick: nick, NickKey: strings.ToLower(nick), Rank: rank, Presence: "p1",
		Expires: time.Now().Add(ttl), MAC: "mac-" + id}); err != nil {
		t.Fatal(err)
	}
}

// login makes a session id for nick from the code id.
func login(ctx context.Context, s *store.Store, codeID, id, nick string, rank int, b store.SessionBounds) (string, error) {
	now := time.Now()
	return s.LoginWithCode(ctx, codeID, "mac-"+codeID, store.WebSession{ID: id, Nick: nick, NickKey: strings.ToLower(nick), Rank: rank,
		Presence: "p1", Created: now, Expires: now.Add(time.Hour), MAC: "smac-" + id}, b)
}

// A sign-in code makes one session, once; a used, expired, never issued
// or rewritten code makes none; the bounds refuse and leave the code
// usable; ending sessions removes them from every index.
func TestWebLoginCodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		bounds := store.SessionBounds{PerNick: 2, Total: 10}
		code(t, ctx, s, "code-1", "Erin", 2, 2*time.Minute)
		c, err := s.PeekLoginCode(ctx, "code-1")
		if err != nil || c.Nick != "Erin" || c.Rank != 2 || c.Presence != "p1" || c.MAC != "mac-code-1" || c.Used {
			t.Fatalf("peek = %+v, %v", c, err)
		}
		if _, err := login(ctx, s, "code-1", "sess-1", "Erin", 2, bounds); err != nil {
			t.Fatal(err)
		}
		got, err := s.WebSession(ctx, "sess-1")
		if err != nil || got == nil || got.Nick != "Erin" || got.Rank != 2 || got.Presence != "p1" || got.MAC != "smac-sess-1" {
			t.Fatalf("session = %+v, %v", got, err)
		}
		if _, err := login(ctx, s, "code-1", "sess-2", "Erin", 2, bounds); !errors.Is(err, store.ErrCodeUsed) {
			t.Errorf("reused code: %v, want ErrCodeUsed", err)
		}
		if _, err := login(ctx, s, "forged", "sess-3", "Erin", 2, bounds); !errors.Is(err, store.ErrCodeUnknown) {
			t.Errorf("forged code: %v, want ErrCodeUnknown", err)
		}
		code(t, ctx, s, "code-x", "Erin", 0, time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if _, err := login(ctx, s, "code-x", "sess-4", "Erin", 0, bounds); !errors.Is(err, store.ErrCodeExpired) {
			t.Errorf("expired code: %v, want ErrCodeExpired", err)
		}
		// A code rewritten since it was read (its MAC changed) makes none.
		code(t, ctx, s, "code-w", "Erin", 0, time.Minute)
		if _, err := s.LoginWithCode(ctx, "code-w", "mac-other", store.WebSession{ID: "sess-5", Nick: "Erin", NickKey: "erin",
			Expires: time.Now().Add(time.Hour)}, bounds); !errors.Is(err, store.ErrCodeUnknown) {
			t.Errorf("rewritten code: %v, want ErrCodeUnknown", err)
		}
		for _, id := range []string{"sess-2", "sess-3", "sess-4", "sess-5"} {
			if ws, _ := s.WebSession(ctx, id); ws != nil {
				t.Errorf("refused code made session %+v", ws)
			}
		}

		// Per-nick bound: a second session is allowed, a third refused,
		// and the refused code still works once a session ends.
		code(t, ctx, s, "code-2", "erin", 2, time.Minute)
		if _, err := login(ctx, s, "code-2", "sess-6", "erin", 2, bounds); err != nil {
			t.Fatal(err)
		}
		code(t, ctx, s, "code-3", "ERIN", 2, time.Minute)
		var le *store.SessionLimitError
		if _, err := login(ctx, s, "code-3", "sess-7", "ERIN", 2, bounds); !errors.As(err, &le) || !le.PerNick || le.Limit != 2 {
			t.Fatalf("third session of a nick: %v, want the per-nick limit", err)
		}
		if n, err := s.RevokeWebSessionsOf(ctx, "erin"); err != nil || n != 2 {
			t.Fatalf("revoke of erin = %d, %v; want 2", n, err)
		}
		if ws, _ := s.WebSession(ctx, "sess-1"); ws != nil {
			t.Errorf("session after !logout: %+v", ws)
		}
		if _, err := login(ctx, s, "code-3", "sess-7", "ERIN", 2, bounds); err != nil {
			t.Fatalf("code refused by the bound, then used: %v", err)
		}
		// Total bound.
		code(t, ctx, s, "code-4", "frank", 2, time.Minute)
		if _, err := login(ctx, s, "code-4", "sess-8", "frank", 2, store.SessionBounds{PerNick: 2, Total: 1}); !errors.As(err, &le) || le.PerNick {
			t.Fatalf("session past the total: %v, want the total limit", err)
		}
		list, err := s.WebSessions(ctx)
		if err != nil || len(list) != 1 || list[0].Nick != "ERIN" {
			t.Fatalf("list = %+v, %v", list, err)
		}
		if ok, err := s.RevokeWebSession(ctx, list[0].ID); err != nil || !ok {
			t.Fatalf("revoke by id = %v, %v", ok, err)
		}
		if ok, _ := s.RevokeWebSession(ctx, list[0].ID); ok {
			t.Error("revoked twice")
		}
		if list, _ := s.WebSessions(ctx); len(list) != 0 {
			t.Errorf("sessions left: %+v", list)
		}
	})
}

// Strangers cannot lock those with a rank out: sessions signed in
// without a rank have their own bound below the total, and a ranked
// sign-in to a nick full of rankless sessions takes the oldest's place.
func TestWebSessionsRanklessBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		bounds := store.SessionBounds{PerNick: 2, Total: 5, Rankless: 3}
		var le *store.SessionLimitError
		for i := 0; i < 4; i++ {
			nick := fmt.Sprintf("stranger%d", i)
			code(t, ctx, s, "c-"+nick, nick, 0, time.Minute)
			_, err := login(ctx, s, "c-"+nick, "s-"+nick, nick, 0, bounds)
			if i < 3 && err != nil {
				t.Fatalf("rankless sign-in %d: %v", i, err)
			}
			if i == 3 && (!errors.As(err, &le) || !le.Rankless || le.Limit != 3) {
				t.Fatalf("fourth rankless sign-in: %v, want the rankless bound", err)
			}
		}
		// Those with a rank still have room: two places.
		for _, nick := range []string{"opal", "vera"} {
			code(t, ctx, s, "c-"+nick, nick, 2, time.Minute)
			if _, err := login(ctx, s, "c-"+nick, "s-"+nick, nick, 2, bounds); err != nil {
				t.Fatalf("ranked sign-in of %s with the rankless full: %v", nick, err)
			}
		}
		// A stranger who held an op's nick filled its two places; the op
		// signs in in place of the oldest.
		s.RevokeWebSessionsOf(ctx, "stranger0")
		s.RevokeWebSessionsOf(ctx, "stranger1")
		for i := 0; i < 2; i++ {
			id := fmt.Sprintf("squat-%d", i)
			code(t, ctx, s, "c-"+id, "olga", 0, time.Minute)
			if _, err := login(ctx, s, "c-"+id, id, "olga", 0, bounds); err != nil {
				t.Fatalf("squatter sign-in %d: %v", i, err)
			}
		}
		code(t, ctx, s, "c-olga-r", "olga", 0, time.Minute)
		if _, err := login(ctx, s, "c-olga-r", "olga-r", "olga", 0, bounds); !errors.As(err, &le) || !le.PerNick {
			t.Fatalf("third rankless session of olga: %v, want the per-nick bound", err)
		}
		code(t, ctx, s, "c-olga", "olga", 2, time.Minute)
		evicted, err := login(ctx, s, "c-olga", "olga-op", "olga", 2, bounds)
		if err != nil || evicted != "squat-0" {
			t.Fatalf("op sign-in to a nick full of rankless sessions: evicted %q, %v; want squat-0", evicted, err)
		}
		if ws, _ := s.WebSession(ctx, "squat-0"); ws != nil {
			t.Errorf("evicted session still there: %+v", ws)
		}
		n, _ := b.Client.ZCard(ctx, store.KeyWebRankless).Result()
		if n != 2 {
			t.Errorf("rankless index holds %d, want 2 (stranger2, squat-1)", n)
		}
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A standby names the leader's dashboard address, which each
// node records under archivebot:web:nodes.
func TestNodeURL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		if u, err := s.NodeURL(ctx, "node-a"); err != nil || u != "" {
			t.Fatalf("unknown node: %q, %v", u, err)
		}
		if err := s.SetNodeURL(ctx, "node-a", "https://a.example/"); err != nil {
			t.Fatal(err)
		}
		if u, err := s.NodeURL(ctx, "node-a"); err != nil || u != "https://a.example/" {
			t.Fatalf("node-a: %q, %v", u, err)
		}
		if err := s.SetNodeURL(ctx, "node-a", ""); err != nil {
			t.Fatal(err)
		}
		if u, _ := s.NodeURL(ctx, "node-a"); u != "" {
			t.Fatalf("forgotten node still says %q", u)
		}
	})
}

package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
	"github.com/archiveteam/archivebot-go/store/storetest"
)

// A sign-in code makes one session, once; a used, expired or
// never issued code makes none; the bounds refuse and leave the code
// usable; ending sessions removes them from every index.
func TestWebLoginCodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context) {
		if err := s.CreateLoginCode(ctx, "code-1", "Erin", "erin", "erin-acct", true, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		ws, err := s.LoginWithCode(ctx, "code-1", "token-1", "csrf-1", time.Hour, 2, 10)
		if err != nil || ws.Nick != "Erin" || ws.Account != "erin-acct" || !ws.AccountKnown || ws.CSRF != "csrf-1" {
			t.Fatalf("login = %+v, %v", ws, err)
		}
		got, err := s.WebSessionByToken(ctx, "token-1")
		if err != nil || got == nil || got.Nick != "Erin" || got.ID != store.HashSecret("token-1") {
			t.Fatalf("session by token = %+v, %v", got, err)
		}
		// Nothing stores the secrets themselves.
		for k := range b.Dump(t) {
			for _, secret := range []string{"code-1", "token-1"} {
				if contains(k, secret) {
					t.Errorf("key %q holds the secret %q", k, secret)
				}
			}
		}
		if _, err := s.LoginWithCode(ctx, "code-1", "token-2", "c", time.Hour, 2, 10); !errors.Is(err, store.ErrCodeUsed) {
			t.Errorf("reused code: %v, want ErrCodeUsed", err)
		}
		if _, err := s.LoginWithCode(ctx, "forged", "token-3", "c", time.Hour, 2, 10); !errors.Is(err, store.ErrCodeUnknown) {
			t.Errorf("forged code: %v, want ErrCodeUnknown", err)
		}
		s.CreateLoginCode(ctx, "code-x", "Erin", "erin", "", false, time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		if _, err := s.LoginWithCode(ctx, "code-x", "token-4", "c", time.Hour, 2, 10); !errors.Is(err, store.ErrCodeExpired) {
			t.Errorf("expired code: %v, want ErrCodeExpired", err)
		}
		for _, tok := range []string{"token-2", "token-3", "token-4"} {
			if ws, _ := s.WebSessionByToken(ctx, tok); ws != nil {
				t.Errorf("refused code made session %+v", ws)
			}
		}

		// Per-nick bound: a second session is allowed, a third refused,
		// and the refused code still works once a session ends.
		s.CreateLoginCode(ctx, "code-2", "erin", "erin", "", false, time.Minute)
		if _, err := s.LoginWithCode(ctx, "code-2", "token-5", "c", time.Hour, 2, 10); err != nil {
			t.Fatal(err)
		}
		s.CreateLoginCode(ctx, "code-3", "ERIN", "erin", "", false, time.Minute)
		var le *store.SessionLimitError
		if _, err := s.LoginWithCode(ctx, "code-3", "token-6", "c", time.Hour, 2, 10); !errors.As(err, &le) || !le.PerNick || le.Limit != 2 {
			t.Fatalf("third session of a nick: %v, want the per-nick limit", err)
		}
		if n, err := s.RevokeWebSessionsOf(ctx, "erin"); err != nil || n != 2 {
			t.Fatalf("revoke of erin = %d, %v; want 2", n, err)
		}
		if ws, _ := s.WebSessionByToken(ctx, "token-1"); ws != nil {
			t.Errorf("session after !logout: %+v", ws)
		}
		if _, err := s.LoginWithCode(ctx, "code-3", "token-6", "c", time.Hour, 2, 10); err != nil {
			t.Fatalf("code refused by the bound, then used: %v", err)
		}
		// Total bound.
		s.CreateLoginCode(ctx, "code-4", "frank", "frank", "", false, time.Minute)
		if _, err := s.LoginWithCode(ctx, "code-4", "token-7", "c", time.Hour, 2, 1); !errors.As(err, &le) || le.PerNick {
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

package bot

import (
	"context"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

type fakeDirectory map[string]Whois

func (d fakeDirectory) Whois(channel, nick string) Whois {
	w := d[strings.ToLower(nick)]
	w.NickKey = strings.ToLower(nick)
	if channel == "" {
		w.InChannel, w.Rank = false, RankNone
	}
	return w
}

// TestWhois: !whois says the rank in the asking channel, the account (or
// that it is unknown or none) and what the notes add; a bad nick is
// refused with the reason; without a directory it says it knows nothing.
func TestWhois(t *testing.T) {
	be := redistest.Mini(t)
	b := New(store.New(be.Client), Options{})
	if got := say(b, RankNone, "#a", "!whois alice"); len(got) != 1 || !strings.Contains(got[0], "no IRC connection") {
		t.Errorf("without a directory: %q", got)
	}
	b.SetDirectory(fakeDirectory{
		"alice": {InChannel: true, Rank: RankOp, Account: "aliceacct", AccountKnown: true},
		"bob":   {InChannel: true, Rank: RankVoice, AccountKnown: true},
		"carol": {},
	})
	// The note (the dashboard's sessions) is told only to voiced users
	// and operators in a channel: !whois is open to anyone, and whether a
	// nick is signed in, and until when, is not anyone's business.
	b.AddWhoisNote(func(_ context.Context, nick, key string) string {
		if key == "alice" {
			return "signed in on the web"
		}
		return ""
	})
	for _, c := range []struct {
		rank                Rank
		channel, text, want string
	}{
		{RankVoice, "#a", "!whois alice", "carol: alice: rank in #a: operator; account: aliceacct; signed in on the web."},
		{RankNone, "#a", "!whois alice", "carol: alice: rank in #a: operator; account: aliceacct."},
		{RankOp, "#a", "!whois ALICE", "carol: ALICE: rank in #a: operator; account: aliceacct; signed in on the web."},
		{RankNone, "#a", "!whois bob", "carol: bob: rank in #a: voice; account: none (not logged in)."},
		{RankNone, "#a", "!whois carol", "carol: carol: not in #a; account: unknown (the server has not told me)."},
		{RankNone, "", "!whois alice", "carol: alice: account: aliceacct."},
		{RankNone, "#a", "!whois #chan", "carol: Sorry, #chan is not a nickname."},
		{RankNone, "#a", "!whois a,b", "carol: Sorry, a,b is not a nickname."},
		{RankNone, "#a", "!whois", "carol: Usage: !whois NICK"},
	} {
		got := say(b, c.rank, c.channel, c.text)
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s in %q: %q, want %q", c.text, c.channel, got, c.want)
		}
	}
}

// TestRequireAccountRefuses: with RequireAccount, a command that changes
// jobs without Request.Account is refused and writes nothing; read-only
// commands and the console are not affected.
func TestRequireAccountRefuses(t *testing.T) {
	be := redistest.Mini(t)
	b := New(store.New(be.Client), Options{RequireAccount: true})
	got := say(b, RankOp, "#a", "!a https://example.com/")
	if len(got) != 1 || !strings.Contains(got[0], "needs a services account") {
		t.Fatalf("no account: %q", got)
	}
	if n := keyCount(t, be); n != 0 {
		t.Fatalf("a refused command wrote %d keys", n)
	}
	if got := say(b, RankNone, "#a", "!status"); len(got) != 1 || strings.Contains(got[0], "account") {
		t.Errorf("!status without an account: %q", got)
	}
	rec := &recorder{nick: "carol"}
	b.Handle(context.Background(), Request{Nick: "carol", Channel: "#a", Rank: RankOp, Account: "carolacct", Text: "!a https://example.com/"}, rec)
	if len(rec.replies) == 0 || !strings.Contains(rec.replies[0], "Queued") {
		t.Errorf("with an account: %q", rec.replies)
	}
	rec = &recorder{nick: "op"}
	b.Handle(context.Background(), Request{Nick: "op", Channel: ConsoleChannel, Rank: RankOp, Text: "!a https://example.org/"}, rec)
	if len(rec.replies) == 0 || !strings.Contains(rec.replies[0], "Queued") {
		t.Errorf("console: %q", rec.replies)
	}
}

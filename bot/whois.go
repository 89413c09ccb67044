package bot

import (
	"context"
	"strings"
	"sync"

	"github.com/archiveteam/archivebot-go/internal/text"
)

// Whois is what a front end knows of a nick, for !whois.
type Whois struct {
	// InChannel: the nick is in the channel the question was asked in
	// (always false in private); Rank is its rank there.
	InChannel bool
	Rank      Rank
	// Account is the services account the nick is logged into ("" for
	// none); AccountKnown is false when the server has not told it.
	Account      string
	AccountKnown bool
	// NickKey is the nick folded as the server folds it ("": lower case).
	NickKey string
}

// Directory is the front end's knowledge of nicks: the IRC client's
// membership part (channel ranks, services accounts).
type Directory interface {
	Whois(channel, nick string) Whois
}

// WhoisNote adds what another part of the node knows of nick (whose key,
// folded as the server folds it, is nickKey) to the answer of !whois (the
// web sign-in adds the nick's sessions here): a short sentence, or "" for
// nothing. Notes are told only to voiced users and operators: !whois is
// open to anyone, and whether a nick is signed in, and until when, is
// not anyone's business.
type WhoisNote func(ctx context.Context, nick, nickKey string) string

// whoisParts holds the directory and the notes !whois asks.
type whoisParts struct {
	mu    sync.Mutex
	dir   Directory
	notes []WhoisNote
}

// SetDirectory makes d the source of !whois's rank and account (the IRC
// front end calls it; without one !whois says it knows nothing).
func (b *Bot) SetDirectory(d Directory) {
	b.whois.mu.Lock()
	defer b.whois.mu.Unlock()
	b.whois.dir = d
}

// AddWhoisNote adds n to what !whois says; notes speak in the order they
// were added.
func (b *Bot) AddWhoisNote(n WhoisNote) {
	b.whois.mu.Lock()
	defer b.whois.mu.Unlock()
	b.whois.notes = append(b.whois.notes, n)
}

// validNick: what an IRC nick may be (RFC 2812 and what servers accept),
// loosely: no space, no prefix or channel character first, no control
// characters, at most 64 bytes.
func validNick(s string) bool {
	if s == "" || len(s) > 64 || strings.ContainsAny(s[:1], "#&+!@%:$0123456789-") {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == ',' || r == '*' || r == '?' || r == '!' || r == '@' {
			return false
		}
	}
	return true
}

func runWhois(ctx context.Context, b *Bot, c *Call) error {
	nick := c.Args[0]
	if !validNick(nick) {
		c.Refuse("Sorry, %s is not a nickname.", text.Cut(text.Clean(nick, text.Untrusted), 64))
		return nil
	}
	b.whois.mu.Lock()
	dir, notes := b.whois.dir, append([]WhoisNote(nil), b.whois.notes...)
	b.whois.mu.Unlock()
	var parts []string
	key := strings.ToLower(nick)
	if dir == nil {
		parts = append(parts, "I have no IRC connection here, so I know neither rank nor account")
	} else {
		w := dir.Whois(c.Req.Channel, nick)
		if w.NickKey != "" {
			key = w.NickKey
		}
		switch {
		case c.Req.Private():
		case !w.InChannel:
			parts = append(parts, "not in "+c.Req.Channel)
		default:
			parts = append(parts, "rank in "+c.Req.Channel+": "+rankName(w.Rank))
		}
		switch {
		case !w.AccountKnown:
			parts = append(parts, "account: unknown (the server has not told me)")
		case w.Account == "":
			parts = append(parts, "account: none (not logged in)")
		default:
			parts = append(parts, "account: "+w.Account)
		}
	}
	if c.Req.Private() || c.Req.Rank < RankVoice {
		notes = nil
	}
	for _, n := range notes {
		if s := n(ctx, nick, key); s != "" {
			parts = append(parts, s)
		}
	}
	c.Reply("%s: %s.", nick, strings.Join(parts, "; "))
	return nil
}

func rankName(r Rank) string {
	switch r {
	case RankOp:
		return "operator"
	case RankVoice:
		return "voice"
	}
	return "none"
}

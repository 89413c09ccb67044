package bot

import (
	"context"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
)

// Input the bot must refuse, or answer saying exactly what it did. The
// TestInputGap* tests are the "input gaps" a review found: each of those
// inputs was accepted or left unanswered before, and each test names the
// gap it covers. The others are replies a newcomer tripped over in their
// first hour.

// Python's re refuses a group name used twice; the pipeline would fail to
// compile the pattern, so the bot refuses it and writes nothing.
func TestInputGapDuplicateGroupName(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		before := keyCount(t, be)
		ctx := context.Background()
		age, _ := be.Client.HGet(ctx, refIdent, "settings_age").Result()
		for _, p := range []string{`(?P<a>x)(?P<a>y)`, `(?P<dup>x)|((?P<dup>y))`} {
			got := say(b, RankOp, "#a", "!ig "+refIdent+" "+p)
			if len(got) != 1 || !strings.Contains(got[0], "invalid pattern") || !strings.Contains(got[0], "redefinition of group name") {
				t.Errorf("!ig %s: replies %q, want an invalid-pattern refusal naming the redefinition", p, got)
			}
		}
		if n := keyCount(t, be); n != before {
			t.Fatalf("refused patterns changed the key count %d -> %d", before, n)
		}
		if now, _ := be.Client.HGet(ctx, refIdent, "settings_age").Result(); now != age {
			t.Fatalf("refused patterns bumped settings_age %s -> %s", age, now)
		}
		// Distinct names, and a backreference to a name, stay valid.
		for _, p := range []string{`(?P<a>x)(?P<b>y)`, `(?P<a>x)(?P=a)`} {
			if err := ValidatePattern(p); err != nil {
				t.Errorf("%q refused: %v", p, err)
			}
		}
	})
}

// Hosts a reader cannot see correctly, or that no DNS name can have, are
// refused with a clear reply and nothing written. Other non-strict IDNs
// (as Addressable accepts them) still queue.
func TestInputGapHostRefused(t *testing.T) {
	refused := []struct{ url, want string }{
		{"http://exa\u200bmple.com/", "invisible"},           // zero-width space
		{"http://exa\u200dmple.com/", "invisible"},           // zero-width joiner
		{"http://exa\u200cmple.com/", "invisible"},           // zero-width non-joiner
		{"http://\u202eexample.com/", "invisible"},           // right-to-left override
		{"http://\ufeffexample.com/", "invisible"},           // byte order mark
		{"http://exam\u00adple.com/", "invisible"},           // soft hyphen
		{"http://exa%E2%80%8Bmple.com/", "invisible"},        // zero-width space, percent-encoded
		{"http://xn--example-2z6c.com/", "invisible"},        // the same, as punycode
		{"http://a..b.com/", "empty label"},                  // empty label
		{"http://.example.com/", "empty label"},              // leading empty label
		{"http://xn--.com/", "xn--"},                         // bare ACE prefix
		{"http://XN--.example.com/", "xn--"},                 // bare ACE prefix, upper case
		{"http://example.com:99999/", "port"},                // port over 65535
		{"http://example.com:65536/", "port"},                // port over 65535
		{"http://ex%0D%0Aample.com/", "control character"},   // CR LF, percent-encoded
		{"http://ex%00ample.com/", "control character"},      // NUL, percent-encoded
		{"http://ex%7Fample.com/", "control character"},      // DEL, percent-encoded
		{"https://ex%09ample.com/path", "control character"}, // TAB, percent-encoded
	}
	accepted := []string{
		"http://пример.рф/", "http://bücher.de/", "http://a-b_c.example.com/",
		"http://example.com:65535/", "http://example.com./", "http://xn--bcher-kva.de/x",
		"http://[::1]:8080/", "http://10.0.0.1/", "http://EXAMPLE.net:0080/",
		"http://ex%41mple.com/",
	}
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		for _, c := range refused {
			got := say(b, RankOp, "#a", "!a "+c.url)
			if len(got) != 1 || !strings.Contains(got[0], "Sorry") || !strings.Contains(got[0], c.want) {
				t.Errorf("!a %q: replies %q, want one refusal containing %q", c.url, got, c.want)
			}
			if n := keyCount(t, be); n != 0 {
				t.Fatalf("!a %q wrote %d keys", c.url, n)
			}
		}
		for _, u := range accepted {
			got := say(b, RankOp, "#a", "!a "+u)
			if len(got) == 0 || !strings.Contains(got[0], "Queued") {
				t.Errorf("!a %q: replies %q, want it queued", u, got)
			}
		}
	})
}

// A TAB (or other white space) between the command and its argument
// separates them as a space does.
func TestInputGapTabSeparator(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		for _, text := range []string{"!status\t" + refIdent, "!status \t" + refIdent, "!status\v" + refIdent} {
			got := say(b, RankNone, "#a", text)
			if len(got) != 1 || !strings.Contains(got[0], refIdent) || !strings.Contains(got[0], "In queue") {
				t.Errorf("%q: replies %q, want the job's status", text, got)
			}
		}
		if got := say(b, RankOp, "#a", "!ig\t"+refIdent+"\tfoo"); len(got) != 1 || !strings.Contains(got[0], "Added ignore pattern foo") {
			t.Errorf("!ig with tabs: %q", got)
		}
		if got := say(b, RankOp, "#a", "!a\thttp://example.net/\v--delay=5"); len(got) < 3 || !strings.Contains(got[0], "Queued http://example.net/") || !strings.Contains(got[2], "set to [5, 5] ms") {
			t.Errorf("!a with a vertical tab before an option: %q", got)
		}
		if got := say(b, RankOp, "#a", "!a\t<\thttp://example.org/list.txt"); len(got) == 0 || !strings.Contains(got[0], "Queued URLs in http://example.org/list.txt") {
			t.Errorf("!a<TAB><<TAB>URL: %q", got)
		}
	})
}

// Upstream checked that the job exists before looking at the set names:
// an unknown job is the first complaint, whatever the names.
func TestInputGapIgsetUnknownJobFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		for _, text := range []string{"!igset nosuchjob nosuch", "!igset nosuchjob blogs,nosuch", "!igset nosuchjob blogs"} {
			got := say(b, RankOp, "#a", text)
			if len(got) != 1 || !strings.Contains(got[0], "don't know anything about nosuchjob") {
				t.Errorf("%q: replies %q, want only the unknown-job reply", text, got)
			}
		}
		if n := keyCount(t, be); n != 0 {
			t.Fatalf("wrote %d keys", n)
		}
		say(b, RankOp, "#a", "!a http://example.com/")
		if got := say(b, RankOp, "#a", "!igset "+refIdent+" nosuch"); len(got) != 1 || !strings.Contains(got[0], "The following sets are unknown: nosuch") {
			t.Errorf("unknown set on a known job: %q", got)
		}
	})
}

// Nested quantifiers can backtrack for ever in the pipeline's Python re:
// the pattern is added (it is valid), but the reply warns.
func TestInputGapNestedQuantifierWarning(t *testing.T) {
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		for _, p := range []string{`(x+x+)+y`, `(a*)*b`, `(?:\d+)*$`, `((ab)+c?)+`, `(a|b+)+`, `(x+){2,}`} {
			got := say(b, RankOp, "#a", "!ig "+refIdent+" "+p)
			if len(got) != 2 || !strings.Contains(got[0], "Added ignore pattern") || !strings.Contains(got[1], "Warning") || !strings.Contains(got[1], "nested") {
				t.Errorf("!ig %s: replies %q, want the pattern added and a warning", p, got)
			}
		}
		members, _ := be.Client.SMembers(context.Background(), refIdent+"_ignores").Result()
		if !strings.Contains(strings.Join(members, " "), "(x+x+)+y") {
			t.Fatalf("warned pattern not added: %v", members)
		}
		for _, p := range []string{`\d+`, `(ab)+`, `[a+]+`, `(\+x)+`, `(x{2})+`, `(a+)?`, `^https?://[^/]+/(?!wp-content)`, `(x+)`} {
			got := say(b, RankOp, "#a", "!ig "+refIdent+" "+p)
			if len(got) != 1 || !strings.Contains(got[0], "Added ignore pattern") {
				t.Errorf("!ig %s: replies %q, want it added without a warning", p, got)
			}
		}
	})
}

// --large with --pipeline is refused, and the reply says the job was not
// queued.
func TestLargeWithPipelineSaysNotQueued(t *testing.T) {
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		b := newTestBot(t, be)
		got := say(b, RankOp, "#a", "!a http://example.com/ --large --pipeline=x")
		if len(got) != 1 || !strings.Contains(got[0], "not queued") {
			t.Fatalf("reply %q does not say whether the job was queued", got)
		}
		if n := keyCount(t, be); n != 0 {
			t.Fatalf("wrote %d keys", n)
		}
	})
}

// An invalid pattern's error quotes what the user typed, not the pattern
// rewritten for regexp2.
func TestInvalidPatternQuotesUsersPattern(t *testing.T) {
	const p = `(?P<n>a)(?P=n)[z-a]`
	err := ValidatePattern(p)
	if err == nil {
		t.Fatal("accepted")
	}
	if !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), `\k<n>`) {
		t.Fatalf("error %q does not quote %q", err, p)
	}
	eachWithJob(t, "", func(t *testing.T, be *redistest.Backend, b *Bot) {
		got := say(b, RankOp, "#a", "!ig "+refIdent+" "+p)
		if len(got) != 1 || strings.Contains(got[0], `\k<n>`) || strings.Count(got[0], p) != 2 {
			t.Fatalf("reply %q", got)
		}
	})
}

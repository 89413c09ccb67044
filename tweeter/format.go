package tweeter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"

	"github.com/archiveteam/archivebot-go/store"
)

// Format is how one network counts a post and shows a URL.
type Format struct {
	// Max is the longest post, as Length counts.
	Max int
	// Length counts a text the network's way.
	Length func(string) int
	// Display is how a (cleaned) URL is shown in the text; nil shows it
	// whole.
	Display func(string) string
	// Links asks for link facets (byte offsets of each URL shown, with the
	// full URL): Bluesky links only what the client marks.
	Links bool
	// archiving words "Archiving URL" when set (X: ArchivingText).
	archiving func(string) string
}

// Link is a span of a post's text (UTF-8 byte offsets, End exclusive)
// that links to URI.
type Link = store.FeedLink

// The formats of the networks.
var (
	// XFormat: 280 weighted characters, URLs Twitter links at 23.
	XFormat = Format{Max: MaxLength, Length: Length, archiving: ArchivingText}
	// MastodonFormat: 500 characters (code points), every http(s) URL at
	// 23.
	MastodonFormat = Format{Max: 500, Length: MastodonLength}
	// BlueskyFormat: 300 graphemes; URLs show shortened and link through
	// facets.
	BlueskyFormat = Format{Max: 300, Length: uniseg.GraphemeClusterCount, Display: shortURL, Links: true}
	// plainFormat is the dry run's: X's rules.
	plainFormat = XFormat
)

// MastodonLength counts text as Mastodon does: characters, with every
// http(s) URL counting 23 whatever its length.
func MastodonLength(text string) int {
	n := 0
	for _, word := range strings.SplitAfter(text, " ") {
		w := strings.TrimSuffix(word, " ")
		lw := strings.ToLower(w)
		if strings.HasPrefix(lw, "http://") || strings.HasPrefix(lw, "https://") {
			n += LinkLength + len(word) - len(w)
			continue
		}
		n += utf8.RuneCountInString(word)
	}
	return n
}

// shortURL is the URL as Bluesky clients show a link: without the scheme,
// cut at 40 graphemes.
func shortURL(u string) string {
	s := u
	for _, p := range []string{"https://", "http://"} {
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			s = s[len(p):]
			break
		}
	}
	if uniseg.GraphemeClusterCount(s) <= 40 {
		return s
	}
	var b strings.Builder
	g := uniseg.NewGraphemes(s)
	for i := 0; i < 39 && g.Next(); i++ {
		b.WriteString(g.Str())
	}
	return b.String() + ellipsis
}

// CleanURL makes an untrusted job URL safe to post: whitespace, control
// and format characters (bidi overrides, zero-width joiners) are
// percent-encoded, so the URL stays one word and cannot start a line or a
// new word; and unless the networks certainly link the whole URL (then a
// mention or hashtag inside it is part of the link), "@" and "#" (and
// their full-width forms) are percent-encoded too, so that nothing in it
// mentions an account or tags a post.
func CleanURL(u string) string {
	u = strings.TrimSpace(u)
	var b strings.Builder
	for _, r := range u {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	if linked(s) {
		return s
	}
	return strings.NewReplacer("@", "%40", "#", "%23", "＠", "%EF%BC%A0", "＃", "%EF%BC%83").Replace(s)
}

// cleanText makes a queued text that is not "Archiving URL" (another
// program queued it) safe in the same way, word by word.
func cleanText(text string) string {
	words := strings.Fields(text)
	for i, w := range words {
		words[i] = CleanURL(w)
	}
	return strings.Join(words, " ")
}

// itemURL is the job URL behind a queued item: recorded beside the text,
// else read back from "Archiving URL". ok is false for other texts.
func itemURL(it store.FeedItem) (string, bool) {
	if it.URL != "" {
		return it.URL, true
	}
	if rest, ok := strings.CutPrefix(it.Text, prefix); ok && rest != "" && !strings.ContainsAny(rest, " \t\n") {
		return strings.TrimSuffix(rest, ellipsis), true
	}
	return "", false
}

// single words one item for the network: "Archiving URL", cut to fit.
func (f Format) single(it store.FeedItem) (string, []Link) {
	u, ok := itemURL(it)
	if !ok {
		return f.fit(cleanText(it.Text), ""), nil
	}
	clean := CleanURL(u)
	disp := clean
	if f.Display != nil {
		disp = f.Display(clean)
	}
	var text string
	if f.archiving != nil {
		text = f.archiving(disp)
	} else {
		text = f.fit(prefix+disp, prefix)
	}
	if !f.Links {
		return text, nil
	}
	return text, f.links(text, []string{disp}, []string{clean})
}

// fit cuts text (keeping head) to f.Max, marking the cut with an ellipsis.
func (f Format) fit(text, head string) string {
	if f.Length(text) <= f.Max {
		return text
	}
	rs := []rune(text)
	cut := func(n int) string {
		t := string(rs[:n])
		// Do not leave half a percent escape behind.
		if i := strings.LastIndexByte(t, '%'); i >= 0 && i >= len(t)-2 {
			t = t[:i]
		}
		return t + ellipsis
	}
	// The longest cut that fits (lengths grow with n).
	lo, hi := utf8.RuneCountInString(head), len(rs)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if f.Length(cut(mid)) <= f.Max {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return cut(lo)
}

// digest words a digest of the first items that fit: "N more sites queued
// for archiving: URL URL …". It returns how many items it carries (0 when
// the first item cannot go in a digest: another program's text).
func (f Format) digest(items []store.FeedItem) (string, []Link, int) {
	var disps, cleans []string
	build := func(n int) string {
		return fmt.Sprintf("%d more %s queued for archiving: %s", n, plural(n, "site", "sites"), strings.Join(disps[:n], " "))
	}
	text := ""
	for _, it := range items {
		u, ok := itemURL(it)
		if !ok {
			break
		}
		clean := CleanURL(u)
		disp := clean
		if f.Display != nil {
			disp = f.Display(clean)
		}
		disps, cleans = append(disps, disp), append(cleans, clean)
		t := build(len(disps))
		if f.Length(t) > f.Max {
			disps, cleans = disps[:len(disps)-1], cleans[:len(cleans)-1]
			break
		}
		text = t
	}
	if len(disps) == 0 {
		return "", nil, 0
	}
	if !f.Links {
		return text, nil, len(disps)
	}
	return text, f.links(text, disps, cleans), len(disps)
}

// links finds each shown URL in text in order and links it to its URL
// (http(s) only: a facet must hold a valid URI).
func (f Format) links(text string, disps, uris []string) []Link {
	var out []Link
	from := 0
	for i, d := range disps {
		j := strings.Index(text[from:], d)
		if j < 0 {
			continue
		}
		start := from + j
		from = start + len(d)
		lu := strings.ToLower(uris[i])
		if strings.HasPrefix(lu, "http://") || strings.HasPrefix(lu, "https://") {
			out = append(out, Link{Start: start, End: from, URI: uris[i]})
		}
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

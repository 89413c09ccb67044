package tweeter

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// Twitter's counting rules (twitter-text v3 configuration): a post may
// weigh 280; a code point weighs 1 in the ranges below and 2 elsewhere
// (CJK, emoji); a URL Twitter recognizes is replaced by a t.co link and
// weighs 23 whatever its length.
const (
	// MaxLength is the largest weighted length of a post.
	MaxLength = 280
	// LinkLength is the weight of any URL Twitter links.
	LinkLength = 23
	// maxLinkedURL is the longest URL twitter-text still recognizes.
	maxLinkedURL = 4096
	prefix       = "Archiving "
	ellipsis     = "…"
)

// ArchivingText is the text posted for a job on url: "Archiving URL",
// shortened to fit MaxLength. The URL is kept whole whenever the post fits,
// counting a URL Twitter will link as LinkLength; otherwise its end is cut
// and marked with an ellipsis, keeping scheme and host.
func ArchivingText(u string) string {
	u = strings.TrimSpace(u)
	text := prefix + u
	if Length(text) <= MaxLength {
		return text
	}
	budget := MaxLength - Length(prefix) - Length(ellipsis)
	cut, used := 0, 0
	for i, r := range u {
		w := runeWeight(r)
		if used+w > budget {
			break
		}
		used += w
		cut = i + utf8.RuneLen(r)
	}
	head := u[:cut]
	// Do not leave half a percent escape behind.
	if i := strings.LastIndexByte(head, '%'); i >= 0 && i >= len(head)-2 {
		head = head[:i]
	}
	return prefix + head + ellipsis
}

// Length is the weighted length of text as Twitter counts it. A URL counts
// as LinkLength only when this package is confident Twitter links it (see
// linked); any other text counts character by character, so the estimate
// errs on the long side.
func Length(text string) int {
	n := 0
	for _, word := range strings.SplitAfter(text, " ") {
		w := strings.TrimSuffix(word, " ")
		if linked(w) {
			n += LinkLength + len(trailingPunct(w))
			if len(w) < len(word) {
				n++
			}
			continue
		}
		for _, r := range word {
			n += runeWeight(r)
		}
	}
	return n
}

// runeWeight is twitter-text's weight of one code point.
func runeWeight(r rune) int {
	switch {
	case r <= 4351, r >= 8192 && r <= 8205, r >= 8208 && r <= 8223, r >= 8242 && r <= 8247:
		return 1
	}
	return 2
}

// linked reports whether Twitter will certainly turn word into a t.co
// link: an http(s) URL of plain characters, not too long, whose host is a
// domain name with an alphabetic (or punycode) top-level domain. Other URLs
// (ftp, IP addresses, unusual TLDs) may stay plain text and count in full.
func linked(word string) bool {
	if len(word) > maxLinkedURL {
		return false
	}
	lower := strings.ToLower(word)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return false
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}", c) >= 0 {
			return false
		}
	}
	p, err := url.Parse(word)
	if err != nil || p.User != nil {
		return false
	}
	host := p.Hostname()
	if len(host) > 253 {
		return false
	}
	labels := strings.Split(host, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return false
		}
	}
	tld := labels[len(labels)-1]
	if strings.HasPrefix(tld, "xn--") {
		return len(tld) > 4
	}
	if len(tld) < 2 {
		return false
	}
	for _, c := range tld {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// trailingPunct is the punctuation at the end of a URL that twitter-text
// leaves out of the link; it counts as plain text.
func trailingPunct(w string) string {
	return w[len(strings.TrimRight(w, `.,;:!?'")`)):]
}

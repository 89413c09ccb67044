// Package ident computes ArchiveBot job identities.
//
// A job is identified by the URL it archives. Before hashing, the URL is
// normalized exactly the way the Ruby implementation does it, with
// Addressable::URI.parse(url).normalize.to_s from the addressable gem, so that
// the Go coordinator and the Ruby components agree on every ident:
//
//	IDENT = base36(UUIDv5(82244de1-c354-4c89-bf2b-f153ce23af43, normalized_url))
//
// where the 128 bits of the UUID are read as one unsigned big-endian integer
// and written in lowercase base 36 without padding.
//
// The normalization (see Parse) reproduces Addressable's rules component by
// component, quirks included, rather than RFC 3986 normalization; the table in
// testdata/idents.tsv, produced by the Ruby implementation, is the reference.
package ident

import (
	"errors"
	"math/big"
	"strings"

	"github.com/google/uuid"
)

// namespace is the UUID namespace ArchiveBot hashes normalized URLs in.
var namespace = uuid.MustParse("82244de1-c354-4c89-bf2b-f153ce23af43")

// ErrNotAbsolute is returned (wrapped) for input that has no scheme, such as
// "example.com/foo": Addressable reads that as a relative reference, which
// cannot be a job URL.
var ErrNotAbsolute = errors.New("not an absolute URL")

// ErrInvalid is returned (wrapped, with the reason) for input that
// Addressable refuses to parse or normalize, such as a bad port
// ("http://h:x/"), a bad character in the host ("http://a b/"), a bad
// scheme ("1http://h/"), an ip-based URL with neither host nor path
// ("http:"), or input that is not valid UTF-8 or holds a line feed.
var ErrInvalid = errors.New("invalid URL")

// URL is a parsed, normalized job URL. Its fields hold the normalized
// components; String reassembles them into the normalized URL.
//
// A URL whose scheme is not http, https or ftp, or whose Host is empty, is
// not archivable; Parse still returns it (as Addressable does) and leaves the
// refusal to the caller. For example "http:///path" gives HasAuthority true
// and Host "", and "mailto:someone@example.com" gives HasAuthority false and
// Path "someone@example.com".
type URL struct {
	// Scheme is the lowercase scheme, without the colon.
	Scheme string
	// HasAuthority reports whether the URL has an authority ("//" after the
	// scheme), possibly an empty one.
	HasAuthority bool
	// HasUserinfo reports whether the authority has a userinfo part (it may
	// be empty, as in "ftp://@host/").
	HasUserinfo bool
	// Userinfo is "user" or "user:password", percent-encoded.
	Userinfo string
	// Host is the normalized host: lowercase, IDNA labels in punycode,
	// percent-encoded where needed, IPv6 literals in brackets. It is empty
	// when the URL has no authority or an empty one.
	Host string
	// Port is the port in decimal without leading zeros, or "" when absent,
	// zero, or the scheme's default port.
	Port string
	// Path is the normalized path. It is "/" rather than empty for http,
	// https, ftp and tftp.
	Path string
	// HasQuery reports whether the URL has a query. Normalization drops an
	// empty query, so HasQuery is RawQuery != "".
	HasQuery bool
	// RawQuery is the normalized query, without the "?".
	RawQuery string
	// HasFragment reports whether the URL has a fragment. Normalization drops
	// an empty fragment, so HasFragment is Fragment != "".
	HasFragment bool
	// Fragment is the normalized, percent-encoded fragment, without the "#".
	Fragment string
}

// Parse parses raw (with surrounding white space trimmed) and normalizes it
// the way Addressable::URI.parse(raw).normalize does.
//
// It returns an error wrapping ErrNotAbsolute when raw has no scheme, and
// one wrapping ErrInvalid when Addressable would raise an error. A URL with a
// scheme but no usable host (such as "http:///path" or "mailto:x@y") is not
// an error here: the returned URL has an empty Host and the caller refuses it.
func Parse(raw string) (*URL, error) {
	return parse(strings.TrimSpace(raw))
}

// String returns the normalized URL: what Addressable's normalize.to_s gives.
func (u *URL) String() string {
	var b strings.Builder
	b.Grow(len(u.Scheme) + len(u.Userinfo) + len(u.Host) + len(u.Port) +
		len(u.Path) + len(u.RawQuery) + len(u.Fragment) + 8)
	b.WriteString(u.Scheme)
	b.WriteByte(':')
	if u.HasAuthority {
		b.WriteString("//")
		if u.HasUserinfo {
			b.WriteString(u.Userinfo)
			b.WriteByte('@')
		}
		b.WriteString(u.Host)
		if u.Port != "" {
			b.WriteByte(':')
			b.WriteString(u.Port)
		}
	}
	b.WriteString(u.Path)
	if u.HasQuery {
		b.WriteByte('?')
		b.WriteString(u.RawQuery)
	}
	if u.HasFragment {
		b.WriteByte('#')
		b.WriteString(u.Fragment)
	}
	return b.String()
}

// Normalize returns the normalized form of raw; see Parse.
func Normalize(raw string) (string, error) {
	u, err := Parse(raw)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// Of returns the ident of an already-normalized URL: the UUIDv5 of
// normalized in ArchiveBot's namespace, as a base-36 number. It is at most
// 25 characters long (almost always 23 to 25).
func Of(normalized string) string {
	id := uuid.NewSHA1(namespace, []byte(normalized))
	return new(big.Int).SetBytes(id[:]).Text(36)
}

// FromURL normalizes raw and returns the normalized URL with its ident.
func FromURL(raw string) (normalized, ident string, err error) {
	normalized, err = Normalize(raw)
	if err != nil {
		return "", "", err
	}
	return normalized, Of(normalized), nil
}

package ident

// This file reproduces Addressable::URI.parse(s).normalize.to_s (addressable
// gem, current 2.8 line) step by step. The Ruby object model is mirrored by
// rawURI: parse fills one from the input string, normalize computes the
// normalized components and then builds a second rawURI from them the way
// Addressable::URI.new(scheme:, authority:, path:, query:, fragment:) does,
// which re-splits the normalized authority and validates the result again.
// Several of Addressable's quirks come from that round trip.
//
// Known deviations, all for input no IRC user types:
//   - input holding a line feed, or invalid UTF-8, is refused (Ruby's regexps
//     either raise or silently truncate at the line end);
//   - Unicode normalization and case mapping use Go's tables (Unicode 15+),
//     Ruby's may be older for characters added since.

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// rawURI mirrors the instance variables of an Addressable::URI. A nil
// pointer is Ruby's nil.
type rawURI struct {
	scheme   *string
	user     *string
	password *string
	host     *string
	port     string // decimal integer; "" is nil
	path     string
	query    *string
	fragment *string
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// defaultPorts is Addressable::URI::PORT_MAPPING; its keys are the
// "ip-based" schemes.
var defaultPorts = map[string]string{
	"http":     "80",
	"https":    "443",
	"ftp":      "21",
	"tftp":     "69",
	"sftp":     "22",
	"ssh":      "22",
	"svn+ssh":  "22",
	"telnet":   "23",
	"nntp":     "119",
	"gopher":   "70",
	"wais":     "210",
	"ldap":     "389",
	"prospero": "1525",
}

func parse(s string) (*URL, error) {
	if !utf8.ValidString(s) {
		return nil, invalid("not valid UTF-8")
	}
	if strings.IndexByte(s, '\n') >= 0 {
		return nil, invalid("line feed in URL")
	}
	r, err := parseRaw(s)
	if err != nil {
		return nil, err
	}
	return r.normalize()
}

// splitURI applies Addressable::URI::URIREGEX,
// ^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?$
// to a string without line feeds.
func splitURI(s string) (scheme, authority *string, path string, query, fragment *string) {
	rest := s
	if i := strings.IndexAny(rest, ":/?#"); i > 0 && rest[i] == ':' {
		sc := rest[:i]
		scheme = &sc
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "//") {
		var a string
		a, rest = cutBeforeAny(rest[2:], "/?#")
		authority = &a
	}
	path, rest = cutBeforeAny(rest, "?#")
	if strings.HasPrefix(rest, "?") {
		var q string
		q, rest = cutBeforeAny(rest[1:], "#")
		query = &q
	}
	if strings.HasPrefix(rest, "#") {
		f := rest[1:]
		fragment = &f
	}
	return scheme, authority, path, query, fragment
}

// cutBeforeAny splits s before its first byte that is one of chars; with
// none, head is all of s.
func cutBeforeAny(s, chars string) (head, tail string) {
	i := strings.IndexAny(s, chars)
	if i < 0 {
		i = len(s)
	}
	return s[:i], s[i:]
}

// splitAuthority splits an authority the way Addressable::URI.parse and
// Addressable::URI#authority= do:
//
//	userinfo = authority[/^([^\[\]]*)@/, 1]
//	user     = userinfo.strip[/^([^:]*):?/, 1]
//	password = userinfo.strip[/:(.*)$/, 1]
//	host     = authority.sub(/^([^\[\]]*)@/, "").sub(/:([^:@\[\]]*?)$/, "")
//	port     = authority[/:([^:@\[\]]*?)$/, 1]
func splitAuthority(a string) (user, password *string, host string, port *string) {
	hostPart := a
	bracket := strings.IndexAny(a, "[]")
	if bracket < 0 {
		bracket = len(a)
	}
	if at := strings.LastIndexByte(a[:bracket], '@'); at >= 0 {
		ui := rubyStrip(a[:at])
		if c := strings.IndexByte(ui, ':'); c >= 0 {
			u, p := ui[:c], ui[c+1:]
			user, password = &u, &p
		} else {
			user = &ui
		}
		hostPart = a[at+1:]
	}
	host = hostPart
	if j := strings.LastIndexByte(hostPart, ':'); j >= 0 && !strings.ContainsAny(hostPart[j+1:], "@[]") {
		host = hostPart[:j]
	}
	if j := strings.LastIndexByte(a, ':'); j >= 0 && !strings.ContainsAny(a[j+1:], "@[]") {
		p := a[j+1:]
		port = &p
	}
	return user, password, host, port
}

// validScheme is /\A[a-z][a-z0-9\.\+\-]*\z/i.
func validScheme(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !isDigit(c) && c != '.' && c != '+' && c != '-' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// setPort is Addressable::URI#port=: it percent-decodes the port, requires a
// line of it to be all digits (Ruby's /^\d+$/ is per line) and keeps
// String#to_i of the whole, with 0 meaning no port.
func setPort(p string) (string, error) {
	d := unencode(p, false)
	if !utf8.ValidString(d) {
		return "", invalid("invalid encoding in port %q", p)
	}
	ok := false
	for _, line := range strings.Split(d, "\n") {
		if line != "" && strings.Trim(line, "0123456789") == "" {
			ok = true
			break
		}
	}
	if !ok {
		return "", invalid("invalid port number %q", p)
	}
	return rubyToI(d), nil
}

// rubyToI is Ruby's String#to_i (base 10), as a decimal string without
// leading zeros; "" stands for 0.
func rubyToI(s string) string {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+1 < len(s) && s[i] == '0' && (s[i+1] == 'd' || s[i+1] == 'D') {
		i += 2
	}
	var digits []byte
	for i < len(s) {
		c := s[i]
		if isDigit(c) {
			if c != '0' || len(digits) > 0 {
				digits = append(digits, c)
			}
			i++
			continue
		}
		// An underscore may separate two digits.
		if c == '_' && i > 0 && isDigit(s[i-1]) && i+1 < len(s) && isDigit(s[i+1]) {
			i++
			continue
		}
		break
	}
	if len(digits) == 0 {
		return ""
	}
	if neg {
		return "-" + string(digits)
	}
	return string(digits)
}

// parseRaw is Addressable::URI.parse: split, then assign the components
// (raising on a bad scheme or port) and validate.
func parseRaw(s string) (*rawURI, error) {
	scheme, authority, path, query, fragment := splitURI(s)
	r := &rawURI{path: path, query: query, fragment: fragment}
	if scheme != nil {
		if !validScheme(*scheme) {
			return nil, invalid("invalid scheme format %q", *scheme)
		}
		r.scheme = scheme
	}
	if authority != nil {
		user, password, host, port := splitAuthority(*authority)
		r.user, r.password, r.host = user, password, &host
		if port != nil && *port != "" {
			p, err := setPort(*port)
			if err != nil {
				return nil, err
			}
			r.port = p
		}
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	if r.scheme == nil {
		return nil, fmt.Errorf("%w: %q has no scheme", ErrNotAbsolute, s)
	}
	return r, nil
}

// validate is Addressable::URI#validate.
func (r *rawURI) validate() error {
	if r.scheme != nil {
		if _, ipBased := defaultPorts[strings.ToLower(*r.scheme)]; ipBased &&
			(r.host == nil || *r.host == "") && r.path == "" {
			return invalid("absolute URI missing hierarchical segment")
		}
	}
	if r.host == nil && (r.port != "" || r.user != nil || r.password != nil) {
		return invalid("hostname not supplied")
	}
	if r.path != "" && r.path[0] != '/' && r.host != nil {
		return invalid("relative path with an authority")
	}
	if strings.HasPrefix(r.path, "//") && r.host == nil {
		return invalid("path with two leading slashes without an authority")
	}
	if r.host != nil && badHost(*r.host) {
		return invalid("invalid character in host %q", *r.host)
	}
	return nil
}

// badHost is the host test of Addressable::URI#validate:
// host =~ /[<>{}\/\\\?\#\@"[[:space:]]]/, or host is "[...]" and the inside
// is not made of unreserved, sub-delims and ":".
func badHost(h string) bool {
	for _, r := range h {
		if strings.ContainsRune(`<>{}/\?#@"`, r) || unicode.Is(unicode.White_Space, r) {
			return true
		}
	}
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		for i := 1; i < len(h)-1; i++ {
			if c := h[i]; !unreservedSet[c] && !subDelimSet[c] && c != ':' {
				return true
			}
		}
	}
	return false
}

// authority is Addressable::URI#authority: nil without a host.
func (r *rawURI) authority() *string {
	if r.host == nil {
		return nil
	}
	var b strings.Builder
	if r.user != nil {
		b.WriteString(*r.user)
		if r.password != nil {
			b.WriteByte(':')
			b.WriteString(*r.password)
		}
		b.WriteByte('@')
	}
	b.WriteString(*r.host)
	if r.port != "" {
		b.WriteByte(':')
		b.WriteString(r.port)
	}
	a := b.String()
	return &a
}

// toString is Addressable::URI#to_s for an absolute URI.
func (r *rawURI) toString() string {
	var b strings.Builder
	b.WriteString(*r.scheme)
	b.WriteByte(':')
	if a := r.authority(); a != nil {
		b.WriteString("//")
		b.WriteString(*a)
	}
	b.WriteString(r.path)
	if r.query != nil {
		b.WriteByte('?')
		b.WriteString(*r.query)
	}
	if r.fragment != nil {
		b.WriteByte('#')
		b.WriteString(*r.fragment)
	}
	return b.String()
}

// normalize is Addressable::URI#normalize.
func (r *rawURI) normalize() (*URL, error) {
	scheme := normalizedScheme(*r.scheme)

	// "This is a special exception for the frequently misused feed URI
	// scheme": feed:http://x is normalized as http://x.
	if scheme == "feed" {
		s := r.toString()
		if rest, ok := strings.CutPrefix(s, "feed:"); ok {
			rest = strings.TrimLeft(rest, "/")
			if strings.HasPrefix(rest, "http:") {
				inner, err := parseRaw(rest)
				if err != nil {
					return nil, err
				}
				return inner.normalize()
			}
		}
	}

	var authority *string
	if r.host != nil {
		host, err := normalizedHost(*r.host)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		if ui := r.normalizedUserinfo(scheme); ui != nil {
			b.WriteString(*ui)
			b.WriteByte('@')
		}
		b.WriteString(host)
		if r.port != "" && defaultPorts[scheme] != r.port {
			b.WriteByte(':')
			b.WriteString(r.port)
		}
		a := b.String()
		authority = &a
	}

	path := normalizedPath(r.path, scheme)

	var query *string
	if r.query != nil {
		pairs := strings.Split(*r.query, "&")
		for i, p := range pairs {
			pairs[i] = normalizeComponent(p, &queryAllowed, true)
		}
		if q := strings.Join(pairs, "&"); q != "" {
			query = &q
		}
	}

	var fragment *string
	if r.fragment != nil {
		if f := normalizeComponent(*r.fragment, &fragmentAllowed, false); f != "" {
			fragment = &f
		}
	}

	// Addressable::URI.new(scheme:, authority:, path:, query:, fragment:).
	n := &rawURI{scheme: &scheme, query: query, fragment: fragment}
	if !validScheme(scheme) {
		return nil, invalid("invalid scheme format %q", scheme)
	}
	if authority != nil {
		user, password, host, port := splitAuthority(*authority)
		n.user, n.password, n.host = user, password, &host
		if port != nil {
			p, err := setPort(*port)
			if err != nil {
				return nil, err
			}
			n.port = p
		}
	}
	n.path = path
	if path != "" && path[0] != '/' && n.host != nil {
		n.path = "/" + path
	}
	if err := n.validate(); err != nil {
		return nil, err
	}

	u := &URL{Scheme: scheme, Path: n.path}
	if n.host != nil {
		u.HasAuthority = true
		u.Host = *n.host
		u.Port = n.port
		if n.user != nil {
			u.HasUserinfo = true
			u.Userinfo = *n.user
			if n.password != nil {
				u.Userinfo += ":" + *n.password
			}
		}
	}
	if n.query != nil {
		u.HasQuery, u.RawQuery = true, *n.query
	}
	if n.fragment != nil {
		u.HasFragment, u.Fragment = true, *n.fragment
	}
	return u, nil
}

// normalizedScheme is Addressable::URI#normalized_scheme for a valid scheme.
func normalizedScheme(s string) string {
	if strings.EqualFold(s, "ssh+svn") {
		return "svn+ssh"
	}
	return strings.ToLower(s)
}

// normalizedUserinfo is Addressable::URI#normalized_userinfo.
func (r *rawURI) normalizedUserinfo(scheme string) *string {
	if r.user == nil && r.password == nil {
		return nil
	}
	// Addressable tests normalized_scheme =~ /https?/, unanchored.
	httpish := strings.Contains(scheme, "http")
	blank := func(p *string) bool { return p == nil || rubyStrip(*p) == "" }
	var user, password *string
	if r.user != nil && !(httpish && blank(r.user) && blank(r.password)) {
		u := normalizeComponent(rubyStrip(*r.user), &unreservedSet, false)
		user = &u
	}
	if r.password != nil && !(httpish && blank(r.password) && blank(r.user)) {
		p := normalizeComponent(rubyStrip(*r.password), &unreservedSet, false)
		password = &p
	}
	switch {
	case user != nil && password != nil:
		s := *user + ":" + *password
		return &s
	case user != nil:
		return user
	}
	return nil
}

// normalizedHost is Addressable::URI#normalized_host.
func normalizedHost(h string) (string, error) {
	h = rubyStrip(h)
	if h == "" {
		return "", nil
	}
	res, err := toASCII(unencode(rubyDowncase(h), false))
	if err != nil {
		return "", err
	}
	// "Single trailing dots are unnecessary": if result =~ /[^\.]\.$/ then
	// result = result[0...-1]. The string is binary at this point and $ also
	// matches before a line feed (from %0A), hence the byte-wise test.
	for i := 1; i < len(res); i++ {
		if res[i] == '.' && res[i-1] != '.' && (i+1 == len(res) || res[i+1] == '\n') {
			res = res[:len(res)-1]
			break
		}
	}
	return normalizeComponent(res, &hostAllowed, false), nil
}

// normalizedPath is Addressable::URI#normalized_path for an absolute URI.
func normalizedPath(p, scheme string) string {
	segs := strings.Split(rubyStrip(p), "/")
	for i, s := range segs {
		segs[i] = normalizeComponent(s, &pcharAllowed, false)
	}
	res := normalizeDotSegments(strings.Join(segs, "/"))
	if res == "" {
		switch scheme {
		case "http", "https", "ftp", "tftp":
			res = "/"
		}
	}
	return res
}

var rulePrefixedParent = regexp.MustCompile(`^/\.\.?/|^(/\.\.?)+/?$`)

// normalizeDotSegments is Addressable::URI.normalize_path: each round
// applies the first of its rules that matches, until none does:
//
//	RULE_2A:              /\/\.\/|\/\.$/ by "/"
//	RULE_2B_2C:           /\/([^\/]*)\/\.\.\/|\/([^\/]*)\/\.\.$/, see below
//	RULE_2D:              /^\.\.?\/?/ by ""
//	RULE_PREFIXED_PARENT: /^\/\.\.?\/|^(\/\.\.?)+\/?$/ by "/"
//
// All replacements are global (gsub!). The first three rules are
// hand-coded to keep long paths fast.
func normalizeDotSegments(p string) string {
	if !strings.Contains(p, "/.") && !strings.HasPrefix(p, ".") {
		return p
	}
	for {
		if strings.Contains(p, "/./") || strings.HasSuffix(p, "/.") {
			p = gsubSlash(p, "/./", "/.")
			continue
		}
		if seg, trailing, ok := findDotDot(p); ok {
			// Addressable then removes every "/parent/../" and a trailing
			// "/current/..", parent and current coming from the first match
			// (one of them is nil there, which reads as "").
			var parent, current string
			if trailing {
				current = seg
			} else {
				parent = seg
			}
			p = gsubSlash(p, "/"+parent+"/../", "/"+current+"/..")
			continue
		}
		if strings.HasPrefix(p, ".") { // RULE_2D
			k := 1
			if strings.HasPrefix(p[1:], ".") {
				k = 2
			}
			if strings.HasPrefix(p[k:], "/") {
				k++
			}
			p = p[k:]
			continue
		}
		if rulePrefixedParent.MatchString(p) {
			p = rulePrefixedParent.ReplaceAllLiteralString(p, "/")
			continue
		}
		return p
	}
}

// findDotDot finds the leftmost match of RULE_2B_2C,
// /\/([^\/]*)\/\.\.\/|\/([^\/]*)\/\.\.$/, and returns its segment and
// whether it is the second (trailing) alternative.
func findDotDot(p string) (seg string, trailing, ok bool) {
	for i := strings.IndexByte(p, '/'); i >= 0; {
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			break
		}
		j += i + 1
		switch rest := p[j:]; {
		case strings.HasPrefix(rest, "/../"):
			return p[i+1 : j], false, true
		case rest == "/..":
			return p[i+1 : j], true, true
		}
		i = j
	}
	return "", false, false
}

// gsubSlash is p.gsub(/#{Regexp.escape(a)}|#{Regexp.escape(b)}$/, "/"): it
// replaces every occurrence of a, and b at the very end, with "/", scanning
// left to right and preferring a.
func gsubSlash(p, a, b string) string {
	var out strings.Builder
	out.Grow(len(p))
	for i := 0; i < len(p); {
		switch {
		case strings.HasPrefix(p[i:], a):
			out.WriteByte('/')
			i += len(a)
		case p[i:] == b:
			out.WriteByte('/')
			i = len(p)
		default:
			out.WriteByte(p[i])
			i++
		}
	}
	return out.String()
}

// Character classes of Addressable::URI::CharacterClasses, as the bytes a
// component may keep unencoded.
var (
	unreservedSet   = byteSet("a-zA-Z0-9", "-._~")
	subDelimSet     = byteSet("", "!$&'()*+,;=")
	pcharAllowed    = byteSet("a-zA-Z0-9", "-._~!$&'()*+,;=:@")
	hostAllowed     = byteSet("a-zA-Z0-9", "-._~!$&'()*+,;=[:]")
	fragmentAllowed = byteSet("a-zA-Z0-9", "-._~!$&'()*+,;=:@/?")
	// NormalizeCharacterClasses::QUERY, less its special handling of "%".
	queryAllowed = byteSet("a-zA-Z0-9", "-._~!$'()*+,=:@/?")
	// RESERVED + UNRESERVED, used when a component is not valid UTF-8 once
	// decoded.
	reservedUnreserved = byteSet("a-zA-Z0-9", "-._~:/?#[]@!$&'()*+,;=")
)

func byteSet(ranges, chars string) (set [256]bool) {
	for i := 0; i+2 < len(ranges); i += 3 {
		for c := ranges[i]; c <= ranges[i+2]; c++ {
			set[c] = true
		}
	}
	for i := 0; i < len(chars); i++ {
		set[chars[i]] = true
	}
	return set
}

// normalizeComponent is Addressable::URI.normalize_component: decode every
// %XX (but %2B in the query), apply NFC, and encode every byte outside the
// class as %XX. A component that is not valid UTF-8 once decoded skips NFC
// and is encoded with the RESERVED + UNRESERVED class instead.
func normalizeComponent(s string, allowed *[256]bool, query bool) string {
	u := unencode(s, query)
	if !utf8.ValidString(u) {
		return encode(u, &reservedUnreserved, false)
	}
	u = norm.NFC.String(u)
	if !query {
		return encode(u, allowed, false)
	}
	// Addressable then upcases a kept "%2b".
	return strings.ReplaceAll(encode(u, allowed, true), "%2b", "%2B")
}

// encode percent-encodes, in upper case, the bytes of s outside allowed. In
// query mode a "%" is kept when "2B" or "2b" follows it.
func encode(s string, allowed *[256]bool, query bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !allowed[s[i]] {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if allowed[c] || (query && c == '%' && i+2 < len(s) && s[i+1] == '2' && s[i+2]|0x20 == 'b') {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// unencode is Addressable::URI.unencode: it decodes every %XX, except %2B
// when keepPlus is set. The result may not be valid UTF-8.
func unencode(s string, keepPlus bool) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if keepPlus && v == '+' {
				b = append(b, s[i:i+3]...)
			} else {
				b = append(b, v)
			}
			i += 2
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

func isHex(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}

// rubyStrip is Ruby's String#strip: it removes ASCII white space and NUL.
func rubyStrip(s string) string {
	return strings.Trim(s, " \t\n\v\f\r\x00")
}

// rubyDowncase is Ruby's String#downcase: full Unicode lower-casing, which
// differs from the simple mapping only for U+0130.
func rubyDowncase(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

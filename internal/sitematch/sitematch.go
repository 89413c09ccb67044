// Package sitematch parses the avoid rules of the take rule
// (doc/pipeline-api.md, The take rule): domains a pipeline must not
// crawl. A rule is a registered domain, or a name below one, and covers
// it and every subdomain; "*.example.org" is written the same as
// "example.org". Rules are kept in their ASCII (IDNA) form, as job URLs
// are normalized when queued, so the take script compares plain strings.
package sitematch

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// MaxRules is the most avoid rules one list holds (the operators' list of
// a key, and the list its own report gives, each).
const MaxRules = 100

// Parse checks one rule and returns it in the form the take compares:
// lower case, ASCII (Punycode), without "*." or a trailing dot.
func Parse(rule string) (string, error) {
	r := strings.TrimSpace(rule)
	orig := r
	r = strings.TrimPrefix(r, "*.")
	r = strings.TrimSuffix(r, ".")
	if _, err := netip.ParseAddr(strings.Trim(r, "[]")); err == nil {
		return "", fmt.Errorf("%q: an IP address, not a domain (rules match the host names of job URLs)", orig)
	}
	switch {
	case r == "" || r == "*":
		return "", fmt.Errorf("%q: not a domain (a rule names a site, e.g. example.com; everything cannot be avoided)", orig)
	case strings.Contains(r, "*"):
		return "", fmt.Errorf("%q: only a leading \"*.\" is allowed (it means the domain and its subdomains, as the plain domain does)", orig)
	case strings.Contains(r, "/"):
		if _, err := netip.ParsePrefix(r); err == nil {
			return "", fmt.Errorf("%q: an IP range, not a domain (rules match the host names of job URLs)", orig)
		}
		return "", fmt.Errorf("%q: not a domain (write the host name only, without a scheme or path)", orig)
	case strings.ContainsAny(r, ":@ \t"):
		return "", fmt.Errorf("%q: not a domain (write the host name only, without a port or user)", orig)
	}
	a, err := idna.Lookup.ToASCII(r)
	if err != nil {
		return "", fmt.Errorf("%q: not a valid domain name (%v)", orig, err)
	}
	a = strings.ToLower(a)
	if !strings.Contains(a, ".") {
		return "", fmt.Errorf("%q: a top-level domain, not a site", orig)
	}
	if suffix, icann := publicsuffix.PublicSuffix(a); icann && suffix == a {
		return "", fmt.Errorf("%q: a public suffix (like com or co.uk), not a site: it would avoid every site under it", orig)
	}
	return a, nil
}

// ParseList parses a comma-separated list of rules: each checked by
// Parse, duplicates dropped, sorted, at most MaxRules. An empty list
// clears the rules.
func ParseList(list string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, part := range strings.Split(list, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		d, err := Parse(part)
		if err != nil {
			return nil, err
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	if len(out) > MaxRules {
		return nil, fmt.Errorf("%d rules; at most %d", len(out), MaxRules)
	}
	sort.Strings(out)
	return out, nil
}

// Covers reports whether rule covers host: host is rule or below it.
func Covers(rule, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == rule || strings.HasSuffix(host, "."+rule)
}

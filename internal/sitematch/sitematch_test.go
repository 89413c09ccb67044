package sitematch

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]string{
		"squarespace.com":    "squarespace.com",
		"*.example.org":      "example.org",
		"Shop.Example.ORG.":  "shop.example.org",
		"bücher.example":     "xn--bcher-kva.example",
		"*.xn--bcher-kva.de": "xn--bcher-kva.de",
		"user.blogspot.com":  "user.blogspot.com",
		"blogspot.com":       "blogspot.com", // a private suffix: a hosting provider, the case avoid rules exist for
		"example.co.uk":      "example.co.uk",
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"*":               "everything",
		"*.com":           "not a site",
		"com":             "top-level",
		"co.uk":           "public suffix",
		"10.0.0.0/8":      "IP range",
		"192.168.1.1":     "IP address",
		"[::1]":           "IP address",
		"a.*.example.org": "leading",
		"http://x.org/":   "not a domain",
		"x.org:80":        "port",
		"":                "not a domain",
	}
	for in, why := range bad {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q) = %v; want an error saying %q", in, err, why)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("squarespace.com, *.example.org,,squarespace.com")
	if err != nil || !slices.Equal(got, []string{"example.org", "squarespace.com"}) {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
	many := strings.Repeat("a.example.com,", 0)
	for i := range MaxRules + 1 {
		many += string(rune('a'+i%26)) + strings.Repeat("x", i) + ".example.com,"
	}
	if _, err := ParseList(many); err == nil || !strings.Contains(err.Error(), "at most 100") {
		t.Fatalf("a list over the cap: %v", err)
	}
	if got, err := ParseList(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list = %v, %v", got, err)
	}
}

func TestCovers(t *testing.T) {
	if !Covers("example.org", "www.example.org") || !Covers("example.org", "EXAMPLE.org.") || Covers("example.org", "notexample.org") {
		t.Fatal("Covers is wrong")
	}
}

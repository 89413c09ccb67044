package ident

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
)

// Hosts Addressable accepts but that must not be
// queued are refused by CheckHost; every row of the reference table stays
// accepted, with the same normalized URL.
func TestCheckHost(t *testing.T) {
	refused := []string{
		"http://exa\u200bmple.com/", "http://exa\u200cmple.com/", "http://exa\u200dmple.com/",
		"http://\u202eexample.com/", "http://ex\u2066ample.com/", "http://\ufeffexample.com/",
		"http://exam\u00adple.com/", "http://exa%E2%80%8Bmple.com/", "http://xn--example-2z6c.com/",
		"http://a..b.com/", "http://.example.com/", "http://example.com../",
		"http://xn--.com/", "http://XN--.example.com/",
		"http://example.com:99999/", "http://example.com:65536/", "http://example.com:0099999/",
		"http://ex%0D%0Aample.com/", "http://ex%00ample.com/", "http://ex%7Fample.com/", "http://ex%09ample.com/",
		"http://ex\x01ample.com/", "http://ex\x7fample.com/", "http://h:99999999999999999999999/",
	}
	for _, raw := range refused {
		u, err := Parse(raw)
		if err != nil {
			t.Errorf("Parse(%q): %v (want it parsed, then refused by CheckHost)", raw, err)
			continue
		}
		if err := CheckHost(u); !errors.Is(err, ErrUnsafeHost) {
			t.Errorf("CheckHost(%q → %s) = %v, want a refusal", raw, u, err)
		}
	}

	f, err := os.Open("../testdata/idents.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rows := 0
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 3 || strings.HasPrefix(cols[0], "#") {
			continue
		}
		rows++
		u, err := Parse(cols[0])
		if err != nil {
			t.Errorf("Parse(%q): %v", cols[0], err)
			continue
		}
		if err := CheckHost(u); err != nil {
			t.Errorf("table row %q refused: %v", cols[0], err)
		}
		if u.String() != cols[1] {
			t.Errorf("table row %q normalizes to %q, want %q", cols[0], u.String(), cols[1])
		}
	}
	if rows < 200 {
		t.Fatalf("only %d table rows", rows)
	}
	for _, raw := range []string{"http://a-b_c.example.com/", "http://-x.example/", "http://1a.example/", "http://xn--zz.example/", "http://bücher.de/", "http://[::1]:65535/"} {
		u, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckHost(u); err != nil {
			t.Errorf("non-strict host %q refused: %v", raw, err)
		}
	}
}

func TestPunycodeDecode(t *testing.T) {
	for _, s := range []string{"bücher", "пример", "exa\u200bmple", "日本語", "a\U0001F600b", "ab"} {
		enc, err := punycodeEncode(s)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := punycodeDecode(enc)
		if err != nil || dec != s {
			t.Errorf("punycodeDecode(%q) = %q, %v; want %q", enc, dec, err, s)
		}
	}
	for _, bad := range []string{"é-abc", "9999999999", "a-!"} {
		if _, err := punycodeDecode(bad); err == nil {
			t.Errorf("punycodeDecode(%q) accepted", bad)
		}
	}
}

package ident

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestTable checks every row of testdata/idents.tsv, produced by the Ruby
// implementation (Addressable::URI.parse(u).normalize.to_s, then the UUIDv5
// and base 36).
func TestTable(t *testing.T) {
	f, err := os.Open("../testdata/idents.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line, rows, bad := 0, 0, 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) != 3 {
			t.Errorf("line %d: %d columns, want 3: %q", line, len(cols), text)
			continue
		}
		rows++
		input, wantNorm, wantIdent := cols[0], cols[1], cols[2]
		gotNorm, gotIdent, err := FromURL(input)
		switch {
		case err != nil:
			t.Errorf("line %d: FromURL(%q): %v", line, input, err)
		case gotNorm != wantNorm || gotIdent != wantIdent:
			t.Errorf("line %d: FromURL(%q)\n  got  %s %s\n  want %s %s",
				line, input, gotNorm, gotIdent, wantNorm, wantIdent)
		default:
			if got := Of(wantNorm); got != wantIdent {
				t.Errorf("line %d: Of(%q) = %s, want %s", line, wantNorm, got, wantIdent)
			}
			continue
		}
		bad++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 100 {
		t.Fatalf("only %d rows in the table", rows)
	}
	t.Logf("%d rows, %d mismatches", rows, bad)
}

// The expected values below come from Addressable (2.8 line) itself.
var normalizeCases = []struct {
	in, want string
}{
	// Scheme and host case, default ports.
	{"HTTP://EXAMPLE.COM", "http://example.com/"},
	{"http://example.com:80/", "http://example.com/"},
	{"https://example.com:443/", "https://example.com/"},
	{"ftp://example.com:21/", "ftp://example.com/"},
	{"https://example.com:80/", "https://example.com:80/"},
	{"http://example.com:0080/", "http://example.com/"},
	{"ftp://127.0.0.1:0080/", "ftp://127.0.0.1:80/"},
	{"http://example.com:0/", "http://example.com/"},
	{"http://example.com:/", "http://example.com/"},
	{"http://example.com:%38%30/", "http://example.com/"},
	{"http://example.com:0d81%0A5/", "http://example.com:81/"},
	{"gopher://example.com:70/", "gopher://example.com/"},
	{"ssh+svn://example.com:22/x", "svn+ssh://example.com/x"},
	{"foo://example.com", "foo://example.com"},
	// Hosts.
	{"http://example.com./", "http://example.com/"},
	{"http://example.com../", "http://example.com../"},
	{"http://a-b_c.example.com/", "http://a-b_c.example.com/"},
	{"http://Bücher.DE/", "http://xn--bcher-kva.de/"},
	{"http://bücher.de./", "http://xn--bcher-kva.de/"},
	{"http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/"},
	{"http://пример.рф/", "http://xn--e1afmkfd.xn--p1ai/"},
	{"http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"},
	{"http://%41.com/", "http://A.com/"},
	{"http://a%2541/", "http://aA/"},
	{"http://a%20b/", "http://a%20b/"},
	{"http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080/"},
	{"http://[::1]/", "http://[::1]/"},
	// Userinfo.
	{"http://user:pass@example.com/", "http://user:pass@example.com/"},
	{"http://us%65r:p%40ss@example.com/", "http://user:p%40ss@example.com/"},
	{"http://@example.com/", "http://example.com/"},
	{"http://:@example.com/", "http://example.com/"},
	{"ftp://@example.com/", "ftp://@example.com/"},
	{"http://a@b@example.com/", "http://a%40b@example.com/"},
	// Paths.
	{"http://example.com", "http://example.com/"},
	{"http://example.com/a/../b/./c", "http://example.com/b/c"},
	{"http://example.com/..", "http://example.com/"},
	{"http://example.com/a/b/../../..", "http://example.com/"},
	{"http://example.com/%2e%2e/x", "http://example.com/x"},
	{"http://example.com/a%2Fb", "http://example.com/a%2Fb"},
	{"http://example.com/%7e%7E", "http://example.com/~~"},
	{"http://example.com/%zz", "http://example.com/%25zz"},
	{"http://example.com/a b", "http://example.com/a%20b"},
	{"http://example.com/a ?q", "http://example.com/a?q"},
	{"http://example.com/straße", "http://example.com/stra%C3%9Fe"},
	{"http://example.com/e%CC%81", "http://example.com/%C3%A9"},
	{"http://example.com/%FF", "http://example.com/%FF"},
	{"http://example.com/dollar$&'()*,;=:@", "http://example.com/dollar$&'()*,;=:@"},
	{"http://example.com/[x]", "http://example.com/%5Bx%5D"},
	// Queries.
	{"http://example.com/?", "http://example.com/"},
	{"http://example.com/?%3D=%26", "http://example.com/?==%26"},
	{"http://example.com/?r=%2F", "http://example.com/?r=/"},
	{"http://example.com/?q=a+b&c=%2b", "http://example.com/?q=a+b&c=%2B"},
	{"http://example.com/?x=%252B", "http://example.com/?x=%2B"},
	{"http://example.com/?a;b", "http://example.com/?a%3Bb"},
	{"http://example.com/?a&&b&", "http://example.com/?a&&b&"},
	{"http://example.com/??x", "http://example.com/??x"},
	{"http://example.com/?k=✓", "http://example.com/?k=%E2%9C%93"},
	{"http://example.com/?%zz", "http://example.com/?%25zz"},
	{"http://example.com/?%FF%2B", "http://example.com/?%FF%252B"},
	// Fragments.
	{"http://example.com/#", "http://example.com/"},
	{"http://example.com/##top", "http://example.com/#%23top"},
	{"http://example.com/#a b", "http://example.com/#a%20b"},
	{"http://example.com/#/?x", "http://example.com/#/?x"},
	// Not archivable, but URLs all the same.
	{"http:///path", "http:///path"},
	{"mailto:someone@example.com", "mailto:someone@example.com"},
	{"http:foo", "http:foo"},
	{"foo:./bar", "foo:bar"},
	{"example.com:80", "example.com:80"},
	// The feed: special case.
	{"feed:http://Example.com", "http://example.com/"},
	{"feed://http//example.com/", "feed://http//example.com/"},
	// White space around the input.
	{"  https://example.com/\t\n", "https://example.com/"},
}

func TestNormalize(t *testing.T) {
	for _, c := range normalizeCases {
		got, err := Normalize(c.in)
		if err != nil {
			t.Errorf("Normalize(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseFields(t *testing.T) {
	u, err := Parse("HTTP://User:Pw@Bücher.de:8080/a/../b?q=1#Frag")
	if err != nil {
		t.Fatal(err)
	}
	want := URL{
		Scheme: "http", HasAuthority: true, HasUserinfo: true, Userinfo: "User:Pw",
		Host: "xn--bcher-kva.de", Port: "8080", Path: "/b",
		HasQuery: true, RawQuery: "q=1", HasFragment: true, Fragment: "Frag",
	}
	if *u != want {
		t.Errorf("Parse = %+v\nwant %+v", *u, want)
	}

	u, err = Parse("http:///path")
	if err != nil {
		t.Fatal(err)
	}
	if !u.HasAuthority || u.Host != "" || u.Path != "/path" {
		t.Errorf("http:///path: %+v", *u)
	}

	u, err = Parse("mailto:someone@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "mailto" || u.HasAuthority || u.Host != "" || u.Path != "someone@example.com" {
		t.Errorf("mailto: %+v", *u)
	}
}

func TestErrors(t *testing.T) {
	notAbsolute := []string{
		"", "   ", "example.com", "example.com/foo", "//example.com/", "/path", "?q",
	}
	for _, in := range notAbsolute {
		if _, err := Parse(in); !errors.Is(err, ErrNotAbsolute) {
			t.Errorf("Parse(%q) = %v, want ErrNotAbsolute", in, err)
		}
	}
	invalidInputs := []string{
		"http:",                     // ip-based, no host, no path
		"http://",                   // same
		"1http://example.com/",      // scheme format
		"ht tp://example.com/",      // scheme format
		"http://example.com:abc/",   // port
		"http://example.com:-1/",    // port
		"http://example.com:8%FF/",  // port encoding
		"http://exa mple.com/",      // space in host
		"http://exa\u00a0mple.com/", // Unicode space in host
		"http://exa<mple.com/",      // bad character in host
		"http://[::1%25eth0]/",      // bad IPv6 literal
		"http://%FF/",               // host not UTF-8
		"http://%5B%25%5D/",         // normalizes to a bad IPv6 literal
		"http://a]b:c:80/",          // normalized host reads as host:port
		"foo:.///x",                 // path normalizes to //x, no authority
		"ssh:.",                     // path normalizes to "", no host
		"http://a/\nb",              // line feed
		"http://a/\xff",             // not UTF-8
		"http://" + strings.Repeat("ü", 300) + "/", // Punycode too long
	}
	for _, in := range invalidInputs {
		if u, err := Parse(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v; want ErrInvalid", in, u, err)
		}
	}
	if _, _, err := FromURL("example.com"); err == nil {
		t.Error("FromURL(example.com): no error")
	}
	if _, err := Normalize("http:"); err == nil {
		t.Error("Normalize(http:): no error")
	}
}

func TestOf(t *testing.T) {
	// From the table: the empty path becomes "/" before hashing.
	if got, want := Of("ftp://example.com/"), "nq4c73omki2bfbli7n60rpsn"; got != want {
		t.Errorf("Of = %s, want %s", got, want)
	}
	if got := Of(""); len(got) < 1 || len(got) > 25 {
		t.Errorf("Of(\"\") = %q", got)
	}
}

func TestPunycode(t *testing.T) {
	for in, want := range map[string]string{
		"bücher": "bcher-kva",
		"例え":     "r8jz45g",
		"пример": "e1afmkfd",
		"ü-x":    "-x-wka",
	} {
		got, err := punycodeEncode(in)
		if err != nil || got != want {
			t.Errorf("punycodeEncode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestRubyToI(t *testing.T) {
	for in, want := range map[string]string{
		"80": "80", "0080": "80", "0": "", "": "", "1_2_3": "123", "1__2": "1",
		"_12": "", " \v+8": "8", "-0d1": "-1", "0d12": "12", "0d_12": "", "8_": "8",
		"12\n5": "12", "99999999999999999999999": "99999999999999999999999",
	} {
		if got := rubyToI(in); got != want {
			t.Errorf("rubyToI(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"https://www.example.com:443/emoji/😀?%3D=%26#",
		"ftp://127.0.0.1:0080/%zz?#a%20b",
		"HTTP://xn--bcher-kva.de:0080/a b?k=v##top",
		"https://пример.рф:0080/a/../b/./c?empty=&b#",
		"http://[2001:db8::1]:0080/plus+sign?k=v##Frag",
		"feed:http://example.com/a/./b",
		"mailto:someone@example.com",
		"http://a%2541.:%38%30/%2e%2e/x?%2b%252B;#%23",
		"example.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s)
		if err != nil {
			if u != nil {
				t.Fatalf("Parse(%q) returned both %v and an error", s, u)
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotAbsolute) {
				t.Fatalf("Parse(%q): unexpected error kind %v", s, err)
			}
			return
		}
		// Addressable's normalization is not idempotent (for instance
		// "http://a%2541/" gives "http://aA/", which gives "http://aa/"),
		// so there is no round-trip property to check. Its output is,
		// however, always printable ASCII.
		n := u.String()
		for i := 0; i < len(n); i++ {
			if n[i] <= ' ' || n[i] >= 0x7f {
				t.Fatalf("Parse(%q).String() = %q: byte %#x", s, n, n[i])
			}
		}
		if !strings.HasPrefix(n, u.Scheme+":") {
			t.Fatalf("Parse(%q).String() = %q, scheme %q", s, n, u.Scheme)
		}
		if id := Of(n); len(id) < 1 || len(id) > 25 {
			t.Fatalf("Of(%q) = %q", n, id)
		}
	})
}

func BenchmarkFromURL(b *testing.B) {
	inputs := []string{
		"https://www.reddit.com/r/DataHoarder/comments/abc123/some_title/",
		"HTTP://user:pass@example.com:8080/中文/页面?a=1&b=2",
		"https://bücher.de:443/a/../b/./c?k=%E2%9C%93#frag",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, err := FromURL(inputs[i%len(inputs)]); err != nil {
			b.Fatal(err)
		}
	}
}

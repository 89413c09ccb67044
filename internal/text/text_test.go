package text

import "testing"

func TestClean(t *testing.T) {
	tests := []struct {
		in   string
		from Source
		want string
	}{
		{"plain", Bot, "plain"},
		{"a\r\nb\x00c", Bot, "a\uFFFD\uFFFDb\uFFFDc"},
		{"\x02bold\x02 \x0304red\x0f \x07bell\x7f", Bot, "bold red \uFFFDbell\uFFFD"},
		{"\x0301,01hidden\x03 \x04000000x\x04\r\n", Bot, "hidden x\uFFFD\uFFFD"},
		{"a\r\nb\x00c", Untrusted, "a  bc"},
		{"\x02bold\x02 \x0304,04red\x03 \x03,x", Untrusted, "bold red ,x"},
		{"\x0312hi\x03 \x031,2x \x0399y", Untrusted, "hi x y"},
		{"\x04ff0000,00ff00hex\x04 \x04FF0000hex2\x04 \x04bare", Untrusted, "hex hex2 bare"},
		{"\x11mono\x11 \x16rev\x16 \x1dit\x1d \x1estrike\x1e \x1fund\x1f\x0f", Untrusted, "mono rev it strike und"},
		{"\x07bell\x1b[31m", Untrusted, "\uFFFDbell\uFFFD[31m"},
		{"héllo 日本", Untrusted, "héllo 日本"},
	}
	for _, tc := range tests {
		if got := Clean(tc.in, tc.from); got != tc.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", tc.in, tc.from, got, tc.want)
		}
	}
}

func TestTerminal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain http://x/?a=b c", "plain http://x/?a=b c"},
		{"héllo 日本", "héllo 日本"},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"a\rb\nc\td", `a\x0db\x0ac\x09d`},
		{"\u009b31m \u202egnp.exe \x7f", `\x9b31m \u202egnp.exe \x7f`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{`back\slash`, `back\slash`},
	}
	for _, tc := range tests {
		if got := Terminal(tc.in); got != tc.want {
			t.Errorf("Terminal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

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
		{"\x02bold\x02 \x0304red\x0f \x07bell\x7f", Bot, "\x02bold\x02 \x0304red\x0f \uFFFDbell\uFFFD"},
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

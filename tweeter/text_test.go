package tweeter

import (
	"strings"
	"testing"
)

func TestArchivingText(t *testing.T) {
	longPath := "https://example.com/" + strings.Repeat("a", 400)
	longFTP := "ftp://ftp.example.com/pub/" + strings.Repeat("b", 400)
	tests := []struct {
		name, url, want string
	}{
		{"short", "https://example.com/", "Archiving https://example.com/"},
		// Twitter links the URL as 23 characters: kept whole.
		{"long linked URL", longPath, "Archiving " + longPath},
		// An ftp URL is not linked: it counts in full and is cut.
		{"long ftp URL", longFTP, "Archiving " + longFTP[:268] + "…"},
		// No percent escape is cut in half.
		{"escape at the cut", "ftp://h.example/" + strings.Repeat("x", 250) + "%2F" + strings.Repeat("y", 50),
			"Archiving ftp://h.example/" + strings.Repeat("x", 250) + "…"},
		// An IP host is not linked by twitter-text.
		{"ip host", "http://10.1.2.3/" + strings.Repeat("c", 300), "Archiving " + ("http://10.1.2.3/" + strings.Repeat("c", 300))[:268] + "…"},
		// Beyond 4096 characters twitter-text stops linking.
		{"huge URL", "https://example.com/" + strings.Repeat("d", 5000), "Archiving https://example.com/" + strings.Repeat("d", 248) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ArchivingText(tc.url)
			if got != tc.want {
				t.Errorf("ArchivingText(%.60q…)\n got %q\nwant %q", tc.url, got, tc.want)
			}
			if n := Length(got); n > MaxLength {
				t.Errorf("Length = %d > %d", n, MaxLength)
			}
		})
	}
}

func TestLength(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"Archiving https://example.com/", 10 + 23},
		{"Archiving https://example.com/" + strings.Repeat("a", 500), 10 + 23},
		{"Archiving https://example.com/a.", 10 + 23 + 1},
		{"Archiving ftp://example.com/", 28},
		{"Archiving https://localhost/", 28},
		{"日本", 4},
		{"…", 2},
		{"Archiving https://xn--bcher-kva.example/", 10 + 23},
	}
	for _, tc := range tests {
		if got := Length(tc.text); got != tc.want {
			t.Errorf("Length(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

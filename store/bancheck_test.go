package store

import (
	"testing"

	"github.com/archiveteam/archivebot-go/record"
)

// TestBanLabel: which log entries count for the ban line and as what.
func TestBanLabel(t *testing.T) {
	for doc, want := range map[string]string{
		`{"type":"download","response_code":403,"is_error":false}`: "403",
		`{"type":"download","response_code":429,"is_error":true}`:  "429",
		`{"type":"download","response_code":503,"is_error":true}`:  "503",
		`{"type":"download","response_code":0,"is_error":true}`:    "network",
		`{"type":"download","is_error":true}`:                      "network",
		`{"type":"download","response_code":404,"is_error":true}`:  "ok",
		`{"type":"download","response_code":200,"is_error":false}`: "ok",
		`{"type":"download","response_code":0,"is_error":false}`:   "ok",
		`{"type":"stdout","message":"x"}`:                          "",
		`not json`:                                                 "",
	} {
		if got := BanLabel(record.NewLogEntry(doc, 1)); got != want {
			t.Errorf("%s: %q, want %q", doc, got, want)
		}
	}
}

// TestSiteOf: the ban line names the registered domain of the job's host.
func TestSiteOf(t *testing.T) {
	for url, want := range map[string]string{
		"https://shop.squarespace.com/x": "squarespace.com",
		"http://www.example.co.uk:8080/": "example.co.uk",
		"http://user@Example.COM./a":     "example.com",
		"http://192.0.2.1/":              "192.0.2.1",
	} {
		if got := SiteOf(url); got != want {
			t.Errorf("SiteOf(%q) = %q, want %q", url, got, want)
		}
	}
}

package coordinator

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGoroutineTable: the table of the leader's background work in
// doc/architecture.md (Goroutines) lists exactly the entries of
// Services' list, in order: those NewServices declares, then those
// cmd/archivebot's startServices adds.
func TestGoroutineTable(t *testing.T) {
	// Added by startServices (cmd/archivebot/services.go), in its order.
	added := []string{"tweeter", "firehose", "pipeline API term"}
	want := append(NewServices(nil, newSvcAnnouncer(), ServicesConfig{}, svcLog(t)).WorkNames(), added...)

	doc, err := os.ReadFile("../doc/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "| work | shape | does |")
	if start < 0 {
		t.Fatal("doc/architecture.md: no table of the leader's background work")
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var got []string
	for _, l := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("row without a work name: %q", l)
		}
		got = append(got, m[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc/architecture.md lists %q\nthe list of background work is %q", got, want)
	}
}

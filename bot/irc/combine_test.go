package irc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/archiveteam/archivebot-go/news"
)

func TestMergeRuns(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"Added ignore pattern a to job X.", "Added ignore pattern b to job X.", "Added ignore pattern c to job X."},
			"Added ignore pattern {a, b, c} to job X."},
		{[]string{"Sorry, slow down.", "Sorry, slow down.", "Sorry, slow down."}, "Sorry, slow down. (×3)"},
		{[]string{"Queued u1.", "Use !status i1 for updates.", "Queued u2.", "Use !status i2 for updates."},
			"Queued u1. | Use !status i1 for updates. | Queued u2. | Use !status i2 for updates."},
		// A second difference elsewhere starts a new run.
		{[]string{"a x b", "a y b", "a y c"}, "a {x, y} b | a y c"},
		{[]string{"one", "two words"}, "one | two words"},
	}
	for _, c := range cases {
		if got := strings.Join(mergeRuns(c.in), " | "); got != c.want {
			t.Errorf("mergeRuns(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	items := []replyItem{{cmd: 1, text: "Added ignore pattern a to job X."}, {cmd: 2, text: "Sorry, invalid pattern (: missing )"}, {cmd: 3, text: "Added ignore pattern b to job X."}}
	if got, want := combineReplies(items), "3 commands done, 1 refused: Added ignore pattern a to job X. | Sorry, invalid pattern (: missing ) | Added ignore pattern b to job X."; got != want {
		t.Errorf("combineReplies:\n got %q\nwant %q", got, want)
	}
}

// TestFinishUnits: combined finish lines fit the IRC limit with the
// longest prefix the server may add, carry every report exactly once, and
// a report too long to share a line goes alone.
func TestFinishUnits(t *testing.T) {
	c, _ := offlineClient(t, 0, 1)
	var items []*finishItem
	for i := 0; i < 300; i++ {
		nick := fmt.Sprintf("nick%d", i%3)
		url := fmt.Sprintf("https://example.com/%s/%d", strings.Repeat("p", i%50), i)
		if i == 7 {
			url = "https://example.com/" + strings.Repeat("long", 300)
		}
		via := ""
		if i%4 == 0 {
			via = "#elsewhere"
		}
		items = append(items, &finishItem{r: news.FinishReport{Nick: nick, URL: url, Ident: fmt.Sprintf("id%03d", i), Aborted: i%5 == 0,
			Line: nick + ": Your job for " + url + " has finished. (id)"}, via: via, ctx: context.Background()})
	}
	units := c.finishUnits("#chan", items, true)
	seen := map[*finishItem]int{}
	lines := 0
	for _, u := range units {
		if u.err != nil {
			t.Fatal(u.err)
		}
		for _, l := range u.lines {
			lines++
			// The server adds ":nick!user@host " of at most relayPrefixLen.
			if n := len(l) + relayPrefixLen(c.nickLen()); n > maxLineLen {
				t.Errorf("line of %d bytes once relayed: %q", n, l)
			}
		}
		for _, it := range u.items {
			seen[it]++
			if len(u.items) > 1 && !strings.Contains(string(u.lines[0]), it.r.Ident) {
				t.Errorf("combined line lacks %s", it.r.Ident)
			}
		}
	}
	for _, it := range items {
		if seen[it] != 1 {
			t.Errorf("%s carried %d times", it.r.Ident, seen[it])
		}
	}
	t.Logf("%d reports in %d lines", len(items), lines)
	if lines > len(items)/3 {
		t.Errorf("%d lines for %d reports", lines, len(items))
	}
}

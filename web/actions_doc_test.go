package web

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestActionsDocumented: the server's actions, the dashboard's list of
// job actions (web/dashboard/actions.js) and doc/web.md (Signing in and
// acting) name the same actions with the same fields, so none of the
// three drifts from the others.
func TestActionsDocumented(t *testing.T) {
	js, err := os.ReadFile("dashboard/actions.js")
	if err != nil {
		t.Fatal(err)
	}
	dash := map[string][]string{}
	entry := regexp.MustCompile(`(?m)^\t\["(\w+)", "[^"]*", \[(.*)\]\],$`)
	field := regexp.MustCompile(`\["(\w+)", "[^"]*"\]`)
	for _, m := range entry.FindAllStringSubmatch(string(js), -1) {
		fields := []string{}
		for _, f := range field.FindAllStringSubmatch(m[2], -1) {
			fields = append(fields, f[1])
		}
		dash[m[1]] = fields
	}
	server := map[string][]string{}
	for name, a := range actions {
		if !a.queue {
			server[name] = append([]string{}, a.fields...)
		}
	}
	if diff := cmp.Diff(server, dash); diff != "" {
		t.Errorf("job actions: the server's against the dashboard's (-server +actions.js):\n%s", diff)
	}

	doc, err := os.ReadFile("../doc/web.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	from := strings.Index(text, "Actions: `")
	to := strings.Index(text, "anything else is refused")
	if from < 0 || to < from {
		t.Fatal(`doc/web.md: no "Actions: …" paragraph up to "anything else is refused"`)
	}
	text = text[from:to]
	var missing []string
	for name, a := range actions {
		for _, w := range append([]string{name}, a.fields...) {
			if w != "" && !strings.Contains(text, "`"+w+"`") {
				missing = append(missing, name+": `"+w+"`")
			}
		}
	}
	sort.Strings(missing)
	missing = slices.Compact(missing)
	if len(missing) > 0 {
		t.Errorf("doc/web.md's actions do not name %s", strings.Join(missing, ", "))
	}
}

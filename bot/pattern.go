package bot

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dlclark/regexp2"
)

// Ignore patterns are Python `re` expressions: the pipeline compiles them
// with Python. Go's RE2 refuses lookarounds and backreferences that Python
// accepts, so patterns are judged with regexp2 (a .NET-style backtracking
// engine) after translating the Python-only group syntax. Known
// differences are listed in the README.

var (
	pyNamedGroup = regexp.MustCompile(`\(\?P<`)
	pyBackref    = regexp.MustCompile(`\(\?P=(\w+)\)`)
)

// MaxPatternLen bounds an ignore pattern, so one command cannot flood the
// pipeline with a huge expression.
const MaxPatternLen = 1000

// translatePython rewrites Python-only syntax into regexp2's dialect.
func translatePython(p string) string {
	p = pyNamedGroup.ReplaceAllString(p, "(?<")
	p = pyBackref.ReplaceAllString(p, `\k<$1>`)
	// The pipeline substitutes these with re.escape()d values.
	p = strings.ReplaceAll(p, "{primary_url}", `http://example\.com/`)
	p = strings.ReplaceAll(p, "{primary_netloc}", `example\.com`)
	return p
}

// ValidatePattern reports whether p compiles as a Python-style regular
// expression. The error carries the compiler's message.
func ValidatePattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty pattern")
	}
	if len(p) > MaxPatternLen {
		return fmt.Errorf("pattern is %d bytes long; the limit is %d", len(p), MaxPatternLen)
	}
	if strings.ContainsAny(p, "\r\n\x00") {
		return fmt.Errorf("pattern contains a line break or NUL")
	}
	_, err := regexp2.Compile(translatePython(p), regexp2.None)
	return err
}

package bot

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2"
)

// Ignore patterns are Python `re` expressions: the pipeline compiles them
// with Python. Go's RE2 refuses lookarounds and backreferences that Python
// accepts, so patterns are judged with regexp2 (a .NET-style backtracking
// engine) after translating the Python-only group syntax. Known
// differences are listed in doc/commands.md.

var (
	pyNamedGroup = regexp.MustCompile(`\(\?P<`)
	pyBackref    = regexp.MustCompile(`\(\?P=(\w+)\)`)
	pyGroupName  = regexp.MustCompile(`^\(\?P<(\w+)>`)
	braceQuantRE = regexp.MustCompile(`^\{(\d*)(,(\d*))?\}`)
)

// MaxPatternLen bounds an ignore pattern, from a command or a set file:
// every pipeline that takes the job compiles it, and the node compiles it
// to check it, so its length bounds what one pattern costs them in
// memory and time. Upstream's longest (mediawiki-uk.json) is 1,060 bytes;
// the limit leaves about four times that. (A command's pattern is bounded
// sooner by IRC's 512-byte line, a dashboard field's by 400 bytes.)
const MaxPatternLen = 4096

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
	t := translatePython(p)
	if _, err := regexp2.Compile(t, regexp2.None); err != nil {
		// The compiler quotes the pattern it was given: the rewritten
		// one, which the user never typed. Quote the user's instead.
		return errors.New(strings.Replace(err.Error(), "`"+t+"`", "`"+p+"`", 1))
	}
	_, err := scanPattern(p)
	return err
}

// NestedQuantifier reports whether a valid pattern repeats a group that
// itself holds a variable-length repetition, as in (x+x+)+y or (a*)*: the
// shape that makes a backtracking engine such as Python's re take
// exponential time on a near-miss, which can hang a pipeline. Such
// patterns are legal, so they are accepted with a warning.
func NestedQuantifier(p string) bool {
	nested, _ := scanPattern(p)
	return nested
}

// scanPattern walks a Python pattern once: it finds what regexp2 accepts
// but Python's re refuses (a group name defined twice), and nested
// quantifiers. It skips escapes, character classes and comments.
func scanPattern(p string) (nested bool, err error) {
	type frame struct{ variable bool } // holds a variable-length repetition
	stack := []frame{{}}
	names := map[string]int{}
	groups := 0
	// quantifier reads a quantifier at p[i:]: its length, whether it varies
	// in length ("?" included) and whether it repeats more than once.
	quantifier := func(i int) (n int, variable, repeats bool) {
		if i >= len(p) {
			return 0, false, false
		}
		switch p[i] {
		case '*', '+':
			n, variable, repeats = 1, true, true
		case '?':
			n, variable = 1, true
		case '{':
			m := braceQuantRE.FindStringSubmatch(p[i:])
			if m == nil {
				return 0, false, false // a literal brace, as Python reads it
			}
			n = len(m[0])
			lo, _ := strconv.Atoi(m[1])
			switch {
			case m[2] == "":
				variable, repeats = false, lo > 1
			case m[3] == "":
				variable, repeats = true, true
			default:
				hi, _ := strconv.Atoi(m[3])
				variable, repeats = hi > lo, hi > 1
			}
		default:
			return 0, false, false
		}
		// A lazy or possessive modifier belongs to the quantifier.
		if i+n < len(p) && (p[i+n] == '?' || p[i+n] == '+') {
			n++
		}
		return n, variable, repeats
	}
	afterAtom := func(i int) int {
		n, variable, _ := quantifier(i)
		if variable {
			stack[len(stack)-1].variable = true
		}
		return i + n
	}
	for i := 0; i < len(p); {
		switch c := p[i]; c {
		case '\\':
			i = afterAtom(min(i+2, len(p)))
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '^' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				if p[j] == '\\' {
					j++
				}
				j++
			}
			i = afterAtom(min(j+1, len(p)))
		case '(':
			if strings.HasPrefix(p[i:], "(?#") {
				end := strings.IndexByte(p[i:], ')')
				if end < 0 {
					return nested, nil
				}
				i += end + 1
				continue
			}
			if !strings.HasPrefix(p[i:], "(?") || strings.HasPrefix(p[i:], "(?P<") {
				groups++
			}
			if m := pyGroupName.FindStringSubmatch(p[i:]); m != nil {
				if first, dup := names[m[1]]; dup {
					return nested, fmt.Errorf("redefinition of group name %q as group %d; was group %d", m[1], groups, first)
				}
				names[m[1]] = groups
			}
			stack = append(stack, frame{})
			i++
		case ')':
			if len(stack) == 1 {
				i++
				continue
			}
			inner := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			n, variable, repeats := quantifier(i + 1)
			if inner.variable && repeats {
				nested = true
			}
			if inner.variable || variable {
				stack[len(stack)-1].variable = true
			}
			i += 1 + n
		default:
			i = afterAtom(i + 1)
		}
	}
	return nested, nil
}

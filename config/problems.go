package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// maxTOMLErrors bounds the syntax and type errors one load reports: each
// one found costs a parse of the whole file.
const maxTOMLErrors = 50

// Problem is one thing wrong with a configuration.
type Problem struct {
	File string // the file, or "(defaults)"
	Line int    // the line in File, 0 when not known
	Key  string // the key ("irc.server"), "" for a syntax error
	Msg  string
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem one load found, in the order of the file's
// lines for TOML errors, then the keys' checks. Its Error has one line
// per problem.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Has reports whether one of the problems is about key.
func (ps Problems) Has(key string) bool {
	for _, p := range ps {
		if p.Key == key {
			return true
		}
	}
	return false
}

// decodeAll decodes text into a Config, reporting every TOML error rather
// than the first: a syntax error is reported with its line, and the line
// is then read as empty; a value that does not fit its key (a string for
// a number, "soon" for a duration) is reported with its line and key, and
// its line (and, for a value over several lines, the lines that then no
// longer parse) read as empty. What remains is decoded.
func decodeAll(path, text string) (*Config, toml.MetaData, Problems) {
	var probs Problems
	lines := strings.Split(text, "\n")
	blank := func(line int) bool {
		if line < 1 || line > len(lines) || strings.TrimSpace(lines[line-1]) == "" {
			return false
		}
		lines[line-1] = ""
		return true
	}
	// Syntax: decoding into a map can only fail on the syntax.
	syntaxOK := false
	for range maxTOMLErrors {
		var m map[string]any
		_, err := toml.Decode(strings.Join(lines, "\n"), &m)
		if err == nil {
			syntaxOK = true
			break
		}
		var pe toml.ParseError
		if !errors.As(err, &pe) || !blank(pe.Position.Line) {
			// Nothing left to skip (an unterminated string at the end):
			// report it and read nothing more.
			line := 0
			if errors.As(err, &pe) {
				line = pe.Position.Line
			}
			probs = append(probs, Problem{File: path, Line: line, Msg: tomlMessage(err)})
			return &Config{File: path}, toml.MetaData{}, probs
		}
		probs = append(probs, Problem{File: path, Line: pe.Position.Line, Msg: pe.Message})
	}
	if !syntaxOK {
		probs = append(probs, Problem{File: path, Msg: fmt.Sprintf("more than %d TOML errors; the rest of the file was not read", maxTOMLErrors)})
		return &Config{File: path}, toml.MetaData{}, probs
	}
	// Types: the struct decoder stops at the first value that does not fit.
	for range maxTOMLErrors {
		c := &Config{File: path}
		md, err := toml.Decode(strings.Join(lines, "\n"), c)
		if err == nil {
			return c, md, probs
		}
		line, key, msg := decodeError(err)
		if !blank(line) {
			probs = append(probs, Problem{File: path, Line: line, Key: key, Msg: msg})
			break
		}
		probs = append(probs, Problem{File: path, Line: line, Key: key, Msg: msg})
		// A value over several lines leaves lines that no longer parse
		// on their own: they were part of the value just reported.
		for range len(lines) {
			var m map[string]any
			_, err := toml.Decode(strings.Join(lines, "\n"), &m)
			var pe toml.ParseError
			if err == nil || !errors.As(err, &pe) || pe.Position.Line <= line || !blank(pe.Position.Line) {
				break
			}
		}
	}
	return &Config{File: path}, toml.MetaData{}, probs
}

// decodeLine matches BurntSushi/toml's error for a value of the wrong type.
var decodeLine = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError finds the line and key of a decoding error.
func decodeError(err error) (line int, key, msg string) {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Position.Line, pe.LastKey, pe.Message
	}
	if m := decodeLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2], m[3]
	}
	return 0, "", tomlMessage(err)
}

func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return strings.TrimPrefix(err.Error(), "toml: ")
}

// keyLine finds the line where key is set in text, for a key given as
// `name = …` under its [table] header (0 when it is written another way,
// as a dotted key or in an inline table).
func keyLine(text string, key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	table, last := strings.Join(key[:len(key)-1], "."), key[len(key)-1]
	current := ""
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") && !strings.HasPrefix(l, "[[") {
			if end := strings.Index(l, "]"); end > 0 {
				current = strings.TrimSpace(l[1:end])
			}
			continue
		}
		name, _, ok := strings.Cut(l, "=")
		if ok && current == table && strings.Trim(strings.TrimSpace(name), `"'`) == last {
			return i + 1
		}
	}
	return 0
}

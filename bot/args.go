package bot

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// splitWords splits s into words the way a POSIX shell (and Ruby's
// Shellwords, which upstream used) does: whitespace separates words, single
// quotes quote literally, double quotes allow \" and \\ escapes, and a
// backslash outside quotes escapes the next character.
func splitWords(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unmatched single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case ch == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unmatched double quote")
			}
		case ch == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
		default:
			inWord = true
			cur.WriteByte(ch)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// optKind is what an option takes.
type optKind int

const (
	optFlag optKind = iota
	optString
	optInt
)

// optSpec is one option of !archive / !archiveonly.
type optSpec struct {
	name    string
	aliases []string
	kind    optKind
}

var archiveOptions = []optSpec{
	{"ignore-sets", []string{"ignoresets", "ignore_sets", "ignoreset", "ignore-set", "ignore_set", "ig-set", "igset"}, optString},
	{"no-offsite-links", []string{"nooffsitelinks", "no-offsite", "nooffsite"}, optFlag},
	{"user-agent-alias", []string{"useragentalias", "user-agent", "useragent"}, optString},
	{"pipeline", nil, optString},
	{"explain", []string{"reason"}, optString},
	{"delay", nil, optInt},
	{"concurrency", []string{"concurrent"}, optInt},
	{"large", nil, optFlag},
	{"youtube-dl", nil, optFlag},
	{"notify-start", []string{"notifystart"}, optFlag},
	{"no-notify-start", []string{"nonotifystart"}, optFlag},
}

var optIndex = func() map[string]*optSpec {
	m := map[string]*optSpec{}
	for i := range archiveOptions {
		o := &archiveOptions[i]
		m[o.name] = o
		for _, a := range o.aliases {
			m[a] = o
		}
	}
	return m
}()

// archiveOpts are the parsed options; presence is recorded in set.
type archiveOpts struct {
	set            map[string]bool
	IgnoreSets     []string
	NoOffsiteLinks bool
	UserAgentAlias string
	Pipeline       string
	Explain        string
	Delay          int
	Concurrency    int
	Large          bool
	YoutubeDL      bool
}

func (o *archiveOpts) has(name string) bool { return o.set[name] }

var pipelineNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// MaxNoteLen bounds notes (--explain, !explain).
const MaxNoteLen = 400

// parseArchiveOptions parses the words after the URL. Unknown options, a
// missing value, a bad integer or an option given twice are errors.
func parseArchiveOptions(words []string) (*archiveOpts, error) {
	o := &archiveOpts{set: map[string]bool{}}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") || len(w) == 2 {
			return nil, fmt.Errorf("unexpected argument '%s'", w)
		}
		name, value, hasValue := strings.Cut(w[2:], "=")
		spec, ok := optIndex[name]
		if !ok {
			return nil, fmt.Errorf("unknown argument '--%s'", name)
		}
		if o.set[spec.name] {
			return nil, fmt.Errorf("option '--%s' given more than once", spec.name)
		}
		o.set[spec.name] = true
		if spec.kind == optFlag {
			if hasValue {
				return nil, fmt.Errorf("option '--%s' takes no value", spec.name)
			}
		} else if !hasValue {
			if i+1 >= len(words) || strings.HasPrefix(words[i+1], "--") {
				return nil, fmt.Errorf("option '--%s' needs a value", spec.name)
			}
			i++
			value = words[i]
		}
		var n int
		if spec.kind == optInt {
			var err error
			n, err = strconv.Atoi(value)
			if err != nil || len(value) > 7 || strings.HasPrefix(value, "+") {
				return nil, fmt.Errorf("option '--%s' needs a whole number of at most 7 digits, not '%s'", spec.name, value)
			}
		}
		switch spec.name {
		case "ignore-sets":
			for _, s := range strings.Split(value, ",") {
				if s = strings.TrimSpace(s); s != "" {
					o.IgnoreSets = append(o.IgnoreSets, s)
				}
			}
			if len(o.IgnoreSets) == 0 {
				return nil, fmt.Errorf("option '--ignore-sets' needs set names")
			}
		case "no-offsite-links":
			o.NoOffsiteLinks = true
		case "user-agent-alias":
			o.UserAgentAlias = value
		case "pipeline":
			if err := checkPipelineName(value); err != nil {
				return nil, err
			}
			o.Pipeline = value
		case "explain":
			if err := checkNote(value); err != nil {
				return nil, err
			}
			o.Explain = value
		case "delay":
			if n < 0 {
				return nil, fmt.Errorf("option '--delay' must not be negative")
			}
			o.Delay = n
		case "concurrency":
			if n < 1 || n > 99 {
				return nil, fmt.Errorf("option '--concurrency' must be between 1 and 99")
			}
			o.Concurrency = n
		case "large":
			o.Large = true
		case "youtube-dl":
			o.YoutubeDL = true
		case "notify-start", "no-notify-start":
			if o.set["notify-start"] && o.set["no-notify-start"] {
				return nil, fmt.Errorf("options '--notify-start' and '--no-notify-start' contradict each other")
			}
		}
	}
	return o, nil
}

// checkNote refuses notes that are too long or hold control characters.
func checkNote(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("the note is empty")
	case len(s) > MaxNoteLen:
		return fmt.Errorf("the note is %d bytes long; the limit is %d", len(s), MaxNoteLen)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("the note contains control characters")
	}
	return nil
}

// checkPipelineName refuses a --pipeline NAME (or a pending:NAME queue)
// that is not letters, digits, '.', '_' and '-'.
func checkPipelineName(name string) error {
	if !pipelineNameRE.MatchString(name) {
		return fmt.Errorf("pipeline name '%s' may only contain letters, digits, '.', '_' and '-'", name)
	}
	return nil
}

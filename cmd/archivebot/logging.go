package main

import (
	"fmt"
	"io"
	"log/slog"
	"unicode/utf8"
)

// maxLogValue is the most bytes of one attribute value a log line keeps:
// pipelines write the text the services log (a finish notice's URL, a
// whole malformed notice), and one 1 MB notice must not become a 1 MB
// log line.
const maxLogValue = 1024

// newLogger is the process's logger: text lines on w at level, every
// attribute value (and the message) cut at maxLogValue bytes.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: cutAttr}))
}

// cutAttr is a slog ReplaceAttr that shortens long values, saying how
// long they were.
func cutAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case []byte:
			s = string(x)
		default:
			if len(fmt.Sprint(x)) <= maxLogValue {
				return a
			}
			s = fmt.Sprintf("%+v", x)
		}
	default:
		return a
	}
	if len(s) <= maxLogValue {
		return a
	}
	cut := maxLogValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return slog.String(a.Key, fmt.Sprintf("%s…(cut, %d bytes in all)", s[:cut], len(s)))
}

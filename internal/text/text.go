// Package text makes text safe to send as one IRC line (or print as one
// console line). It is the only sanitizer: the IRC outbox, the console and
// the coordinator's reports all use Clean.
package text

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/ergochat/irc-go/ircfmt"
	"unicode/utf8"
)

// Source says who wrote a text, which decides how much of it is kept.
type Source int

const (
	// Bot is text the bot composed (replies, which may quote what a user
	// typed or what a pipeline wrote: a nickname, a job's URL, a note):
	// CR, LF, NUL, the other C0 control characters and DEL become U+FFFD,
	// a visible stand-in. IRC colour and formatting codes are removed, as
	// for Untrusted: the bot composes none itself, and a reply is the
	// only path by which a pipeline's text reaches the channel, so every
	// path is cleaned here.
	Bot Source = iota
	// Untrusted is text another program wrote into Redis (a pipeline's
	// finish notice, its nickname, a job's URL): IRC colour and formatting
	// codes are removed (red on red would hide text), CR and LF become
	// spaces, NUL is dropped, and the remaining control characters become
	// U+FFFD as for Bot.
	Untrusted
)

// hexColour is the \x04 hex colour code with its optional RRGGBB[,RRGGBB]
// parameters, which ircfmt does not know.
var hexColour = regexp.MustCompile(`\x04(?:[0-9A-Fa-f]{6}(?:,[0-9A-Fa-f]{6})?)?`)

// formatCodes are the IRC formatting control characters: bold, colour, hex
// colour, reset, monospace, reverse, italics, strikethrough, underline.
const formatCodes = "\x02\x03\x04\x0f\x11\x16\x1d\x1e\x1f"

// Clean makes s safe for one line: nothing in the result can end the line,
// split it or smuggle a command into it. Valid UTF-8 stays as it is apart
// from the characters named on Source.
func Clean(s string, from Source) string {
	if strings.ContainsAny(s, formatCodes) {
		s = ircfmt.Strip(hexColour.ReplaceAllString(s, ""))
		// ircfmt leaves codes it does not parse (a bare \x04).
		s = strings.Map(func(r rune) rune {
			if strings.ContainsRune(formatCodes, r) {
				return -1
			}
			return r
		}, s)
	}
	if from == Untrusted {
		if strings.ContainsAny(s, "\r\n\x00") {
			s = strings.Map(func(r rune) rune {
				switch r {
				case '\r', '\n':
					return ' '
				case 0:
					return -1
				}
				return r
			}, s)
		}
	}
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// unsafeRune reports the control characters Clean replaces: every C0
// character (the formatting codes are gone by then), and DEL.
func unsafeRune(r rune) bool {
	return r < 0x20 || r == 0x7f
}

// Cut shortens s to at most max bytes on a UTF-8 boundary, marking the cut
// with "…"; a shorter s is returned as it is.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Terminal makes s safe to print in one cell of an operator's terminal
// table: every character that is not graphic (C0 and C1 controls with ESC,
// CSI and OSC among them, CR, LF, TAB, DEL, invisible format characters
// such as bidi overrides) and every byte that is not UTF-8 is written as a
// visible Go-style escape (\x1b, \u202e), so text from Redis can neither
// drive the terminal nor forge rows or columns. Backslashes stay as they
// are; a plain string comes back unchanged.
func Terminal(s string) string {
	if !strings.ContainsFunc(s, terminalUnsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case terminalUnsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case terminalUnsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// terminalUnsafe reports the runes Terminal escapes.
func terminalUnsafe(r rune) bool {
	return r != ' ' && !unicode.IsGraphic(r)
}

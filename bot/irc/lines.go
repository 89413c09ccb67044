package irc

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ergochat/irc-go/ircmsg"

	"github.com/archiveteam/archivebot-go/internal/text"
)

// maxLineLen is the IRC line limit, CRLF included. ngircd disconnects a
// client that sends more; other servers truncate what they relay.
const maxLineLen = 512

// When the server relays our PRIVMSG it prepends ":nick!user@host ". We
// only know our host after the fact and cloaks can be long, so assume a
// generous user and host; the nick's share comes from NICKLEN.
const (
	reserveUser = 12 // "~" + a 10-character user name, and some
	reserveHost = 64 // the longest DNS label-limited host names, cloaks
	minNickLen  = 30
)

// maxReplyLines bounds the lines one reply may take, so one answer cannot
// occupy the outbox for long; longer answers are shortened with a notice.
const maxReplyLines = 10

// relayPrefixLen is the length of ":nick!user@host " as the server will
// relay it, for a nick of at most nickLen bytes.
func relayPrefixLen(nickLen int) int {
	if nickLen < minNickLen {
		nickLen = minNickLen
	}
	return 1 + nickLen + 1 + reserveUser + 1 + reserveHost + 1
}

// textBudget is how many bytes of message text fit in one "PRIVMSG target
// :TEXT" line once the server has added its prefix.
func textBudget(command, target string, nickLen int) int {
	return maxLineLen - 2 - relayPrefixLen(nickLen) - len(command) - 1 - len(target) - 2
}

// cleanText makes text from anywhere safe for one IRC line: CR, LF, NUL
// and other control characters become a visible stand-in (text.Clean),
// invalid UTF-8 becomes U+FFFD.
func cleanText(s string) string {
	return text.Clean(strings.ToValidUTF8(s, "\uFFFD"), text.Bot)
}

// splitText cuts body into pieces of at most max bytes on UTF-8
// boundaries, preferring to cut before a space near the end of a piece
// (servers strip trailing spaces, so the space starts the next piece). The
// pieces concatenate to body exactly.
func splitText(body string, max int) []string {
	if max < utf8.UTFMax {
		max = utf8.UTFMax
	}
	var out []string
	for len(body) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		if cut == 0 {
			// Not UTF-8 at all (cleanText prevents this): cut anywhere.
			cut = max
		}
		if sp := strings.LastIndexByte(body[:cut], ' '); sp > 0 && sp >= cut*3/4 {
			cut = sp
			for cut > max*3/4 && body[cut-1] == ' ' {
				cut--
			}
		}
		out = append(out, body[:cut])
		body = body[cut:]
	}
	if body != "" {
		out = append(out, body)
	}
	return out
}

// messageLines renders body for target as complete IRC lines (with CRLF),
// each prefixed with prefix (e.g. "nick: "), none longer than the server
// will relay. More than maxReplyLines are shortened, saying so.
func messageLines(command, target, prefix, body string, nickLen int) ([][]byte, error) {
	return messageLinesMax(command, target, prefix, body, nickLen, maxReplyLines)
}

// messageLinesMax is messageLines with at most maxLines lines; 0: no
// limit (combined answers, whose every part must arrive).
func messageLinesMax(command, target, prefix, body string, nickLen, maxLines int) ([][]byte, error) {
	body = cleanText(body)
	prefix = cleanText(prefix)
	if body == "" {
		return nil, nil
	}
	budget := textBudget(command, target, nickLen) - len(prefix)
	if budget < 16 {
		return nil, fmt.Errorf("target %q too long for a message", target)
	}
	pieces := splitText(body, budget)
	if maxLines > 0 && len(pieces) > maxLines {
		rest := 0
		for _, p := range pieces[maxLines-1:] {
			rest += len(p)
		}
		pieces = append(pieces[:maxLines-1:maxLines-1],
			fmt.Sprintf("… (answer shortened: %d more bytes not shown)", rest))
	}
	lines := make([][]byte, 0, len(pieces))
	for _, p := range pieces {
		line, err := buildLine(command, target, prefix+p)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// buildLine serializes one IRC command, refusing anything that would not
// be exactly one line of at most maxLineLen bytes.
func buildLine(command string, params ...string) ([]byte, error) {
	m := ircmsg.MakeMessage(nil, "", command, params...)
	line, err := m.LineBytesStrict(true, maxLineLen)
	if err != nil {
		return nil, fmt.Errorf("build %s line: %w", command, err)
	}
	return line, nil
}

// validTarget reports whether s can be a message target on the wire: not
// empty, no space, comma, BEL, CR, LF or NUL, not starting with ':'.
func validTarget(s string) bool {
	return s != "" && s[0] != ':' && !strings.ContainsAny(s, " ,\x07\r\n\x00") && utf8.ValidString(s)
}

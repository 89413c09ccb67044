package ident

// Addressable::IDNA.to_ascii, the pure-Ruby implementation (the one used
// unless the idn gem is installed). It is far more lenient than IDNA2008 or
// golang.org/x/net/idna: no label validation at all (so "a-b_c" or labels
// starting with a digit or hyphen pass), NFKC then a simple lower-casing
// of the whole host, and raw Punycode of every label that holds a non-ASCII
// character. Hence the hand-written Punycode encoder below, a port of
// Addressable's, output size limit included.

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// toASCII converts an (unencoded, lower-cased) host to its ASCII form.
func toASCII(s string) (string, error) {
	// input.force_encoding(UTF_8).unicode_normalize(:nfkc) raises on
	// invalid UTF-8 (for instance a host given as "%FF").
	if !utf8.ValidString(s) {
		return "", invalid("host is not valid UTF-8 once decoded")
	}
	s = norm.NFKC.String(s)
	if !idnaCandidate(s) {
		return s, nil
	}
	// unicode_downcase(input).split('.'): the split drops trailing empty
	// labels, so a trailing dot goes too.
	parts := strings.Split(strings.Map(unicode.ToLower, s), ".")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		if idnaCandidate(p) {
			enc, err := punycodeEncode(p)
			if err != nil {
				return "", err
			}
			parts[i] = "xn--" + enc
		}
	}
	return strings.Join(parts, "."), nil
}

// idnaCandidate reports whether s matches both Addressable::IDNA::UTF8_REGEX
// (valid UTF-8 whose ASCII bytes are tab, line feed, carriage return or
// printable) and UTF8_REGEX_MULTIBYTE (some non-ASCII character). s must be
// valid UTF-8.
func idnaCandidate(s string) bool {
	multibyte := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80:
			multibyte = true
		case c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c <= 0x7e):
		default:
			return false
		}
	}
	return multibyte
}

const (
	punyBase        = 36
	punyTMin        = 1
	punyTMax        = 26
	punySkew        = 38
	punyDamp        = 700
	punyInitialBias = 72
	punyInitialN    = 0x80
	punyMaxOut      = 256 // Addressable's ACE_MAX_LENGTH
)

// punycodeEncode is RFC 3492 Punycode as Addressable implements it: the
// output (without "xn--") may not exceed 256 characters.
func punycodeEncode(s string) (string, error) {
	input := []rune(s)
	out := make([]byte, 0, punyMaxOut)
	tooLong := invalid("IDNA label too long for Punycode")

	for _, r := range input {
		if r < 0x80 {
			if punyMaxOut-len(out) < 2 {
				return "", tooLong
			}
			out = append(out, byte(r))
		}
	}
	h, b := len(out), len(out)
	if b > 0 {
		out = append(out, '-')
	}

	n, delta, bias := rune(punyInitialN), 0, punyInitialBias
	for h < len(input) {
		m := rune(unicode.MaxRune + 1)
		for _, r := range input {
			if r >= n && r < m {
				m = r
			}
		}
		delta += int(m-n) * (h + 1)
		n = m
		for _, r := range input {
			if r < n {
				delta++
			}
			if r != n {
				continue
			}
			q := delta
			for k := punyBase; ; k += punyBase {
				if len(out) >= punyMaxOut {
					return "", tooLong
				}
				t := punyThreshold(k, bias)
				if q < t {
					break
				}
				out = append(out, punyDigit(t+(q-t)%(punyBase-t)))
				q = (q - t) / (punyBase - t)
			}
			out = append(out, punyDigit(q))
			bias = punyAdapt(delta, h+1, h == b)
			delta = 0
			h++
		}
		delta++
		n++
	}
	return string(out), nil
}

// punyThreshold is RFC 3492's threshold t for the digit at position k:
// k - bias, clamped to [tmin, tmax].
func punyThreshold(k, bias int) int {
	return min(max(k-bias, punyTMin), punyTMax)
}

func punyDigit(d int) byte {
	if d < 26 {
		return byte('a' + d)
	}
	return byte('0' + d - 26)
}

func punyAdapt(delta, numPoints int, first bool) int {
	if first {
		delta /= punyDamp
	} else {
		delta /= 2
	}
	delta += delta / numPoints
	k := 0
	for delta > (punyBase-punyTMin)*punyTMax/2 {
		delta /= punyBase - punyTMin
		k += punyBase
	}
	return k + (punyBase-punyTMin+1)*delta/(delta+punySkew)
}

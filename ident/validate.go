package ident

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrUnsafeHost is wrapped by the errors of CheckHost.
var ErrUnsafeHost = errors.New("host refused")

// CheckHost refuses hosts that Addressable normalizes without complaint but
// that no one should queue: a host holding a control character (also when
// percent-encoded, as "ex%0D%0Aample.com") or an invisible formatting
// character (Unicode category Cf: zero-width space and joiners, bidi
// controls, the byte order mark, the soft hyphen), whether typed, encoded or
// given as Punycode — "exa\u200bmple.com" becomes "xn--example-2z6c.com",
// which a browser shows as "example.com"; an empty label ("a..b.com"); a
// bare "xn--" label; and a port over 65535.
//
// It only judges a URL Parse returned; it never changes what Parse and
// Normalize produce, so idents stay those of the Ruby implementation. Other
// hosts outside strict IDNA rules ("a-b_c.example.com", labels starting
// with a digit or a hyphen) stay accepted, as upstream accepted them.
func CheckHost(u *URL) error {
	if u.Port != "" {
		if n, err := strconv.Atoi(u.Port); err != nil || n > 65535 {
			return fmt.Errorf("%w: port %s is over 65535", ErrUnsafeHost, u.Port)
		}
	}
	h := u.Host
	if h == "" || h[0] == '[' {
		return nil // no host, or an IP literal (validated by Parse)
	}
	if err := checkRunes(unencode(h, false)); err != nil {
		return err
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return fmt.Errorf("%w: the host %s has an empty label", ErrUnsafeHost, h)
		}
		lower := strings.ToLower(label)
		if !strings.HasPrefix(lower, "xn--") {
			continue
		}
		if lower == "xn--" {
			return fmt.Errorf("%w: the host %s has a bare \"xn--\" label", ErrUnsafeHost, h)
		}
		// A label that is not valid Punycode is left alone, as
		// Addressable leaves it; one that decodes is checked like a
		// typed one.
		if dec, err := punycodeDecode(unencode(lower[4:], false)); err == nil {
			if err := checkRunes(dec); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRunes refuses control and format characters in a decoded host.
func checkRunes(s string) error {
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			// Invalid UTF-8 was refused by Parse; a literal U+FFFD
			// is an ordinary (if odd) character.
		case unicode.Is(unicode.Cc, r):
			return fmt.Errorf("%w: the host contains a control character (%U)", ErrUnsafeHost, r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%w: the host contains an invisible formatting character (%U)", ErrUnsafeHost, r)
		}
	}
	return nil
}

// punycodeDecode is the RFC 3492 decoder, for checking what an "xn--"
// label stands for (the encoder above is the one normalization uses).
func punycodeDecode(s string) (string, error) {
	bad := errors.New("invalid Punycode")
	var out []rune
	if i := strings.LastIndexByte(s, '-'); i >= 0 {
		for _, c := range []byte(s[:i]) {
			if c >= 0x80 {
				return "", bad
			}
			out = append(out, rune(c))
		}
		s = s[i+1:]
	}
	n, bias, i := rune(punyInitialN), punyInitialBias, 0
	for pos := 0; pos < len(s); {
		oldi, w := i, 1
		for k := punyBase; ; k += punyBase {
			if pos >= len(s) {
				return "", bad
			}
			c := s[pos]
			pos++
			var digit int
			switch {
			case c >= 'a' && c <= 'z':
				digit = int(c - 'a')
			case c >= 'A' && c <= 'Z':
				digit = int(c - 'A')
			case c >= '0' && c <= '9':
				digit = int(c-'0') + 26
			default:
				return "", bad
			}
			if digit > (1<<31-1-i)/w {
				return "", bad
			}
			i += digit * w
			t := punyThreshold(k, bias)
			if digit < t {
				break
			}
			if w > (1<<31-1)/(punyBase-t) {
				return "", bad
			}
			w *= punyBase - t
		}
		bias = punyAdapt(i-oldi, len(out)+1, oldi == 0)
		n += rune(i / (len(out) + 1))
		if n > unicode.MaxRune {
			return "", bad
		}
		i %= len(out) + 1
		out = append(out[:i], append([]rune{n}, out[i:]...)...)
		i++
	}
	return string(out), nil
}

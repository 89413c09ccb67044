package web

import (
	"strconv"
	"strings"
)

// Media types the API serves.
const (
	typeJSON = "application/json"
	typeHTML = "text/html"
	typeText = "text/plain"
	typeAtom = "application/atom+xml"
	typeRSS  = "application/rss+xml"
)

// negotiate picks the offer the Accept header prefers, as upstream's
// Webmachine did: the highest q wins, ties go to the earlier offer, a
// missing or empty header takes the first offer. It returns "" when the
// client accepts none of the offers (a 406). Malformed parts of the header
// (no slash, a q that is not a number) are ignored rather than refused, as
// browsers and tools send odd headers.
func negotiate(accept string, offers ...string) string {
	accept = strings.TrimSpace(accept)
	if accept == "" {
		return offers[0]
	}
	ranges := parseAccept(accept)
	if len(ranges) == 0 {
		return offers[0]
	}
	best, bestQ := "", 0.0
	for _, o := range offers {
		q := quality(ranges, o)
		if q > bestQ {
			best, bestQ = o, q
		}
	}
	return best
}

type mediaRange struct {
	typ, sub string
	q        float64
}

// maxAcceptRanges bounds the work one header can cause.
const maxAcceptRanges = 64

func parseAccept(h string) []mediaRange {
	var out []mediaRange
	for part := range strings.SplitSeq(h, ",") {
		if len(out) == maxAcceptRanges {
			break
		}
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		if mt == "*" {
			mt = "*/*" // Java's HttpURLConnection sends a bare "*"
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		r := mediaRange{typ: typ, sub: sub, q: 1}
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q >= 0 && q <= 1 {
					r.q = q
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// quality is the q of the most specific range matching offer (0: none).
func quality(ranges []mediaRange, offer string) float64 {
	typ, sub, _ := strings.Cut(offer, "/")
	q, spec := 0.0, -1
	for _, r := range ranges {
		s := -1
		switch {
		case r.typ == typ && r.sub == sub:
			s = 2
		case r.typ == typ && r.sub == "*":
			s = 1
		case r.typ == "*" && r.sub == "*":
			s = 0
		}
		if s > spec {
			q, spec = r.q, s
		}
	}
	return q
}

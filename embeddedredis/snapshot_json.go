package embeddedredis

// The snapshot (snapshot.go): binary-safe JSON for keys and values.

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// encodeBinary switches an entry to base64 when one of its strings is not
// valid UTF-8, which encoding/json would replace by U+FFFD.
func encodeBinary(k *snapshotKey) {
	if allValidUTF8(k) {
		return
	}
	k.Encoding = "base64"
	mapStrings(k, func(s string) (string, error) {
		return base64.StdEncoding.EncodeToString([]byte(s)), nil
	})
}

// decodeBinary undoes encodeBinary.
func decodeBinary(k *snapshotKey) error {
	switch k.Encoding {
	case "":
		return nil
	case "base64":
		k.Encoding = ""
		return mapStrings(k, func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		})
	}
	return fmt.Errorf("unknown encoding %q", k.Encoding)
}

func allValidUTF8(k *snapshotKey) bool {
	v := utf8.ValidString
	if !v(k.Key) || (k.String != nil && !v(*k.String)) {
		return false
	}
	for f, val := range k.Hash {
		if !v(f) || !v(val) {
			return false
		}
	}
	for _, l := range [][]string{k.List, k.Set} {
		for _, x := range l {
			if !v(x) {
				return false
			}
		}
	}
	for _, z := range k.ZSet {
		if !v(z.Member) {
			return false
		}
	}
	return true
}

// mapStrings replaces every string of an entry (except scores) with f's
// result, stopping at the first error.
func mapStrings(k *snapshotKey, f func(string) (string, error)) error {
	var err error
	g := func(s string) string {
		if err != nil {
			return s
		}
		var out string
		out, err = f(s)
		return out
	}
	k.Key = g(k.Key)
	if k.String != nil {
		v := g(*k.String)
		k.String = &v
	}
	if k.Hash != nil {
		h := make(map[string]string, len(k.Hash))
		for f, v := range k.Hash {
			h[g(f)] = g(v)
		}
		k.Hash = h
	}
	for i := range k.List {
		k.List[i] = g(k.List[i])
	}
	for i := range k.Set {
		k.Set[i] = g(k.Set[i])
	}
	for i := range k.ZSet {
		k.ZSet[i].Member = g(k.ZSet[i].Member)
	}
	return err
}

package config

import (
	"encoding"
	"reflect"
	"strings"
	"sync"
)

// knownKeys lists every key of the file, dotted ("reaper.threshold"), read
// from Config's toml tags.
var knownKeys = sync.OnceValue(func() []string {
	var keys []string
	text := reflect.TypeFor[encoding.TextUnmarshaler]()
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(text) {
				walk(ft, prefix+name+".")
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return keys
})

// suggestKey is the known key an unknown one most likely meant: the same
// name in another table ("redis.ignore_sets_dir": jobs.ignore_sets_dir),
// else the nearest by edit distance when it is near enough (a typo:
// "reaper.threshhold": reaper.threshold). "" when none is.
func suggestKey(unknown string) string {
	table, name := "", unknown
	if i := strings.LastIndexByte(unknown, '.'); i >= 0 {
		table, name = unknown[:i], unknown[i+1:]
	}
	var moved []string
	for _, k := range knownKeys() {
		if strings.HasSuffix(k, "."+name) || k == name {
			moved = append(moved, k)
		}
	}
	if len(moved) == 1 {
		return moved[0]
	}
	best, bestD := "", -1
	for _, k := range knownKeys() {
		kt := ""
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			kt = k[:i]
		}
		if kt != table {
			continue
		}
		if d := editDistance(k, unknown); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD >= 0 && bestD <= max(2, len(name)/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

package store

// FencedSourcesForTest lists the sources of the fenced scripts.
func FencedSourcesForTest() []string { return append([]string(nil), fencedList...) }

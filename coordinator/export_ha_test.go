package coordinator

// FencedSourcesForTest lists the sources of the fenced scripts.
func FencedSourcesForTest() []string {
	var out []string
	for _, f := range fencedList {
		out = append(out, f.src)
	}
	return out
}

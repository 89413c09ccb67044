package store

// FencedSourcesForTest lists the sources of the fenced scripts.
func FencedSourcesForTest() []string { return append([]string(nil), fencedList...) }

// AnalyzeCommitScriptForTest is scripts/analyze_commit.lua, run directly.
var AnalyzeCommitScriptForTest = analyzeCommitScript

// SetTakeIDCapForTest lowers how many take_ids a key's takes remember.
func (s *Store) SetTakeIDCapForTest(n int) { s.takeIDCap = n }

// SetBeforePauseScriptForTest runs f between listing a pause's or
// resume's queues and its script.
func (s *Store) SetBeforePauseScriptForTest(f func()) { s.beforePauseScript = f }

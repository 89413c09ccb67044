package coordinator

import "github.com/archiveteam/archivebot-go/coordinator/store"

// CountLogEntries counts log entries exactly as the analyzer counts those
// it reads from Redis (countEntries): the pipeline API counts the entries
// it receives in process with it, so both sources give the same r1xx …
// r5xx, runk and error_count. It returns the counts and how many entries
// were invalid (not JSON objects).
func CountLogEntries(zs []store.LogEntry) (store.LogCounts, int64) {
	b := countEntries(zs)
	return b.counts, b.invalid
}

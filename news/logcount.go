package news

import "github.com/archiveteam/archivebot-go/record"

// BatchCount is record.BatchCount. Deprecated: use it.
type BatchCount = record.BatchCount

// CountLogEntries is record.CountLogEntries. Deprecated: use it.
func CountLogEntries(entries []record.LogEntry) (record.LogCounts, int64) {
	return record.CountLogEntries(entries)
}

// CountEntries is record.CountEntries. Deprecated: use it.
func CountEntries(zs []record.LogEntry) BatchCount { return record.CountEntries(zs) }

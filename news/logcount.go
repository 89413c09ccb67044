package news

import "github.com/archiveteam/archivebot-go/store"

// BatchCount is what one batch of log entries adds up to.
type BatchCount struct {
	Entries, Invalid int64
	Oversized        int64
	Counts           store.LogCounts
	Last             float64 // score of the last entry
}

// CountLogEntries adds up what entries (decoded once by NewLogEntry, from
// Redis or in process) add to a job's counters, as the analyzer counts
// them: the invalid (and oversized) ones are returned apart.
func CountLogEntries(entries []store.LogEntry) (counts store.LogCounts, invalid int64) {
	b := CountEntries(entries)
	return b.Counts, b.Invalid
}

// CountEntries counts a batch of log entries (decoded once, see
// LogEntry). Entries that are not JSON, or only a JSON scalar, are
// invalid, and so are oversized ones (counted apart too); for each download
// entry the bucket of its response_code (a number, or a numeric string as
// Ruby's to_i read it) is counted, r1xx … r5xx, else runk, and error_count
// when is_error is true.
func CountEntries(zs []store.LogEntry) BatchCount {
	var b BatchCount
	for _, e := range zs {
		b.Entries++
		b.Last = e.Score
		switch e.Kind {
		case store.EntryOversized:
			b.Invalid++
			b.Oversized++
			continue
		case store.EntryInvalid:
			b.Invalid++
			continue
		case store.EntryArray:
			continue
		}
		if e.Type != "download" {
			continue
		}
		code := e.Code
		switch {
		case code >= 100 && code < 200:
			b.Counts.R1xx++
		case code >= 200 && code < 300:
			b.Counts.R2xx++
		case code >= 300 && code < 400:
			b.Counts.R3xx++
		case code >= 400 && code < 500:
			b.Counts.R4xx++
		case code >= 500 && code < 600:
			b.Counts.R5xx++
		default:
			b.Counts.Runk++
		}
		if e.IsError {
			b.Counts.Errors++
		}
	}
	return b
}

package record

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The one log-entry type of the node (doc/protocol.md, Job logs). A
// pipeline's log entry is decoded once, where it enters the node (a read
// of IDENT_log, or an entry handed over in process), and the analyzer and
// the live stream both use what was decoded. What pipelines write is
// untrusted: an entry larger than MaxLogEntryBytes is never loaded whole
// (the store's read returns its size alone, OversizedLogEntry) and is
// counted as oversized.

// MaxLogEntryBytes is the largest log entry the node reads and keeps.
// Upstream's entries are a few hundred bytes; a stdout line of a few KiB
// is already unusual.
const MaxLogEntryBytes = 64 << 10

// EntryKind tells what a log entry's document is.
type EntryKind uint8

// Entry kinds.
const (
	// EntryObject is a JSON object: the only kind the stream sends.
	EntryObject EntryKind = iota
	// EntryArray is a JSON array: valid, but nothing to count or show.
	EntryArray
	// EntryInvalid is not JSON, or a bare JSON scalar.
	EntryInvalid
	// EntryOversized was larger than MaxLogEntryBytes: Doc is empty and
	// Size is its length.
	EntryOversized
)

// LogEntry is one entry of a job's log: the JSON document, its score, and
// the fields the node reads from it, decoded once by NewLogEntry.
type LogEntry struct {
	// Doc is the document as stored, surrounding space trimmed ("" when
	// oversized).
	Doc   string
	Score float64
	Kind  EntryKind
	// Type is the entry's "type" when it is a string.
	Type string
	// IsError: "is_error" is true (or "true").
	IsError bool
	// Code is "response_code" as a number (or a numeric string, as
	// Ruby's to_i read it); -1 when absent or not a number.
	Code float64
	// Size is the document's length in bytes as stored.
	Size int
}

// entryHead are the parts of a log entry the node reads. They are decoded
// as any: a field of an unexpected type must not make the entry
// unreadable.
type entryHead struct {
	Type         any `json:"type"`
	ResponseCode any `json:"response_code"`
	IsError      any `json:"is_error"`
}

// NewLogEntry decodes doc, the entry scored score. A doc longer than
// MaxLogEntryBytes is not decoded nor kept: it is EntryOversized.
func NewLogEntry(doc string, score float64) LogEntry {
	e := LogEntry{Score: score, Size: len(doc), Code: -1}
	if len(doc) > MaxLogEntryBytes {
		e.Kind = EntryOversized
		return e
	}
	s := strings.TrimSpace(doc)
	e.Doc = s
	switch {
	case s == "" || (s[0] != '{' && s[0] != '['):
		e.Kind = EntryInvalid
	case s[0] == '[':
		e.Kind = EntryArray
		if !json.Valid([]byte(s)) {
			e.Kind = EntryInvalid
		}
	default:
		var h entryHead
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			e.Kind = EntryInvalid
			break
		}
		e.Kind = EntryObject
		e.Type, _ = h.Type.(string)
		e.IsError = h.IsError == true || h.IsError == "true"
		switch v := h.ResponseCode.(type) {
		case float64:
			e.Code = v
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				e.Code = f
			}
		}
	}
	return e
}

// OversizedLogEntry is an entry the read did not load: only its size.
func OversizedLogEntry(size int, score float64) LogEntry {
	return LogEntry{Score: score, Size: size, Code: -1, Kind: EntryOversized}
}

// LogCounts are the response counters the analyzer keeps on a job (r1xx …
// runk and error_count of the record).
type LogCounts struct {
	R1xx, R2xx, R3xx, R4xx, R5xx, Runk int64
	// Errors counts download entries with is_error.
	Errors int64
}

// Add adds o to c.
func (c *LogCounts) Add(o LogCounts) {
	c.R1xx += o.R1xx
	c.R2xx += o.R2xx
	c.R3xx += o.R3xx
	c.R4xx += o.R4xx
	c.R5xx += o.R5xx
	c.Runk += o.Runk
	c.Errors += o.Errors
}

// BatchCount is what one batch of log entries adds up to.
type BatchCount struct {
	Entries, Invalid int64
	Oversized        int64
	Counts           LogCounts
	Last             float64 // score of the last entry
}

// CountLogEntries adds up what entries (decoded once by NewLogEntry, from
// Redis or in process) add to a job's counters, as the analyzer counts
// them: the invalid (and oversized) ones are returned apart.
func CountLogEntries(entries []LogEntry) (counts LogCounts, invalid int64) {
	b := CountEntries(entries)
	return b.Counts, b.Invalid
}

// CountEntries counts a batch of log entries (decoded once, see
// LogEntry). Entries that are not JSON, or only a JSON scalar, are
// invalid, and so are oversized ones (counted apart too); for each download
// entry the bucket of its response_code (a number, or a numeric string as
// Ruby's to_i read it) is counted, r1xx … r5xx, else runk, and error_count
// when is_error is true.
func CountEntries(zs []LogEntry) BatchCount {
	var b BatchCount
	for _, e := range zs {
		b.Entries++
		b.Last = e.Score
		switch e.Kind {
		case EntryOversized:
			b.Invalid++
			b.Oversized++
			continue
		case EntryInvalid:
			b.Invalid++
			continue
		case EntryArray:
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

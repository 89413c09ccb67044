package store

import "github.com/archiveteam/archivebot-go/record"

// The job record, the failure record and the log entries are package
// record's (a leaf every layer may import). These names keep the code
// that still spells them store.X compiling while it moves to record.X;
// they go once nothing uses them.

type (
	Job       = record.Job       // Deprecated: use record.Job.
	Text      = record.Text      // Deprecated: use record.Text.
	Number    = record.Number    // Deprecated: use record.Number.
	JobState  = record.State     // Deprecated: use record.State.
	Failure   = record.Failure   // Deprecated: use record.Failure.
	LogCounts = record.LogCounts // Deprecated: use record.LogCounts.
	LogEntry  = record.LogEntry  // Deprecated: use record.LogEntry.
	EntryKind = record.EntryKind // Deprecated: use record.EntryKind.
)

// Deprecated: use record's.
const (
	StateQueued      = record.StateQueued
	StateRunning     = record.StateRunning
	StateFinished    = record.StateFinished
	StateAborted     = record.StateAborted
	StateFailed      = record.StateFailed
	EntryObject      = record.EntryObject
	EntryArray       = record.EntryArray
	EntryInvalid     = record.EntryInvalid
	EntryOversized   = record.EntryOversized
	MaxLogEntryBytes = record.MaxLogEntryBytes
)

// DecodeJob is record.DecodeJob. Deprecated: use it.
func DecodeJob(ident string, fields map[string]string) *Job { return record.DecodeJob(ident, fields) }

// Speaking is record.Speaking. Deprecated: use it.
func Speaking(j *Job, fail *Failure) (*Job, *Failure) { return record.Speaking(j, fail) }

// StateOf is record.StateOf. Deprecated: use it.
func StateOf(j *Job, fail *Failure, working bool) JobState { return record.StateOf(j, fail, working) }

// NewLogEntry is record.NewLogEntry. Deprecated: use it.
func NewLogEntry(doc string, score float64) LogEntry { return record.NewLogEntry(doc, score) }

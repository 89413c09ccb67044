// Package record holds the job record as the node reads it: the hash
// IDENT decoded once (Job, DecodeJob), the failure record (Failure), the
// one rule of a job's state (State, StateOf, Speaking), and a job's log
// entries and the counts they add up to (LogEntry, LogCounts,
// CountEntries). See doc/protocol.md, Job record and Job logs.
//
// It is a leaf: it imports only the standard library, so the store that
// reads and writes these records, the services and the front ends share
// them without importing each other (river keeps its rivertype the same
// way).
package record

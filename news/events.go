package news

import (
	"encoding/json"

	"github.com/archiveteam/archivebot-go/record"
)

// JobEvent is one change of a job, as the bot publishes it on
// ChannelJobEvents (see doc/protocol.md, Live stream):
// {"ts":…,"ident":"…","event":"queued|settings|…","by":"…","detail":{…}}.
type JobEvent struct {
	TS     float64         `json:"ts"`
	Ident  string          `json:"ident"`
	Event  string          `json:"event"`
	By     string          `json:"by,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// StreamSink receives what the firehose reads. Both methods are called
// from the firehose's goroutines and must not block for long.
type StreamSink interface {
	// StreamLog gets a job's new log entries, in score order, with its
	// record as read just before them.
	StreamLog(job *record.Job, entries []record.LogEntry)
	// StreamEvent gets a job event; a lifecycle event (queued, started,
	// finished, aborted, failed, expired) comes once per run of a job.
	StreamEvent(ev JobEvent)
}

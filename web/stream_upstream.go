package web

// Upstream's live-stream framing (/stream): one text frame per entry of a
// type its dashboard renders, merged with "job_data".

import (
	"bytes"
)

// upstreamTypes are the entry types upstream's dashboard.js renders (it
// asserts on any other).
func upstreamType(t string) bool { return t == "download" || t == "ignore" || t == "stdout" }

// upstreamFrame is entry merged with "job_data", as /logs/recent merges
// it (a job_data the entry already had is replaced).
func upstreamFrame(doc, jobData []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(doc) + len(jobData) + 16)
	appendWithJobData(&b, doc, jobData)
	return b.Bytes()
}

package web

// Our live-stream protocol's framing and messages (/stream?v=2): batch
// frames, event frames, the client's subscription messages.

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/archiveteam/archivebot-go/news"
	"github.com/gorilla/websocket"
)

// eventFrame: {"seq":S,"n":0,"t":MS,"events":[…]}.
func eventFrame(seq uint64, now time.Time, events []news.JobEvent) []byte {
	var b bytes.Buffer
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.FormatUint(seq, 10))
	b.WriteString(`,"n":0,"t":`)
	b.WriteString(strconv.FormatInt(now.UnixMilli(), 10))
	b.WriteString(`,"events":`)
	ev, _ := marshalCompact(events)
	b.Write(ev)
	b.WriteByte('}')
	return b.Bytes()
}

// logFrame: {"seq":S,"n":N,"t":MS,"entries":[{"ident":…,…entry}],
// "jobs":{IDENT:{raw hash}}}; t is when the oldest entry was read.
func logFrame(seq uint64, entries []streamEntry, idx []int) ([]byte, time.Time) {
	oldest := entries[idx[0]].at
	for _, i := range idx {
		if entries[i].at.Before(oldest) {
			oldest = entries[i].at
		}
	}
	// Sized up front: a frame is held until sent, and a buffer grown by
	// doubling would hold up to twice its bytes (and leave the smaller
	// ones as garbage).
	size := 64
	seen := map[string]bool{}
	for _, i := range idx {
		e := entries[i]
		size += len(e.doc) + len(e.job.ident) + 48
		if !seen[e.job.ident] {
			seen[e.job.ident] = true
			e.job.encode()
			size += len(e.job.ident) + len(e.job.raw) + 8
		}
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"seq":`)
	b.WriteString(strconv.FormatUint(seq, 10))
	b.WriteString(`,"n":`)
	b.WriteString(strconv.Itoa(len(idx)))
	b.WriteString(`,"t":`)
	b.WriteString(strconv.FormatInt(oldest.UnixMilli(), 10))
	b.WriteString(`,"entries":[`)
	jobs := map[string]*jobRef{}
	var order []string
	for k, i := range idx {
		e := entries[i]
		if k > 0 {
			b.WriteByte(',')
		}
		id, _ := marshalCompact(e.job.ident)
		b.WriteString(`{"ident":`)
		b.Write(id)
		inner := bytes.TrimSpace(e.doc[1 : len(e.doc)-1])
		if len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner)
		}
		if !math.IsInf(e.score, 0) && !math.IsNaN(e.score) {
			// Last, so it wins over a "score" the pipeline wrote.
			b.WriteString(`,"score":`)
			b.WriteString(strconv.FormatFloat(e.score, 'f', -1, 64))
		}
		b.WriteByte('}')
		if _, ok := jobs[e.job.ident]; !ok {
			order = append(order, e.job.ident)
		}
		jobs[e.job.ident] = e.job // the latest hash read wins
	}
	b.WriteString(`],"jobs":{`)
	for k, id := range order {
		if k > 0 {
			b.WriteByte(',')
		}
		j := jobs[id]
		j.encode()
		name, _ := marshalCompact(id)
		b.Write(name)
		b.WriteByte(':')
		b.Write(j.raw)
	}
	b.WriteString(`}}`)
	return b.Bytes(), oldest
}

// clientMsg is what a client of our protocol may send:
// {"subscribe":["IDENT",…] or "all"} and/or {"errors_only":true}.
type clientMsg struct {
	Subscribe  json.RawMessage `json:"subscribe"`
	ErrorsOnly *bool           `json:"errors_only"`
}

// handleMsg applies one client message of our protocol: a new filter
// (answered "subscribed") or, for anything else, an "error" notice that
// changes nothing.
func (c *client) handleMsg(msg []byte) {
	var m clientMsg
	if err := json.Unmarshal(msg, &m); err != nil {
		c.sendError("not a JSON object: " + err.Error())
		return
	}
	_, all, subs, errorsOnly := c.filter()
	if m.Subscribe != nil {
		var list []string
		var word string
		switch {
		case json.Unmarshal(m.Subscribe, &word) == nil && (word == "all" || word == "*"):
			all, subs = true, nil
		case json.Unmarshal(m.Subscribe, &list) == nil && len(list) <= 10000:
			all, subs = false, list
		default:
			c.sendError(`"subscribe" must be "all" or a list of at most 10000 idents`)
			return
		}
	}
	if m.ErrorsOnly != nil {
		errorsOnly = *m.ErrorsOnly
	}
	c.setFilter(all, subs, errorsOnly)
	c.sendNotice("subscribed", c.filterDoc())
}

// sendError queues an error notice for the client (never dropped).
func (c *client) sendError(text string) { c.sendNotice("error", text) }

// sendNotice queues {"seq":0,"n":0,KEY:VALUE} for this client alone; like
// an event it is never dropped.
func (c *client) sendNotice(key string, value any) {
	b, _ := marshalCompact(map[string]any{"seq": 0, "n": 0, key: value})
	if pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b); err == nil {
		c.pushEvent(qframe{pm: pm, event: true, size: len(b), note: key})
	}
}

// filterDoc is the client's filter as told to it.
func (c *client) filterDoc() map[string]any {
	_, all, subs, errorsOnly := c.filter()
	doc := map[string]any{"errors_only": errorsOnly}
	if all {
		doc["subscribe"] = "all"
	} else {
		doc["subscribe"] = append([]string{}, subs...)
	}
	return doc
}

package bridge

// The handlers of the Redis commands the bridge serves, one per command
// (dispatch in commands.go picks them).

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/pipelineapi/client"
	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
	"github.com/tidwall/redcon"
)

func (b *Bridge) client(c redcon.Conn, cs *connState, args []string) {
	if len(args) == 0 {
		wrongArgs(c, "client")
		return
	}
	switch strings.ToLower(args[0]) {
	case "setname":
		if len(args) != 2 {
			wrongArgs(c, "client|setname")
			return
		}
		cs.name = args[1]
		c.WriteString("OK")
	case "setinfo":
		if len(args) != 3 {
			wrongArgs(c, "client|setinfo")
			return
		}
		c.WriteString("OK")
	case "getname":
		if cs.name == "" {
			c.WriteNull()
		} else {
			c.WriteBulkString(cs.name)
		}
	case "id":
		c.WriteInt(1)
	default:
		b.refuse(c, "client "+strings.ToLower(args[0]), "only CLIENT SETNAME, SETINFO, GETNAME and ID")
	}
}

// hset: the pipeline report (HMSET pipeline:ID …), or the fields a
// pipeline writes on its job (started_at and pipeline_id after a take,
// which the node already wrote; warc_size).
func (b *Bridge) hset(c redcon.Conn, name string, args []string) {
	if len(args) < 3 || len(args)%2 == 0 {
		wrongArgs(c, name)
		return
	}
	key := args[0]
	fields := map[string]string{}
	for i := 1; i+1 < len(args); i += 2 {
		fields[args[i]] = args[i+1]
	}
	reply := func() {
		if name == "hmset" {
			c.WriteString("OK")
		} else {
			c.WriteInt(len(fields))
		}
	}
	if strings.HasPrefix(key, pipelinePrefix) {
		b.mu.Lock()
		b.pipelineID = key
		b.mu.Unlock()
		err := b.call("report", func(ctx context.Context) error {
			_, err := b.node.Report(ctx, fields)
			return err
		})
		if err != nil {
			c.WriteError(nodeReply(err))
			return
		}
		reply()
		return
	}
	js := b.heldJob(c, key)
	if js == nil {
		return
	}
	if b.drained(js) {
		reply() // rerouted: the node takes nothing more for it
		return
	}
	set := map[string]string{}
	for k, v := range fields {
		if k != "started_at" && k != "pipeline_id" {
			set[k] = v
		}
	}
	if len(set) > 0 {
		if !b.nodeCall(c, "update", js.ident, b.update(js.ident, wire.UpdateRequest{Set: set})) {
			return
		}
	}
	b.mu.Lock()
	js.rec = nil
	b.mu.Unlock()
	reply()
}

// del: the pipeline unregistering (DEL pipeline:ID).
func (b *Bridge) del(c redcon.Conn, args []string) {
	if len(args) != 1 || !strings.HasPrefix(args[0], pipelinePrefix) {
		b.refuse(c, "del", "only the pipeline's own record")
		return
	}
	err := b.call("unregister", func(ctx context.Context) error {
		_, err := b.node.Unregister(ctx)
		return err
	})
	if err != nil {
		c.WriteError(nodeReply(err))
		return
	}
	c.WriteInt(1)
}

// scan: SCAN cursor MATCH pending:* [COUNT n] (scan_iter of the named
// queues). The node chooses among named queues for the pipeline (by its
// key name), so the answer is always an empty last page; it also marks a
// new take cycle.
func (b *Bridge) scan(c redcon.Conn, cs *connState, args []string) {
	if len(args) < 1 {
		wrongArgs(c, "scan")
		return
	}
	match := ""
	for i := 1; i < len(args); i++ {
		switch strings.ToLower(args[i]) {
		case "match", "count", "type":
			if i+1 >= len(args) {
				c.WriteError("ERR syntax error")
				return
			}
			if strings.ToLower(args[i]) == "match" {
				match = args[i+1]
			}
			i++
		default:
			c.WriteError("ERR syntax error")
			return
		}
	}
	if match != pendingPrefix+"*" {
		b.refuse(c, "scan", "only SCAN … MATCH pending:* (the pipeline's named queues)")
		return
	}
	if args[0] == "0" {
		cs.scanned, cs.taken = true, false
	}
	c.WriteArray(2)
	c.WriteBulkString("0")
	c.WriteArray(0)
}

// take: RPOPLPUSH QUEUE working. Until the pipeline has shown it takes
// `pending` (so it is not AO-only), each queue is asked for on its own;
// after that the first RPOPLPUSH of a take cycle lets the node choose as
// upstream's candidate_queues does (named queues first, by key name), and
// the rest of the cycle answers nil.
func (b *Bridge) take(c redcon.Conn, cs *connState, args []string) {
	if len(args) != 2 {
		wrongArgs(c, "rpoplpush")
		return
	}
	q, dst := args[0], args[1]
	if dst != keyWorking || !(q == queuePending || q == queuePendingAO || q == queuePendingLarge || strings.HasPrefix(q, pendingPrefix)) {
		b.refuse(c, "rpoplpush", "only RPOPLPUSH pending… working")
		return
	}
	b.mu.Lock()
	if q == queuePending {
		b.notAOOnly = true
	}
	if q == queuePendingLarge {
		b.large = true
	}
	choose, large := b.notAOOnly, b.large
	b.mu.Unlock()
	var req wire.TakeRequest
	if choose {
		if cs.taken {
			c.WriteNull()
			return
		}
		req = wire.TakeRequest{Large: large}
		cs.taken = true
	} else {
		req = wire.TakeRequest{Queues: []string{q}}
	}
	// One take_id for every try of this take: a try whose answer was lost
	// is answered again on the next (doc/pipeline-api.md, A lost answer).
	req.TakeID = client.NewTakeID()
	job, err := callFor(b, "take", func(ctx context.Context) (*wire.Job, error) { return b.node.Take(ctx, req) })
	if err != nil {
		c.WriteError(nodeReply(err))
		return
	}
	if job == nil {
		c.WriteNull()
		return
	}
	b.mu.Lock()
	js := &jobState{ident: job.Ident, rec: job, recAt: time.Now(), last: job, counter: map[string]int64{}}
	js.age, _ = strconv.ParseInt(job.Fields["settings_age"], 10, 64)
	b.jobs[job.Ident] = js
	b.mu.Unlock()
	b.log.Info("bridge: job taken", "ident", job.Ident, "queue", job.Queue)
	c.WriteBulkString(job.Ident)
}

// smembers: the job's ignore set, by the key its record names.
func (b *Bridge) smembers(c redcon.Conn, key string) {
	ident, ok := strings.CutSuffix(key, "_ignores")
	if !ok {
		c.WriteError(errNotHeld(key))
		return
	}
	rec := b.heldRecord(c, ident)
	if rec == nil {
		return
	}
	if k := rec.Fields["ignore_patterns_set_key"]; k != "" && k != key {
		c.WriteError(errNotHeld(key))
		return
	}
	c.WriteArray(len(rec.Ignores))
	for _, p := range rec.Ignores {
		c.WriteBulkString(p)
	}
}

// hincrby outside a batch: the heartbeat, or a lone counter.
func (b *Bridge) hincrby(c redcon.Conn, args []string) {
	if len(args) != 3 {
		wrongArgs(c, "hincrby")
		return
	}
	n, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		c.WriteError("ERR value is not an integer or out of range")
		return
	}
	field := args[1]
	js := b.heldJob(c, args[0])
	if js == nil {
		return
	}
	if b.drained(js) {
		b.mu.Lock()
		js.counter[field] += n
		v := js.counter[field]
		b.mu.Unlock()
		c.WriteInt64(v)
		return
	}
	var req wire.UpdateRequest
	if field == "heartbeat" {
		req.Heartbeat = n
	} else {
		req.Incr = map[string]int64{field: n}
	}
	if !b.nodeCall(c, "update", js.ident, b.update(js.ident, req)) {
		return
	}
	b.mu.Lock()
	js.counter[field] += n
	v := js.counter[field]
	b.mu.Unlock()
	c.WriteInt64(v)
}

// eval: EVALSHA of the three known scripts (an unknown SHA gets NOSCRIPT,
// so redis-py falls back to SCRIPT LOAD, which the bridge refuses for any
// other script), or EVAL of their text.
func (b *Bridge) eval(c redcon.Conn, name string, args []string) {
	if len(args) < 2 {
		wrongArgs(c, name)
		return
	}
	var s script
	if name == "eval" {
		sha := sha1Hex([]byte(args[0]))
		if s = scriptBySHA(sha); s == scriptNone {
			b.refuse(c, "eval", "only upstream's pipeline scripts run (this one's sha1 is "+sha+")")
			return
		}
	} else if s = scriptBySHA(strings.ToLower(args[0])); s == scriptNone {
		b.count("noscript", 1)
		c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
		return
	}
	rest := args[1:]
	if e := scriptArgsError(s, rest); e != "" {
		c.WriteError(e)
		return
	}
	ident := rest[1]
	switch s {
	case scriptLog:
		cs, _ := c.Context().(*connState)
		b.enqueue(c, cs, "evalsha", append([]string{SHALog}, rest...))
		b.flush(c, cs)
		return
	case scriptMarkAborted:
		if js := b.draining(ident); js != nil {
			b.mu.Lock()
			js.drainAborted = true
			b.mu.Unlock()
			c.WriteNull()
			return
		}
		js := b.endJob(c, "abort", ident, b.node.Abort)
		if js == nil {
			return
		}
		b.mu.Lock()
		js.rec = nil
		b.mu.Unlock()
		c.WriteNull()
	case scriptMarkDone:
		if js := b.draining(ident); js != nil {
			b.mu.Lock()
			delete(b.jobs, js.ident)
			b.mu.Unlock()
			b.log.Info("bridge: rerouted job wound down", "ident", js.ident)
			c.WriteNull()
			return
		}
		js := b.endJob(c, "done", ident, b.node.Done)
		if js == nil {
			return
		}
		b.mu.Lock()
		delete(b.jobs, js.ident)
		b.mu.Unlock()
		b.log.Info("bridge: job done", "ident", js.ident)
		c.WriteNull()
	}
}

// endJob has the node end the held job ident through end (its Abort or
// Done, named what) and returns the job; nil when the job is not held or
// the call failed, with the reply written.
func (b *Bridge) endJob(c redcon.Conn, what, ident string, end func(context.Context, string) (wire.DoneResponse, error)) *jobState {
	js := b.heldJob(c, ident)
	if js == nil || !b.nodeCall(c, what, js.ident, func(ctx context.Context) error {
		_, err := end(ctx, js.ident)
		return err
	}) {
		return nil
	}
	return js
}

func (b *Bridge) script(c redcon.Conn, args []string) {
	if len(args) == 0 {
		wrongArgs(c, "script")
		return
	}
	switch strings.ToLower(args[0]) {
	case "exists":
		c.WriteArray(len(args) - 1)
		for _, sha := range args[1:] {
			if scriptBySHA(strings.ToLower(sha)) != scriptNone {
				c.WriteInt(1)
			} else {
				c.WriteInt(0)
			}
		}
	case "load":
		if len(args) != 2 {
			wrongArgs(c, "script|load")
			return
		}
		sha := sha1Hex([]byte(args[1]))
		if scriptBySHA(sha) == scriptNone {
			b.refuse(c, "script load", "only upstream's pipeline scripts run (this one's sha1 is "+sha+")")
			return
		}
		c.WriteBulkString(sha)
	default:
		b.refuse(c, "script "+strings.ToLower(args[0]), "only SCRIPT EXISTS and SCRIPT LOAD")
	}
}

// heldJob returns the job when this pipeline holds it; otherwise it writes
// why not as the Redis error and returns nil.
func (b *Bridge) heldJob(c redcon.Conn, ident string) *jobState {
	js, reply := b.held(ident)
	if reply != "" {
		c.WriteError(reply)
		return nil
	}
	return js
}

// heldRecord is heldJob's record (cached for a moment); nil when it wrote
// an error.
func (b *Bridge) heldRecord(c redcon.Conn, ident string) *wire.Job {
	js := b.heldJob(c, ident)
	if js == nil {
		return nil
	}
	rec, reply := b.record(js)
	if reply != "" {
		c.WriteError(reply)
		return nil
	}
	return rec
}

// update is the node call that sends req for ident.
func (b *Bridge) update(ident string, req wire.UpdateRequest) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := b.node.Update(ctx, ident, req)
		return err
	}
}

// nodeCall runs op (b.call: retried while the failure is transient) for
// the held job ident. When it fails it forgets a job the node no longer
// gives this pipeline, writes the node's refusal as the Redis error and
// returns false.
func (b *Bridge) nodeCall(c redcon.Conn, what, ident string, op func(context.Context) error) bool {
	if err := b.call(what, op); err != nil {
		b.releaseIfNotHeld(ident, err)
		c.WriteError(nodeReply(err))
		return false
	}
	return true
}

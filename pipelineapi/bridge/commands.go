package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/archiveteam/archivebot-go/pipelineapi/wire"
)

// connState is one pipeline connection's state.
type connState struct {
	// scanned: a SCAN began this take cycle; taken: the cycle's take was
	// asked of the node already (later RPOPLPUSHes of it answer nil).
	scanned, taken bool
	// batch holds the log entries and counter increments of a pipelined
	// batch, sent as one update per job when the batch ends.
	batch   map[string]*wire.UpdateRequest
	order   []string // idents in batch order
	replies []func(redcon.Conn, map[string]string)
	name    string
}

// refusedCommands are refused outright, whatever their arguments.
var refusedCommands = map[string]bool{
	"flushall": true, "flushdb": true, "keys": true, "config": true, "debug": true,
	"shutdown": true, "monitor": true, "sync": true, "psync": true, "replicaof": true,
	"slaveof": true, "module": true, "function": true, "fcall": true, "fcall_ro": true,
	"eval_ro": true, "evalsha_ro": true, "multi": true, "exec": true, "migrate": true,
	"restore": true, "bgsave": true, "save": true, "acl": true,
}

// servedCommands are the commands the bridge answers (some only for some
// arguments), with the subcommands it names.
var servedCommands = map[string]bool{
	"ping": true, "echo": true, "auth": true, "select": true, "hello": true, "client": true, "quit": true,
	"reset": true, "hmset": true, "hset": true, "sadd": true, "srem": true, "del": true, "publish": true,
	"scan": true, "rpoplpush": true, "hgetall": true, "hget": true, "hmget": true, "smembers": true,
	"hincrby": true, "evalsha": true, "eval": true, "script": true, "subscribe": true, "unsubscribe": true,
	"script load": true, "script exists": true,
}

// statName is the name a refusal of command name is counted under: the
// name itself for a command the bridge knows, "other" for any other, so
// that the counters stay a fixed set whatever a client sends.
func statName(name string) string {
	if refusedCommands[name] || servedCommands[name] {
		return name
	}
	return "other"
}

// countRefused counts a refused command and logs it (at most every 10 s
// for each counter).
func (b *Bridge) countRefused(name, why string) {
	st := statName(name)
	b.count("refused:"+st, 1)
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	b.logLimited("refused:"+st, "bridge: command refused (one line per 10 s per command; Stats counts all)",
		"command", name, "why", why)
}

// refuse answers an error naming the command, logs and counts it.
func (b *Bridge) refuse(c redcon.Conn, name, why string) {
	b.countRefused(name, why)
	c.WriteError(fmt.Sprintf("ERR '%s' is refused by the ArchiveBot bridge: %s", strings.ToUpper(oneLine(name)), why))
}

func (b *Bridge) serveRESP(c redcon.Conn, cmd redcon.Command) {
	cs, _ := c.Context().(*connState)
	if cs == nil {
		cs = &connState{}
		c.SetContext(cs)
	}
	if len(cmd.Args) == 0 {
		return
	}
	name := strings.ToLower(string(cmd.Args[0]))
	args := make([]string, len(cmd.Args)-1)
	for i, a := range cmd.Args[1:] {
		args[i] = string(a)
	}
	if batchable(name, args) {
		b.enqueue(c, cs, name, args)
		if !nextBatchable(c) {
			b.flush(c, cs)
		}
		return
	}
	b.flush(c, cs)
	b.dispatch(c, cs, name, args)
}

// batchable: log script calls and counter increments, which upstream's log
// shipper pipelines.
func batchable(name string, args []string) bool {
	switch name {
	case "evalsha":
		return len(args) >= 1 && scriptBySHA(strings.ToLower(args[0])) == scriptLog
	case "hincrby":
		return len(args) == 3 && counterField(args[1])
	}
	return false
}

func counterField(f string) bool {
	switch f {
	case "bytes_downloaded", "items_downloaded", "items_queued":
		return true
	}
	return false
}

func nextBatchable(c redcon.Conn) bool {
	next := c.PeekPipeline()
	if len(next) == 0 || len(next[0].Args) == 0 {
		return false
	}
	args := make([]string, len(next[0].Args)-1)
	for i, a := range next[0].Args[1:] {
		args[i] = string(a)
	}
	return batchable(strings.ToLower(string(next[0].Args[0])), args)
}

// enqueue adds a log entry or counter to the batch; its reply is written
// when the batch is sent.
func (b *Bridge) enqueue(c redcon.Conn, cs *connState, name string, args []string) {
	var ident string
	var add func(*wire.UpdateRequest)
	var ok func(redcon.Conn)
	switch name {
	case "evalsha":
		if e := scriptArgsError(scriptLog, args[1:]); e != "" {
			cs.replies = append(cs.replies, func(c redcon.Conn, _ map[string]string) { c.WriteError(e) })
			return
		}
		ident = args[2]
		entry := args[3]
		if !json.Valid([]byte(entry)) {
			b.count("refused:log_not_json", 1)
			b.logLimited("log_not_json", "bridge: log entry is not JSON; not sent", "ident", oneLine(ident))
			cs.replies = append(cs.replies, func(c redcon.Conn, _ map[string]string) {
				c.WriteError("ERR log entry is not JSON; the node takes JSON entries only")
			})
			return
		}
		if len(entry) > wire.MaxLogEntry {
			b.count("refused:log_too_large", 1)
			cs.replies = append(cs.replies, func(c redcon.Conn, _ map[string]string) {
				c.WriteError(fmt.Sprintf("ERR log entry of %d bytes is over the node's limit of %d", len(entry), wire.MaxLogEntry))
			})
			return
		}
		add = func(u *wire.UpdateRequest) { u.Log = append(u.Log, json.RawMessage(entry)) }
		ok = func(c redcon.Conn) { c.WriteNull() }
	case "hincrby":
		ident = args[0]
		field := args[1]
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			cs.replies = append(cs.replies, func(c redcon.Conn, _ map[string]string) {
				c.WriteError("ERR value is not an integer or out of range")
			})
			return
		}
		add = func(u *wire.UpdateRequest) {
			if u.Incr == nil {
				u.Incr = map[string]int64{}
			}
			u.Incr[field] += n
		}
		ok = func(c redcon.Conn) {
			b.mu.Lock()
			var v int64
			if js := b.jobs[ident]; js != nil {
				js.counter[field] += n
				v = js.counter[field]
			}
			b.mu.Unlock()
			c.WriteInt64(v)
		}
	}
	if cs.batch == nil {
		cs.batch = map[string]*wire.UpdateRequest{}
	}
	u := cs.batch[ident]
	if u == nil {
		u = &wire.UpdateRequest{}
		cs.batch[ident] = u
		cs.order = append(cs.order, ident)
	}
	add(u)
	id := ident
	cs.replies = append(cs.replies, func(c redcon.Conn, failed map[string]string) {
		if e, bad := failed[id]; bad {
			c.WriteError(e)
			return
		}
		ok(c)
	})
}

// flush sends the batch, one update per job (split at the node's entry
// limit), then writes every reply of the batch in order.
func (b *Bridge) flush(c redcon.Conn, cs *connState) {
	if len(cs.replies) == 0 {
		return
	}
	failed := map[string]string{}
	for _, ident := range cs.order {
		u := cs.batch[ident]
		if _, reply := b.held(ident); reply != "" {
			failed[ident] = reply
			continue
		}
		for first := true; first || len(u.Log) > 0; first = false {
			part := wire.UpdateRequest{Incr: u.Incr}
			if len(u.Log) > wire.MaxLogEntries {
				part.Log, u.Log = u.Log[:wire.MaxLogEntries], u.Log[wire.MaxLogEntries:]
			} else {
				part.Log, u.Log = u.Log, nil
			}
			u.Incr = nil
			err := b.call("update", b.update(ident, part))
			if err != nil {
				b.releaseIfNotHeld(ident, err)
				failed[ident] = nodeReply(err)
				if len(part.Log) > 0 {
					b.count("log_entries_refused", int64(len(part.Log)+len(u.Log)))
				}
				break
			}
			b.count("log_entries", int64(len(part.Log)))
		}
	}
	for _, r := range cs.replies {
		r(c, failed)
	}
	cs.batch, cs.order, cs.replies = nil, nil, nil
}

// scriptArgsError checks EVALSHA/EVAL's numkeys and argument count for
// s: the error to answer, or "".
func scriptArgsError(s script, rest []string) string {
	wk, wa := s.wantArgs()
	if len(rest) < 1 {
		return "ERR wrong number of arguments for 'evalsha' command"
	}
	n, err := strconv.Atoi(rest[0])
	if err != nil || n != wk || len(rest)-1 != wk+wa {
		return fmt.Sprintf("ERR the %s script takes %d key(s) and %d argument(s)", s, wk, wa)
	}
	return ""
}

func wrongArgs(c redcon.Conn, name string) {
	c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", name))
}

// dispatch serves one command that is not batched.
func (b *Bridge) dispatch(c redcon.Conn, cs *connState, name string, args []string) {
	if refusedCommands[name] {
		b.refuse(c, name, "a pipeline never sends it")
		return
	}
	switch name {
	// --- connection handshake (redis-py 4.x and 5.x) ---
	case "ping":
		if len(args) == 0 {
			c.WriteString("PONG")
		} else {
			c.WriteBulkString(args[0])
		}
	case "echo":
		if len(args) != 1 {
			wrongArgs(c, name)
			return
		}
		c.WriteBulkString(args[0])
	case "auth":
		// The bridge listens on loopback and holds no password: a
		// REDIS_URL that still carries one keeps working.
		c.WriteString("OK")
	case "select":
		if len(args) != 1 {
			wrongArgs(c, name)
			return
		}
		if _, err := strconv.Atoi(args[0]); err != nil {
			c.WriteError("ERR value is not an integer or out of range")
			return
		}
		c.WriteString("OK")
	case "hello":
		if len(args) > 0 && args[0] != "2" {
			c.WriteError("NOPROTO sorry, this protocol version is not supported")
			return
		}
		c.WriteArray(14)
		for _, kv := range []string{"server", "redis", "version", "7.0.0", "proto"} {
			c.WriteBulkString(kv)
		}
		c.WriteInt(2)
		c.WriteBulkString("id")
		c.WriteInt(1)
		for _, kv := range []string{"mode", "standalone", "role", "master", "modules"} {
			c.WriteBulkString(kv)
		}
		c.WriteArray(0)
	case "client":
		b.client(c, cs, args)
	case "quit":
		c.WriteString("OK")
		c.Close()
	case "reset":
		*cs = connState{}
		c.WriteString("RESET")

	// --- the pipeline record ---
	case "hmset", "hset":
		b.hset(c, name, args)
	case "sadd", "srem":
		if len(args) < 2 || args[0] != keyPipelines {
			b.refuse(c, name, "only the pipeline's own member of `pipelines`")
			return
		}
		for _, m := range args[1:] {
			if !strings.HasPrefix(m, pipelinePrefix) {
				b.refuse(c, name, "only the pipeline's own member of `pipelines`")
				return
			}
		}
		c.WriteInt(len(args) - 1)
	case "del":
		b.del(c, args)
	case "publish":
		if len(args) != 2 {
			wrongArgs(c, name)
			return
		}
		switch {
		case args[0] == channelPipelineUpdates && strings.HasPrefix(args[1], pipelinePrefix),
			args[0] == channelUpdates:
			// The node publishes on its side when it applies the
			// report, log entry or finish this announces.
			c.WriteInt(0)
		default:
			b.refuse(c, name, "only `updates` and `archivebot:pipeline_updates`")
		}

	// --- taking a job ---
	case "scan":
		b.scan(c, cs, args)
	case "rpoplpush":
		b.take(c, cs, args)

	// --- job reads ---
	case "hgetall":
		if len(args) != 1 {
			wrongArgs(c, name)
			return
		}
		rec := b.heldRecord(c, args[0])
		if rec == nil {
			return
		}
		f := map[string]string{}
		for k, v := range rec.Fields {
			f[k] = v
		}
		if _, ok := f["pipeline_id"]; !ok && rec.PipelineID != "" {
			f["pipeline_id"] = rec.PipelineID
		}
		keys := sortedKeys(f)
		c.WriteArray(2 * len(keys))
		for _, k := range keys {
			c.WriteBulkString(k)
			c.WriteBulkString(f[k])
		}
	case "hget", "hmget":
		if len(args) < 2 || (name == "hget" && len(args) != 2) {
			wrongArgs(c, name)
			return
		}
		rec := b.heldRecord(c, args[0])
		if rec == nil {
			return
		}
		if name == "hmget" {
			c.WriteArray(len(args) - 1)
		}
		for _, f := range args[1:] {
			if v, ok := jobField(rec, f); ok {
				c.WriteBulkString(v)
			} else {
				c.WriteNull()
			}
		}
	case "smembers":
		if len(args) != 1 {
			wrongArgs(c, name)
			return
		}
		b.smembers(c, args[0])
	case "hincrby":
		b.hincrby(c, args)

	// --- scripts ---
	case "evalsha", "eval":
		b.eval(c, name, args)
	case "script":
		b.script(c, args)

	// --- pub/sub: the job's settings channel ---
	case "subscribe":
		b.subscribe(c, args)

	default:
		b.refuse(c, name, "the bridge serves only the commands an upstream pipeline sends")
	}
}

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
	js := &jobState{ident: job.Ident, rec: job, recAt: time.Now(), counter: map[string]int64{}}
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
		js := b.endJob(c, "abort", ident, b.node.Abort)
		if js == nil {
			return
		}
		b.mu.Lock()
		js.rec = nil
		b.mu.Unlock()
		c.WriteNull()
	case scriptMarkDone:
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

package bridge

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
		js, reply := b.held(ident)
		if reply != "" {
			failed[ident] = reply
			continue
		}
		if b.drained(js) {
			continue // rerouted: answered, and dropped
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

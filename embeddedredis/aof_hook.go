package embeddedredis

// The write-ahead log (aof.go): the command hook, which runs each command
// and logs the ones that change data, in the form that replays the same.

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
)

// connState is what the hook follows per client connection.
type connState struct {
	db    int
	multi bool
	queue [][]string // commands of an open MULTI worth logging
}

// commandClass says how the hook treats a command.
type commandClass int

const (
	notLogged commandClass = iota
	logged
	blockingPop
)

var commandClasses = func() map[string]commandClass {
	m := map[string]commandClass{}
	for _, c := range strings.Fields(`COPY DEL EXPIRE EXPIREAT MOVE PERSIST PEXPIRE PEXPIREAT RENAME
		RENAMENX RESTORE UNLINK SWAPDB FLUSHALL FLUSHDB GEOADD GEORADIUS GEORADIUSBYMEMBER HDEL HINCRBY
		HINCRBYFLOAT HMSET HSET HSETNX HEXPIRE HPERSIST HSETEX LINSERT LMPOP LPOP LPUSH LPUSHX LREM
		LSET LTRIM RPOP RPOPLPUSH RPUSH RPUSHX LMOVE SADD SDIFFSTORE SINTERSTORE SMOVE SPOP SREM
		SUNIONSTORE ZADD ZINCRBY ZINTERSTORE ZREM ZREMRANGEBYLEX ZREMRANGEBYRANK ZREMRANGEBYSCORE ZMPOP
		ZUNIONSTORE ZPOPMAX ZPOPMIN APPEND BITOP DECRBY DECR DELEX GETDEL GETEX GETSET INCRBYFLOAT
		INCRBY INCR MSET MSETNX PSETEX SETBIT SETEX SET SETNX SETRANGE EVAL EVALSHA`) {
		m[c] = logged
	}
	for _, c := range strings.Fields(`BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP`) {
		m[c] = blockingPop
	}
	return m
}()

// hook runs before miniredis dispatches a command.
func (s *Server) hook(p *server.Peer, cmd string, args ...string) bool {
	if _, ok := s.internal.Load(p); ok {
		return false
	}
	s.connMu.Lock()
	st := s.conns[p]
	s.connMu.Unlock()
	if st == nil {
		if p.Ctx != nil {
			// Not a client connection: miniredis runs each call a Lua
			// script makes on a peer of its own, with its state set.
			return s.scriptCall(p, cmd, args)
		}
		if s.loading.Load() {
			p.WriteError(msgLoading)
			return true
		}
		st = &connState{}
		s.connMu.Lock()
		s.conns[p] = st
		s.connMu.Unlock()
		p.OnDisconnect(func() {
			s.connMu.Lock()
			delete(s.conns, p)
			s.connMu.Unlock()
		})
	}
	switch cmd {
	case "MULTI":
		if st.multi {
			return false // refused: MULTI calls can not be nested
		}
		if raw, _, _ := s.run(p, cmd, args); raw == "+OK" {
			st.multi, st.queue = true, nil
		}
		return true
	case "DISCARD":
		st.multi, st.queue = false, nil
		return false
	case "EXEC":
		if !st.multi {
			return false
		}
		return s.exec(p, st, args)
	case "SELECT":
		if st.multi {
			st.queue = append(st.queue, withCmd(cmd, args))
			return false
		}
		if reply, _, ok := s.run(p, cmd, args); ok && reply == "+OK" {
			st.db, _ = strconv.Atoi(args[0])
		}
		return true
	case "SCRIPT":
		if len(args) == 2 && strings.EqualFold(args[0], "LOAD") {
			s.rememberScript(args[1])
		}
		return false
	}
	switch commandClasses[cmd] {
	case notLogged:
		return false
	case blockingPop:
		if st.multi {
			st.queue = append(st.queue, withCmd(cmd, args))
		} else if s.warnedBlocking.CompareAndSwap(false, true) {
			s.log.Warn("embedded redis: blocking pops (BLPOP and the like) are not logged; what they pop comes back if the process dies before the next snapshot", "command", cmd)
		}
		return false
	}
	if cmd == "EVAL" && len(args) > 0 {
		s.rememberScript(args[0])
	}
	if st.multi {
		st.queue = append(st.queue, withCmd(cmd, args))
		return false
	}

	s.orderMu.Lock()
	defer s.orderMu.Unlock()
	now := time.Now().UnixMilli()
	c, ok := s.logForm(now, withCmd(cmd, args))
	reply, errMsg, _ := s.run(p, cmd, args)
	if !worthLogging(cmd, errMsg) || (popCommands[cmd] && isNull(reply)) {
		return true
	}
	if !ok {
		// Cannot happen: miniredis only runs scripts it got through
		// EVAL or SCRIPT LOAD, which the hook or the replay saw.
		s.log.Error("embedded redis: a script ran that the log cannot record; it will be lost on a crash before the next snapshot", "sha", args[0])
		return true
	}
	if cmd == "SPOP" {
		if c = spopAsSrem(args[0], reply); c == nil {
			return true
		}
	}
	s.aof.append(&aofRecord{timeMs: now, db: st.db, cmds: [][]string{c}})
	return true
}

// popCommands change nothing when they reply null (nothing to pop).
var popCommands = map[string]bool{"LPOP": true, "RPOP": true, "RPOPLPUSH": true, "LMOVE": true,
	"SPOP": true, "ZPOPMIN": true, "ZPOPMAX": true, "LMPOP": true, "ZMPOP": true, "GETDEL": true}

func isNull(raw string) bool {
	return raw == "$-1\r\n" || raw == "*-1\r\n" || raw == "*0\r\n" || raw == "_\r\n"
}

func withCmd(cmd string, args []string) []string {
	return append([]string{cmd}, args...)
}

// exec runs EXEC for a connection and logs the transaction if it ran.
func (s *Server) exec(p *server.Peer, st *connState, args []string) bool {
	queue := st.queue
	st.multi, st.queue = false, nil
	s.orderMu.Lock()
	defer s.orderMu.Unlock()
	now := time.Now().UnixMilli()
	rec := &aofRecord{timeMs: now, db: st.db, multi: true}
	writes := false
	for _, c := range queue {
		if c[0] == "SELECT" {
			rec.cmds = append(rec.cmds, c)
			continue
		}
		lc, ok := s.logForm(now, c)
		if !ok {
			lc = c // unknown script: it fails the same way on replay
		}
		rec.cmds = append(rec.cmds, lc)
		writes = true
	}
	raw, errMsg, _ := s.run(p, "EXEC", args)
	if errMsg != "" || !strings.HasPrefix(raw, "*") || strings.HasPrefix(raw, "*-1") {
		return true // EXECABORT or a failed WATCH: nothing ran
	}
	// Follow the SELECTs the transaction ran.
	for _, c := range queue {
		if c[0] == "SELECT" && len(c) == 2 {
			if n, err := strconv.Atoi(c[1]); err == nil && n >= 0 { // as miniredis checks it
				st.db = n
			}
		}
	}
	if writes {
		s.aof.append(rec)
	}
	return true
}

// run dispatches a client's command on a peer of our own sharing the
// client's connection state, copies the reply to the client and returns it
// raw, with the message of an error reply (errMsg "" when it is not one).
// ok is false when the reply could not be read.
func (s *Server) run(p *server.Peer, cmd string, args []string) (raw, errMsg string, ok bool) {
	var buf bytes.Buffer
	w := bufio.NewWriterSize(&buf, 256) // replies to writes are short
	in := server.NewPeer(w)
	in.Ctx, in.Resp3, in.ClientName = p.Ctx, p.Resp3, p.ClientName
	s.internal.Store(in, struct{}{})
	func() {
		defer s.internal.Delete(in) // also when the command panics
		s.srv.Dispatch(in, withCmd(cmd, args))
	}()
	w.Flush()
	if p.Ctx == nil {
		p.Ctx = in.Ctx // the connection's first command created its state
	}
	raw = buf.String()
	p.WriteRaw(raw)
	if in.Closed() {
		p.Close()
	}
	if strings.HasPrefix(raw, "-") {
		errMsg = strings.TrimRight(raw[1:], "\r\n")
		if errMsg == "" {
			errMsg = "ERR"
		}
	}
	if strings.HasPrefix(raw, "+OK") {
		raw = "+OK"
	}
	return raw, errMsg, raw != ""
}

// worthLogging says whether a command with this error reply (or none)
// may have changed data. Scripts can write before they fail.
func worthLogging(cmd, errMsg string) bool {
	if errMsg == "" {
		return true
	}
	if cmd != "EVAL" && cmd != "EVALSHA" {
		return false
	}
	for _, p := range []string{"NOSCRIPT", "NOAUTH", "WRONGPASS", "ERR Error compiling", "ERR wrong number", "ERR Number of keys", "ERR syntax"} {
		if strings.HasPrefix(errMsg, p) {
			return false
		}
	}
	return true
}

// spopAsSrem turns what SPOP popped (its raw reply) into an SREM.
func spopAsSrem(key, raw string) []string {
	v, err := server.ParseReply(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		return nil
	}
	c := []string{"SREM", key}
	switch v := v.(type) {
	case string:
		c = append(c, v)
	case []any:
		for _, m := range v {
			if s, ok := m.(string); ok {
				c = append(c, s)
			}
		}
	}
	if len(c) == 2 {
		return nil
	}
	return c
}

func (s *Server) rememberScript(body string) {
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	s.scriptMu.Lock()
	s.scripts[sha] = body
	s.scriptMu.Unlock()
}

// logForm is the command as it goes into the log: EVALSHA as EVAL with the
// script body, relative expiries as absolute times (now in unix ms). ok is
// false for an EVALSHA of a script we have not seen, which miniredis does
// not know either (it fails with NOSCRIPT).
func (s *Server) logForm(now int64, c []string) ([]string, bool) {
	if strings.EqualFold(c[0], "EVALSHA") && len(c) > 1 {
		s.scriptMu.Lock()
		body, ok := s.scripts[strings.ToLower(c[1])]
		s.scriptMu.Unlock()
		if !ok {
			return c, false
		}
		out := slices.Clone(c)
		out[0], out[1] = "EVAL", body
		return out, true
	}
	if abs, ok := absoluteExpiry(now, c); ok {
		return abs, true
	}
	return c, true
}

// absoluteExpiry rewrites a command that sets a relative expiry so that it
// sets the same deadline as an absolute time, counted from now (unix ms).
// Commands whose expiry does not parse, or is not positive where Redis
// requires it, are left alone: they fail (or delete) the same way on
// replay.
func absoluteExpiry(now int64, c []string) ([]string, bool) {
	num := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	at := func(n, unit int64) (string, bool) {
		if n > (1<<62)/unit {
			return "", false
		}
		return strconv.FormatInt(now+n*unit, 10), true
	}
	switch strings.ToUpper(c[0]) {
	case "EXPIRE", "PEXPIRE":
		if len(c) < 3 {
			return nil, false
		}
		unit := int64(1)
		if strings.EqualFold(c[0], "EXPIRE") {
			unit = 1000
		}
		n, ok := num(c[2])
		if !ok {
			return nil, false
		}
		t, ok := at(n, unit)
		if !ok {
			return nil, false
		}
		out := append([]string{"PEXPIREAT", c[1], t}, c[3:]...)
		return out, true
	case "SETEX", "PSETEX":
		if len(c) != 4 {
			return nil, false
		}
		unit := int64(1)
		if strings.EqualFold(c[0], "SETEX") {
			unit = 1000
		}
		n, ok := num(c[2])
		if !ok || n <= 0 {
			return nil, false
		}
		t, ok := at(n, unit)
		if !ok {
			return nil, false
		}
		return []string{"SET", c[1], c[3], "PXAT", t}, true
	case "SET", "GETEX":
		first := 3 // SET key value [options]
		if strings.EqualFold(c[0], "GETEX") {
			first = 2
		}
		for i := first; i+1 < len(c); i++ {
			unit := int64(0)
			switch strings.ToUpper(c[i]) {
			case "EX":
				unit = 1000
			case "PX":
				unit = 1
			}
			if unit == 0 {
				continue
			}
			n, ok := num(c[i+1])
			if !ok || n <= 0 {
				return nil, false
			}
			t, ok := at(n, unit)
			if !ok {
				return nil, false
			}
			out := slices.Clone(c)
			out[i], out[i+1] = "PXAT", t
			return out, true
		}
	}
	return nil, false
}

// scriptCall runs before each call a Lua script makes. During a replay it
// makes the script's relative expiries absolute, counted from the time the
// script first ran.
func (s *Server) scriptCall(p *server.Peer, cmd string, args []string) bool {
	t := s.replayMs.Load()
	if t == 0 {
		return false
	}
	abs, ok := absoluteExpiry(t, withCmd(cmd, args))
	if !ok {
		return false
	}
	s.internal.Store(p, struct{}{})
	defer s.internal.Delete(p) // also when the command panics
	s.srv.Dispatch(p, abs)
	return true
}

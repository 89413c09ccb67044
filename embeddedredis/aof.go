package embeddedredis

// The write-ahead log ("append-only file", as Redis calls it) that makes
// the embedded server durable between two snapshots.
//
// Every command that changes data is appended to the log in the order the
// server runs it, before its reply is sent. A background loop writes and
// fsyncs the log every second (Redis's "appendfsync everysec"), so a
// client that does nothing more loses at most about a second of writes on
// a crash. Sync makes everything logged so far durable at once; the control
// node calls it (through SyncHook) before it answers a user, so whatever
// it acknowledged survives kill -9.
//
// Files, in DataDir:
//
//	redis.json       the snapshot; its "aof_gen" is the first log segment
//	                 it does not contain
//	redis.aof.GEN    log segments, GEN a decimal number
//
// A snapshot closes the current segment and opens the next one while no
// write runs, captures the data, writes the snapshot naming the new segment
// and then deletes the older ones; a crash at any point leaves either the
// old snapshot and all segments after it, or the new one and the segments
// it names. Start restores the snapshot, replays the segments from its
// aof_gen on, and (if it replayed anything) writes a snapshot at once.
//
// Record format: a 4-byte little-endian payload length, the payload's
// CRC-32C (4 bytes, little-endian), the payload. Payload: varint time of
// the command (unix ms), uvarint database, one byte (1 = MULTI/EXEC
// group), uvarint number of commands, and per command a uvarint argument
// count and the arguments as uvarint length + bytes. A record holds at
// least one command.
//
// Damage: a record cut short, or whose length, checksum or payload is
// wrong, is told apart by what follows it. If no intact record follows
// (a search of every later byte offset for a length that fits, a matching
// checksum and a payload that decodes), it is a torn tail: the process
// died while writing it, and those writes were never acknowledged. The
// replay of the segment ends there, with a warning, and once the snapshot
// written after the replay holds what was replayed, the segment is renamed
// redis.aof.GEN.torn (kept as evidence, never replayed again) instead of
// deleted. If an intact record follows, the damage is before the tail:
// writes after it may have been acknowledged, so Start fails with
// ErrLogDamaged naming the file and the byte offsets, and deletes and
// writes nothing. Damage to the last record itself cannot be told from a
// torn write. (Until issue 18 any damage ended the replay and the segment
// was deleted; the format did not change.)
//
// What is logged, and how (per client connection, the hook follows SELECT
// and MULTI/EXEC):
//
//   - Writes as run, with relative expiries made absolute (EXPIRE and
//     PEXPIRE become PEXPIREAT, SETEX/PSETEX and SET/GETEX with EX/PX use
//     PXAT), so a replay does not restart a 48 h TTL. Scripts are logged as
//     EVAL with their body (EVALSHA is looked up in the bodies seen through
//     EVAL and SCRIPT LOAD); expiries a script sets are made absolute at
//     replay, from the record's time.
//   - A MULTI/EXEC as one record, only when EXEC ran it (not after DISCARD,
//     a failed WATCH or EXECABORT).
//   - SPOP as the SREM of what it popped.
//   - Not logged: replies that are errors (except from scripts, which may
//     have written before failing), commands from connections that have not
//     authenticated, PUBLISH and other commands that change no data,
//     stream and HyperLogLog commands (the snapshot does not store those
//     types either), and blocking pops (BLPOP and the like, outside
//     MULTI): a job popped that way comes back after a crash, which is a
//     duplicate rather than a loss; ArchiveBot's pipelines do not use them.
//     Randomness and TIME inside scripts are not replayed as they were.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
	"github.com/redis/go-redis/v9"
)

// (miniredis is the patched copy in third_party/miniredis, see its
// PATCHES.md.)

// AOFPrefix starts the names of the log segments in Options.DataDir.
const AOFPrefix = "redis.aof."

// aofSyncInterval is how often the log is written and fsynced in the
// background.
const aofSyncInterval = time.Second

// maxRecord bounds a record's payload, so that a corrupt length is not
// taken for a huge record.
const maxRecord = 1 << 30

// msgLoading is the reply to clients while the log is being replayed.
const msgLoading = "LOADING Redis is loading the dataset in memory"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ---------------------------------------------------------------------------
// Records

type aofRecord struct {
	timeMs int64
	db     int
	multi  bool
	cmds   [][]string
}

func (r *aofRecord) appendTo(out []byte) []byte {
	start := len(out)
	out = append(out, 0, 0, 0, 0, 0, 0, 0, 0)
	out = binary.AppendVarint(out, r.timeMs)
	out = binary.AppendUvarint(out, uint64(r.db))
	if r.multi {
		out = append(out, 1)
	} else {
		out = append(out, 0)
	}
	out = binary.AppendUvarint(out, uint64(len(r.cmds)))
	for _, c := range r.cmds {
		out = binary.AppendUvarint(out, uint64(len(c)))
		for _, a := range c {
			out = binary.AppendUvarint(out, uint64(len(a)))
			out = append(out, a...)
		}
	}
	payload := out[start+8:]
	binary.LittleEndian.PutUint32(out[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[start+4:], crc32.Checksum(payload, crcTable))
	return out
}

var errTorn = errors.New("incomplete or damaged record")

// readRecord reads the next record; io.EOF at a clean end, errTorn (wrapped)
// for a record cut short or damaged.
func readRecord(r *bufio.Reader) (*aofRecord, int, error) {
	var h [8]byte
	n, err := io.ReadFull(r, h[:])
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, n, fmt.Errorf("%w: header: %v", errTorn, err)
	}
	size := binary.LittleEndian.Uint32(h[:])
	if size > maxRecord {
		return nil, n, fmt.Errorf("%w: length %d", errTorn, size)
	}
	payload := make([]byte, size)
	m, err := io.ReadFull(r, payload)
	n += m
	if err != nil {
		return nil, n, fmt.Errorf("%w: payload: %v", errTorn, err)
	}
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, n, fmt.Errorf("%w: checksum", errTorn)
	}
	rec, err := decodePayload(payload)
	if err != nil {
		return nil, n, fmt.Errorf("%w: %v", errTorn, err)
	}
	return rec, n, nil
}

func decodePayload(p []byte) (*aofRecord, error) {
	bad := errors.New("bad payload")
	uv := func() uint64 {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			panic(bad)
		}
		p = p[k:]
		return v
	}
	var rec aofRecord
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = bad
			}
		}()
		t, k := binary.Varint(p)
		if k <= 0 {
			return bad
		}
		p = p[k:]
		rec.timeMs = t
		rec.db = int(uv())
		if len(p) == 0 {
			return bad
		}
		rec.multi = p[0] == 1
		p = p[1:]
		n := uv()
		if n > uint64(len(p)) {
			return bad
		}
		rec.cmds = make([][]string, n)
		for i := range rec.cmds {
			na := uv()
			if na == 0 || na > uint64(len(p)) {
				return bad
			}
			c := make([]string, na)
			for j := range c {
				l := uv()
				if l > uint64(len(p)) {
					return bad
				}
				c[j] = string(p[:l])
				p = p[l:]
			}
			rec.cmds[i] = c
		}
		if len(p) != 0 {
			return bad
		}
		return nil
	}()
	return &rec, err
}

// ---------------------------------------------------------------------------
// The log file

// aofLog is the segment being appended to. Appends go to memory (under
// mu); flush writes them and fsyncs (one flush at a time, under syncMu), so
// concurrent Syncs share one fsync.
type aofLog struct {
	dir string

	mu       sync.Mutex
	buf      []byte
	appended int64 // bytes appended since open, over all segments

	syncMu sync.Mutex // held while writing; guards f, gen, spare, err
	f      *os.File
	gen    int64
	spare  []byte
	err    error // sticky: a failed write leaves the segment unusable
	synced atomic.Int64
}

func segmentPath(dir string, gen int64) string {
	return filepath.Join(dir, AOFPrefix+strconv.FormatInt(gen, 10))
}

// segments lists the log segments in dir, by generation.
func segments(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var gens []int64
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), AOFPrefix)
		if !ok {
			continue
		}
		if g, err := strconv.ParseInt(rest, 10, 64); err == nil && g > 0 {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

func openSegment(dir string, gen int64) (*os.File, error) {
	f, err := os.OpenFile(segmentPath(dir, gen), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *aofLog) append(rec *aofRecord) {
	l.mu.Lock()
	n := len(l.buf)
	l.buf = rec.appendTo(l.buf)
	l.appended += int64(len(l.buf) - n)
	l.mu.Unlock()
}

// flush writes and fsyncs what was appended.
func (l *aofLog) flush() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.flushLocked()
}

func (l *aofLog) flushLocked() error {
	if l.err != nil {
		return l.err
	}
	l.mu.Lock()
	b, target := l.buf, l.appended
	l.buf = l.spare[:0]
	l.mu.Unlock()
	if target <= l.synced.Load() {
		l.spare = b[:0]
		return nil
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = fmt.Errorf("write %s: %w", l.f.Name(), err)
		return l.err
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("fsync %s: %w", l.f.Name(), err)
		return l.err
	}
	l.synced.Store(target)
	l.spare = b[:0]
	return nil
}

// pending says whether something appended is not durable yet.
func (l *aofLog) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended > l.synced.Load()
}

// rotate makes the current segment durable and starts the next one; it
// returns the new generation. No append may run meanwhile (the caller holds
// orderMu). A segment that failed to write is left behind: the snapshot
// taken next covers its data.
func (l *aofLog) rotate() (int64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.flushLocked() // on failure its data is left to the snapshot
	f, err := openSegment(l.dir, l.gen+1)
	if err != nil {
		return 0, err
	}
	l.f.Close()
	l.f, l.gen, l.err = f, l.gen+1, nil
	l.mu.Lock()
	l.buf = l.buf[:0] // after a failed write: covered by the snapshot
	l.synced.Store(l.appended)
	l.mu.Unlock()
	return l.gen, nil
}

func (l *aofLog) close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	err := l.flushLocked()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeBefore deletes the segments older than gen.
func (s *Server) removeSegmentsBefore(gen int64) {
	gens, err := segments(s.dataDir)
	if err != nil {
		s.log.Warn("embedded redis: listing log segments", "err", err)
		return
	}
	for _, g := range gens {
		if g >= gen {
			break
		}
		path := segmentPath(s.dataDir, g)
		if slices.Contains(s.tornSegs, g) {
			// Evidence of a torn write: kept under another name,
			// which segments() does not list.
			if err := os.Rename(path, path+TornSuffix); err != nil {
				s.log.Warn("embedded redis: keeping a torn log segment", "err", err)
			}
			continue
		}
		if err := os.Remove(path); err != nil {
			s.log.Warn("embedded redis: removing an old log segment", "err", err)
		}
	}
}

// ---------------------------------------------------------------------------
// Sync

// Sync makes every write the server has run so far durable: it returns
// once they are in the log on disk. It does nothing without a DataDir, and
// is cheap when nothing is pending; concurrent calls share one fsync.
func (s *Server) Sync(ctx context.Context) error {
	if s.aof == nil || !s.aof.pending() {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.aof.flush() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrNotDurable is wrapped by the error a client sees through SyncHook when
// its command ran but could not be made durable (the log could not be
// written to disk).
var ErrNotDurable = errors.New("embedded redis: the change was made but could not be saved to disk")

// SyncHook returns a go-redis hook that calls Sync after every write
// command and every pipeline with a write of the client it is added to,
// before the caller sees the reply: whatever that client's caller
// acknowledges is durable. Reads do not wait for the disk. A Sync that
// fails turns the reply into an error wrapping ErrNotDurable.
func (s *Server) SyncHook() redis.Hook { return syncHook{s} }

type syncHook struct{ s *Server }

func (h syncHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h syncHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !mayWrite(cmd) {
			return err
		}
		if serr := h.s.Sync(ctx); serr != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrNotDurable, serr)
			cmd.SetErr(err)
		}
		return err
	}
}

func (h syncHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !slices.ContainsFunc(cmds, mayWrite) {
			return err
		}
		if serr := h.s.Sync(ctx); serr != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrNotDurable, serr)
			for _, c := range cmds {
				if c.Err() == nil {
					c.SetErr(err)
				}
			}
		}
		return err
	}
}

// mayWrite says whether a client's command is one the log records.
func mayWrite(cmd redis.Cmder) bool {
	name := strings.ToUpper(cmd.Name())
	return commandClasses[name] != notLogged || name == "EXEC"
}

// syncLoop writes and fsyncs the log every aofSyncInterval.
func (s *Server) syncLoop() {
	s.every(s.syncEvery, "log sync", func() {
		if err := s.aof.flush(); err != nil {
			s.logSyncError(err)
		}
	})
}

func (s *Server) logSyncError(err error) {
	if s.warnedSync.CompareAndSwap(false, true) {
		s.log.Error("embedded redis: writing the log failed; writes are durable again after the next successful snapshot", "err", err)
	}
}

// ---------------------------------------------------------------------------
// The command hook

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

// ---------------------------------------------------------------------------
// Replay

type replayStats struct {
	records, segments int
	tornBytes         int64
	torn              []int64 // segments with a torn tail, kept as evidence
}

// ErrLogDamaged is wrapped by the error of Start when a log segment is
// damaged before its tail: intact records follow the damage, so replaying
// up to it would silently lose writes that were acknowledged. Start then
// deletes nothing (see doc/reliability.md for what the operator can do).
var ErrLogDamaged = errors.New("embedded redis: a log segment is damaged before its end")

// TornSuffix is appended to the name of a log segment whose tail was torn
// (the process died while writing it) once a snapshot holds what was
// replayed of it: the segment is kept as evidence instead of deleted.
const TornSuffix = ".torn"

// scanBudget bounds the bytes findRecord checksums; past it the damage
// is taken as not at the tail (the safe side: the server does not start).
const scanBudget = 4 << 30

// findRecord returns the offset in b of the first intact record (length,
// checksum and payload all valid) at or after offset from, or -1. ok is
// false when the scan gave up (scanBudget).
func findRecord(b []byte, from int) (at int, ok bool) {
	budget := int64(scanBudget)
	for i := from; i+8 <= len(b); i++ {
		size := int(binary.LittleEndian.Uint32(b[i:]))
		if size < 5 || size > len(b)-i-8 {
			continue
		}
		if budget -= int64(size); budget < 0 {
			return -1, false
		}
		payload := b[i+8 : i+8+size]
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[i+4:]) {
			continue
		}
		if rec, err := decodePayload(payload); err == nil && len(rec.cmds) > 0 {
			return i, true
		}
	}
	return -1, true
}

// damageAtTail says whether the bad record at offset off of the open
// segment f is a torn tail (no intact record after it), and if not, the
// offset of the next intact record.
func damageAtTail(f *os.File, off, size int64) (tail bool, next int64, err error) {
	if size-off > maxRecord {
		return false, -1, nil // not a torn write of ours: they are smaller
	}
	b := make([]byte, size-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return false, -1, err
	}
	at, ok := findRecord(b, 1)
	if !ok {
		return false, -1, nil
	}
	if at < 0 {
		return true, -1, nil
	}
	return false, off + int64(at), nil
}

// replay runs the records of the given segments, in order, on a connection
// of our own.
func (s *Server) replay(gens []int64) (replayStats, error) {
	var st replayStats
	c, err := s.localConn()
	if err != nil {
		return st, err
	}
	defer c.close()
	defer s.replayMs.Store(0)
	for _, g := range gens {
		path := segmentPath(s.dataDir, g)
		f, err := os.Open(path)
		if err != nil {
			return st, fmt.Errorf("embedded redis: log %s: %w", path, err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return st, fmt.Errorf("embedded redis: log %s: %w", path, err)
		}
		r := bufio.NewReaderSize(f, 256<<10)
		var off int64
		for {
			rec, n, err := readRecord(r)
			if err == io.EOF {
				break
			}
			if err != nil {
				tail, next, serr := damageAtTail(f, off, info.Size())
				if serr != nil {
					f.Close()
					return st, fmt.Errorf("embedded redis: log %s: %w", path, serr)
				}
				if !tail {
					f.Close()
					where := "the damage cannot be told from a torn write"
					if next >= 0 {
						where = fmt.Sprintf("an intact record follows at byte offset %d", next)
					}
					return st, fmt.Errorf("%w: %s is damaged at byte offset %d (%v), and %s, so records after the damage would be lost; "+
						"not starting, nothing was deleted (doc/reliability.md says how to recover)", ErrLogDamaged, path, off, err, where)
				}
				st.tornBytes += info.Size() - off
				st.torn = append(st.torn, g)
				s.log.Warn("embedded redis: the end of a log segment is torn (the process died while writing it); replayed the records before it, the segment is kept as "+filepath.Base(path)+TornSuffix,
					"file", path, "offset", off, "bytes", info.Size()-off, "err", err)
				break
			}
			off += int64(n)
			s.replayMs.Store(max(rec.timeMs, 1))
			c.send("SELECT", strconv.Itoa(rec.db))
			if rec.multi {
				c.send("MULTI")
			}
			for _, cmd := range rec.cmds {
				if cmd[0] == "EVAL" && len(cmd) > 1 {
					// miniredis caches it: an EVALSHA of it may follow.
					s.rememberScript(cmd[1])
				}
				c.send(cmd...)
			}
			if rec.multi {
				c.send("EXEC")
			}
			st.records++
		}
		f.Close()
		st.segments++
	}
	return st, nil
}

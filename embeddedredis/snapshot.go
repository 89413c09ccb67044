package embeddedredis

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/archiveteam/archivebot-go/third_party/miniredis"
	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
)

// The snapshot file is JSON:
//
//	{
//	  "version": 1,
//	  "saved_at_ms": 1767225600000,           // unix milliseconds
//	  "aof_gen": 7,                           // first log segment not included
//	  "dbs": [
//	    {"db": 0, "keys": [
//	      {"key": "s", "type": "string", "string": "v", "expire_at_ms": 1767225700000},
//	      {"key": "h", "type": "hash",   "hash": {"field": "value"}},
//	      {"key": "l", "type": "list",   "list": ["head", "tail"]},
//	      {"key": "S", "type": "set",    "set": ["a", "b"]},
//	      {"key": "z", "type": "zset",   "zset": [{"member": "m", "score": "1.5"}]},
//	      {"key": "/w==", "encoding": "base64", "type": "string", "string": "AA=="}
//	    ]}
//	  ]
//	}
//
// expire_at_ms is the absolute expiry time (unix milliseconds), absent for
// keys without a TTL. Scores are strings in Go's shortest round-trip format
// ("inf" and "-inf" included), so no precision is lost. When the key or any
// string of an entry is not valid UTF-8 (which JSON cannot carry), the entry
// has "encoding": "base64" and all its strings (key, value, fields, members;
// not scores) are standard base64.
const snapshotVersion = 1

// numDBs is the number of databases the snapshot covers: 0-15, Redis's
// default.
const numDBs = 16

type snapshotFile struct {
	Version   int   `json:"version"`
	SavedAtMs int64 `json:"saved_at_ms"`
	// AOFGen is the first log segment whose writes the snapshot does not
	// hold (see aof.go); absent in snapshots written before the log
	// existed, which replay every segment.
	AOFGen int64        `json:"aof_gen,omitempty"`
	DBs    []snapshotDB `json:"dbs"`
}

type snapshotDB struct {
	DB   int           `json:"db"`
	Keys []snapshotKey `json:"keys"`
}

type snapshotKey struct {
	Key        string            `json:"key"`
	Type       string            `json:"type"`
	Encoding   string            `json:"encoding,omitempty"`
	ExpireAtMs int64             `json:"expire_at_ms,omitempty"`
	String     *string           `json:"string,omitempty"`
	Hash       map[string]string `json:"hash,omitempty"`
	List       []string          `json:"list,omitempty"`
	Set        []string          `json:"set,omitempty"`
	ZSet       []zsetMember      `json:"zset,omitempty"`
}

type zsetMember struct {
	Member string `json:"member"`
	Score  string `json:"score"`
}

const (
	typeString = "string"
	typeHash   = "hash"
	typeList   = "list"
	typeSet    = "set"
	typeZSet   = "zset"
)

func supportedType(t string) bool {
	switch t {
	case typeString, typeHash, typeList, typeSet, typeZSet:
		return true
	}
	return false
}

func (f *snapshotFile) keyCount() int {
	n := 0
	for _, db := range f.DBs {
		n += len(db.Keys)
	}
	return n
}

// ---------------------------------------------------------------------------
// Capture

// capture reads the whole data set. When live, clients may be running
// commands, and the data is read with the server's own commands inside one
// MULTI/EXEC, which miniredis runs under its lock: a point-in-time view
// (with a Lua script as a fallback, see captureLive). When not live, no
// command can run and the data is read through miniredis's direct API. It
// also returns the keys of types it does not store.
func (s *Server) capture(live bool) (*snapshotFile, []string, error) {
	var (
		snap    *snapshotFile
		skipped []string
		err     error
	)
	if live {
		snap, skipped, err = s.captureLive()
	} else {
		snap, skipped = s.captureDirect()
	}
	if err != nil {
		return nil, nil, err
	}
	for i := range snap.DBs {
		for j := range snap.DBs[i].Keys {
			encodeBinary(&snap.DBs[i].Keys[j])
		}
	}
	return snap, skipped, nil
}

// keyType is a key and its type.
type keyType struct{ key, typ string }

// maxTxAttempts is how many times captureLive tries a MULTI/EXEC before it
// falls back to a Lua script.
const maxTxAttempts = 5

// captureLive reads the data set while clients may be running commands.
//
// The fast way is a transaction: the key names and types are read first
// (without a global lock), then one MULTI/EXEC reads, for every database,
// KEYS * and the TTL and value of each key. If the keys seen inside the
// transaction are the ones expected and no key changed type (which would
// make a read fail with WRONGTYPE), the result is a consistent view;
// otherwise it is tried again. If the key set keeps changing, a Lua script
// reads everything in one go: also atomic, but it holds the lock several
// times longer.
func (s *Server) captureLive() (*snapshotFile, []string, error) {
	for range maxTxAttempts {
		snap, skipped, ok, err := s.captureTx(s.listKeys())
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return snap, skipped, nil
		}
	}
	s.log.Debug("embedded redis: key set kept changing during snapshot, using a Lua script")
	return s.captureLua()
}

// listKeys returns the keys and types of every database, sorted by key.
func (s *Server) listKeys() [numDBs][]keyType {
	var out [numDBs][]keyType
	for i := range numDBs {
		db := s.m.DB(i)
		for _, k := range db.Keys() {
			if t := db.Type(k); t != "" { // "" = deleted meanwhile
				out[i] = append(out[i], keyType{k, t})
			}
		}
	}
	return out
}

// readCmd is the command reading a whole value of type t.
func readCmd(t, key string) []string {
	switch t {
	case typeString:
		return []string{"GET", key}
	case typeHash:
		return []string{"HGETALL", key}
	case typeList:
		return []string{"LRANGE", key, "0", "-1"}
	case typeSet:
		return []string{"SMEMBERS", key}
	case typeZSet:
		return []string{"ZRANGE", key, "0", "-1", "WITHSCORES"}
	}
	return nil
}

// captureTx is one attempt of the transaction described at captureLive; ok
// is false when the data changed under it and it should be retried.
func (s *Server) captureTx(guess [numDBs][]keyType) (snap *snapshotFile, skipped []string, ok bool, err error) {
	c, err := s.localConn()
	if err != nil {
		return nil, nil, false, err
	}
	defer c.close()
	c.send("MULTI")
	c.send("TIME")
	for i := range numDBs {
		c.send("SELECT", strconv.Itoa(i))
		c.send("KEYS", "*")
		for _, k := range guess[i] {
			if supportedType(k.typ) {
				c.send("PTTL", k.key)
				c.send(readCmd(k.typ, k.key)...)
			} else {
				c.send("TYPE", k.key) // it may have become a type we store
			}
		}
	}
	reply, err := c.do("EXEC")
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, nil, false, nil // a key changed type: retry
		}
		return nil, nil, false, fmt.Errorf("EXEC: %w", err)
	}
	r := replyReader{items: asArray(reply)}
	t := replyReader{items: asArray(r.next())}
	nowMs, err := parseTime(t.next(), t.next())
	if err != nil {
		return nil, nil, false, err
	}
	snap = &snapshotFile{Version: snapshotVersion, SavedAtMs: nowMs}
	for i := range numDBs {
		r.next() // SELECT's OK
		keys, err := r.strings()
		if err != nil {
			return nil, nil, false, fmt.Errorf("KEYS: %w", err)
		}
		if !sameKeys(keys, guess[i]) {
			return nil, nil, false, nil // keys came or went: retry
		}
		var db snapshotDB
		for _, k := range guess[i] {
			if !supportedType(k.typ) {
				if t, _ := r.next().(server.Simple); string(t) != k.typ {
					return nil, nil, false, nil // changed type: retry
				}
				skipped = append(skipped, k.key)
				continue
			}
			pttl, v := r.next(), r.next()
			sk, keep, err := makeKey(k.key, k.typ, pttl, v, nowMs)
			if err != nil {
				return nil, nil, false, err
			}
			if keep {
				db.Keys = append(db.Keys, sk)
			}
		}
		if len(db.Keys) > 0 {
			db.DB = i
			snap.DBs = append(snap.DBs, db)
		}
	}
	if r.err != nil {
		return nil, nil, false, r.err
	}
	return snap, skipped, true, nil
}

// sameKeys says whether keys (as returned by KEYS) are the keys of guess.
func sameKeys(keys []string, guess []keyType) bool {
	if len(keys) != len(guess) {
		return false
	}
	slices.Sort(keys)
	for i, k := range guess { // guess is sorted (RedisDB.Keys)
		if keys[i] != k.key {
			return false
		}
	}
	return true
}

// dumpScript returns {seconds, microseconds, {db, key, type, pttl, value,
// key, ...}, ...} for every database that has keys; value is false for types
// the snapshot does not store.
const dumpScript = `
local out = {}
local t = redis.call('TIME')
out[1] = t[1]
out[2] = t[2]
for db = 0, 15 do
  redis.call('SELECT', db)
  local keys = redis.call('KEYS', '*')
  if #keys > 0 then
    local d = {db}
    for _, k in ipairs(keys) do
      local ty = redis.call('TYPE', k)['ok']
      local v = false
      if ty == 'string' then v = redis.call('GET', k)
      elseif ty == 'hash' then v = redis.call('HGETALL', k)
      elseif ty == 'list' then v = redis.call('LRANGE', k, 0, -1)
      elseif ty == 'set' then v = redis.call('SMEMBERS', k)
      elseif ty == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
      end
      d[#d + 1] = k
      d[#d + 1] = ty
      d[#d + 1] = redis.call('PTTL', k)
      d[#d + 1] = v
    end
    out[#out + 1] = d
  end
end
return out
`

// captureLua reads the data set with one Lua script, which miniredis runs
// under its lock.
func (s *Server) captureLua() (*snapshotFile, []string, error) {
	c, err := s.localConn()
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	reply, err := c.do("EVAL", dumpScript, "0")
	if err != nil {
		return nil, nil, fmt.Errorf("dump script: %w", err)
	}
	r := replyReader{items: asArray(reply)}
	nowMs, err := parseTime(r.next(), r.next())
	if err != nil {
		return nil, nil, err
	}
	snap := &snapshotFile{Version: snapshotVersion, SavedAtMs: nowMs}
	var skipped []string
	for r.more() {
		d := replyReader{items: asArray(r.next())}
		id, ok := d.next().(int)
		if !ok {
			return nil, nil, errors.New("dump script: bad db number")
		}
		db := snapshotDB{DB: id}
		for d.more() {
			key, _ := d.next().(string)
			typ, _ := d.next().(string)
			pttl, v := d.next(), d.next()
			if !supportedType(typ) {
				skipped = append(skipped, key)
				continue
			}
			sk, keep, err := makeKey(key, typ, pttl, v, nowMs)
			if err != nil {
				return nil, nil, err
			}
			if keep {
				db.Keys = append(db.Keys, sk)
			}
		}
		if d.err != nil {
			return nil, nil, d.err
		}
		if len(db.Keys) > 0 {
			snap.DBs = append(snap.DBs, db)
		}
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return snap, skipped, nil
}

// makeKey builds the snapshot entry of a key from its PTTL and the reply of
// its read command. keep is false if the key is gone.
func makeKey(key, typ string, pttl, v any, nowMs int64) (sk snapshotKey, keep bool, err error) {
	ttl, ok := pttl.(int)
	if !ok {
		return sk, false, fmt.Errorf("key %q: unexpected PTTL reply %v", key, pttl)
	}
	if ttl == -2 || v == nil {
		return sk, false, nil // gone
	}
	sk = snapshotKey{Key: key, Type: typ}
	if ttl >= 0 {
		sk.ExpireAtMs = nowMs + int64(ttl)
	}
	bad := func() (snapshotKey, bool, error) {
		return sk, false, fmt.Errorf("key %q: unexpected %s reply %T", key, typ, v)
	}
	switch typ {
	case typeString:
		str, ok := v.(string)
		if !ok {
			return bad()
		}
		sk.String = &str
	case typeHash:
		items, ok := stringItems(v)
		if !ok || len(items)%2 != 0 {
			return bad()
		}
		sk.Hash = make(map[string]string, len(items)/2)
		for i := 0; i < len(items); i += 2 {
			sk.Hash[items[i]] = items[i+1]
		}
	case typeList:
		if sk.List, ok = stringItems(v); !ok {
			return bad()
		}
	case typeSet:
		if sk.Set, ok = stringItems(v); !ok {
			return bad()
		}
	case typeZSet:
		items, ok := stringItems(v)
		if !ok || len(items)%2 != 0 {
			return bad()
		}
		sk.ZSet = make([]zsetMember, 0, len(items)/2)
		for i := 0; i < len(items); i += 2 {
			f, err := strconv.ParseFloat(items[i+1], 64)
			if err != nil {
				return sk, false, fmt.Errorf("key %q: bad score %q", key, items[i+1])
			}
			sk.ZSet = append(sk.ZSet, zsetMember{Member: items[i], Score: formatScore(f)})
		}
	}
	return sk, true, nil
}

func formatScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func stringItems(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		if out[i], ok = x.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// captureDirect reads the data set through miniredis's direct API. Only for
// when no command can run (after the server stopped): every call takes the
// lock on its own.
func (s *Server) captureDirect() (*snapshotFile, []string) {
	now := time.Now()
	snap := &snapshotFile{Version: snapshotVersion, SavedAtMs: now.UnixMilli()}
	var skipped []string
	for i := range numDBs {
		db := s.m.DB(i)
		sdb := snapshotDB{DB: i}
		for _, k := range db.Keys() {
			t := db.Type(k)
			if !supportedType(t) {
				skipped = append(skipped, k)
				continue
			}
			sk := snapshotKey{Key: k, Type: t}
			if ttl := db.TTL(k); ttl > 0 {
				sk.ExpireAtMs = now.Add(ttl).UnixMilli()
			}
			switch t {
			case typeString:
				v, _ := db.Get(k)
				sk.String = &v
			case typeHash:
				fields, _ := db.HKeys(k)
				sk.Hash = make(map[string]string, len(fields))
				for _, f := range fields {
					sk.Hash[f] = db.HGet(k, f)
				}
			case typeList:
				sk.List, _ = db.List(k)
			case typeSet:
				sk.Set, _ = db.Members(k)
			case typeZSet:
				m, _ := db.SortedSet(k)
				for member, score := range m {
					sk.ZSet = append(sk.ZSet, zsetMember{Member: member, Score: formatScore(score)})
				}
				slices.SortFunc(sk.ZSet, func(a, b zsetMember) int {
					return cmp.Or(cmp.Compare(m[a.Member], m[b.Member]), strings.Compare(a.Member, b.Member))
				})
			}
			sdb.Keys = append(sdb.Keys, sk)
		}
		if len(sdb.Keys) > 0 {
			snap.DBs = append(snap.DBs, sdb)
		}
	}
	return snap, skipped
}

// ---------------------------------------------------------------------------
// In-process connection

// localConn is a client connection that runs commands on the server
// in-process, without a socket: it dispatches them the way a network
// connection does, so they take the same locks.
type localConn struct {
	s    *Server
	srv  *server.Server
	peer *server.Peer
	w    *bufio.Writer
	sink sinkWriter
}

// sinkWriter discards what is written to it unless buf is set.
type sinkWriter struct{ buf *bytes.Buffer }

func (w *sinkWriter) Write(p []byte) (int, error) {
	if w.buf == nil {
		return len(p), nil
	}
	return w.buf.Write(p)
}

func (s *Server) localConn() (*localConn, error) {
	c := &localConn{s: s, srv: s.srv}
	c.w = bufio.NewWriterSize(&c.sink, 64<<10)
	c.peer = server.NewPeer(c.w)
	s.internal.Store(c.peer, struct{}{}) // not logged (see Server.hook)
	if s.password != "" {
		if _, err := c.do("AUTH", s.password); err != nil {
			c.close()
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return c, nil
}

// close forgets the connection.
func (c *localConn) close() { c.s.internal.Delete(c.peer) }

// send runs a command and discards its reply (e.g. QUEUED).
func (c *localConn) send(args ...string) {
	c.srv.Dispatch(c.peer, args)
}

// do runs a command and returns its parsed reply; an error reply is
// returned as an error.
func (c *localConn) do(args ...string) (any, error) {
	c.w.Flush() // the discarded replies of earlier sends
	var buf bytes.Buffer
	c.sink.buf = &buf
	c.srv.Dispatch(c.peer, args)
	c.w.Flush()
	c.sink.buf = nil
	return server.ParseReply(bufio.NewReader(&buf))
}

// replyReader walks the items of an array reply.
type replyReader struct {
	items []any
	err   error
}

func asArray(v any) []any {
	a, _ := v.([]any)
	return a
}

func (r *replyReader) more() bool { return len(r.items) > 0 }

func (r *replyReader) next() any {
	if len(r.items) == 0 {
		if r.err == nil {
			r.err = errors.New("reply shorter than expected")
		}
		return nil
	}
	v := r.items[0]
	r.items = r.items[1:]
	return v
}

func (r *replyReader) strings() ([]string, error) {
	v := r.next()
	if v == nil && r.err != nil {
		return nil, r.err
	}
	out, ok := stringItems(v)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	return out, nil
}

// parseTime turns the two parts of a TIME reply into unix milliseconds.
func parseTime(sec, usec any) (int64, error) {
	ss, ok1 := sec.(string)
	us, ok2 := usec.(string)
	s, err1 := strconv.ParseInt(ss, 10, 64)
	u, err2 := strconv.ParseInt(us, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected TIME reply %v %v", sec, usec)
	}
	return s*1000 + u/1000, nil
}

// ---------------------------------------------------------------------------
// Binary-safe JSON

// encodeBinary switches an entry to base64 when one of its strings is not
// valid UTF-8, which encoding/json would replace by U+FFFD.
func encodeBinary(k *snapshotKey) {
	if allValidUTF8(k) {
		return
	}
	k.Encoding = "base64"
	mapStrings(k, func(s string) (string, error) {
		return base64.StdEncoding.EncodeToString([]byte(s)), nil
	})
}

// decodeBinary undoes encodeBinary.
func decodeBinary(k *snapshotKey) error {
	switch k.Encoding {
	case "":
		return nil
	case "base64":
		k.Encoding = ""
		return mapStrings(k, func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		})
	}
	return fmt.Errorf("unknown encoding %q", k.Encoding)
}

func allValidUTF8(k *snapshotKey) bool {
	v := utf8.ValidString
	if !v(k.Key) || (k.String != nil && !v(*k.String)) {
		return false
	}
	for f, val := range k.Hash {
		if !v(f) || !v(val) {
			return false
		}
	}
	for _, l := range [][]string{k.List, k.Set} {
		for _, x := range l {
			if !v(x) {
				return false
			}
		}
	}
	for _, z := range k.ZSet {
		if !v(z.Member) {
			return false
		}
	}
	return true
}

// mapStrings replaces every string of an entry (except scores) with f's
// result, stopping at the first error.
func mapStrings(k *snapshotKey, f func(string) (string, error)) error {
	var err error
	g := func(s string) string {
		if err != nil {
			return s
		}
		var out string
		out, err = f(s)
		return out
	}
	k.Key = g(k.Key)
	if k.String != nil {
		v := g(*k.String)
		k.String = &v
	}
	if k.Hash != nil {
		h := make(map[string]string, len(k.Hash))
		for f, v := range k.Hash {
			h[g(f)] = g(v)
		}
		k.Hash = h
	}
	for i := range k.List {
		k.List[i] = g(k.List[i])
	}
	for i := range k.Set {
		k.Set[i] = g(k.Set[i])
	}
	for i := range k.ZSet {
		k.ZSet[i].Member = g(k.ZSet[i].Member)
	}
	return err
}

// ---------------------------------------------------------------------------
// File

// writeSnapshotFile writes snap to path atomically: to a temporary file in
// the same directory, synced, renamed over path, and the directory synced
// so that the rename itself survives a crash. It returns the file's size.
func writeSnapshotFile(path string, snap *snapshotFile) (int64, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snap); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	done = true
	return cw.n, syncDir(dir)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// removeStaleTemps removes temporary files left by a save that was
// interrupted by a crash.
func removeStaleTemps(path string, log *slog.Logger) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), filepath.Base(path)+".tmp-*"))
	for _, m := range matches {
		if err := os.Remove(m); err == nil {
			log.Info("embedded redis: removed an unfinished snapshot", "file", m)
		}
	}
}

// readSnapshotFile reads and checks the snapshot at path; (nil, nil) when
// there is none.
func readSnapshotFile(path string) (*snapshotFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("embedded redis: snapshot: %w", err)
	}
	defer f.Close()
	corrupt := func(err error) error {
		return fmt.Errorf("embedded redis: snapshot %s is corrupt (move it away to start with an empty data set): %w", path, err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	var snap snapshotFile
	if err := dec.Decode(&snap); err != nil {
		return nil, corrupt(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt(errors.New("trailing data after the snapshot"))
	}
	if snap.Version != snapshotVersion {
		return nil, corrupt(fmt.Errorf("unsupported version %d (want %d)", snap.Version, snapshotVersion))
	}
	seen := map[int]bool{}
	for i := range snap.DBs {
		db := &snap.DBs[i]
		if db.DB < 0 || db.DB >= numDBs || seen[db.DB] {
			return nil, corrupt(fmt.Errorf("bad or repeated database number %d", db.DB))
		}
		seen[db.DB] = true
		keys := make(map[string]bool, len(db.Keys))
		for j := range db.Keys {
			k := &db.Keys[j]
			if err := decodeBinary(k); err != nil {
				return nil, corrupt(fmt.Errorf("db %d key %q: %w", db.DB, k.Key, err))
			}
			if err := checkKey(k); err != nil {
				return nil, corrupt(fmt.Errorf("db %d key %q: %w", db.DB, k.Key, err))
			}
			if keys[k.Key] {
				return nil, corrupt(fmt.Errorf("db %d: key %q appears twice", db.DB, k.Key))
			}
			keys[k.Key] = true
		}
	}
	return &snap, nil
}

// checkKey checks that an entry has a value of its type, and valid scores.
func checkKey(k *snapshotKey) error {
	var ok bool
	switch k.Type {
	case typeString:
		ok = k.String != nil
	case typeHash:
		ok = len(k.Hash) > 0
	case typeList:
		ok = len(k.List) > 0
	case typeSet:
		ok = len(k.Set) > 0
	case typeZSet:
		ok = len(k.ZSet) > 0
		for _, z := range k.ZSet {
			if f, err := strconv.ParseFloat(z.Score, 64); err != nil || math.IsNaN(f) {
				return fmt.Errorf("bad score %q", z.Score)
			}
		}
	default:
		return fmt.Errorf("unknown type %q", k.Type)
	}
	if !ok {
		return fmt.Errorf("no %s value", k.Type)
	}
	return nil
}

type restoreStats struct{ keys, expired int }

// restoreSnapshot loads a checked snapshot into a fresh miniredis that does
// not serve clients yet. Keys whose expiry time is not after now are left
// out; the others get the time remaining as TTL.
func restoreSnapshot(m *miniredis.Miniredis, snap *snapshotFile, now time.Time) (restoreStats, error) {
	var st restoreStats
	nowMs := now.UnixMilli()
	for _, sdb := range snap.DBs {
		db := m.DB(sdb.DB)
		for _, k := range sdb.Keys {
			if k.ExpireAtMs != 0 && k.ExpireAtMs <= nowMs {
				st.expired++
				continue
			}
			var err error
			switch k.Type {
			case typeString:
				err = db.Set(k.Key, *k.String)
			case typeHash:
				fv := make([]string, 0, 2*len(k.Hash))
				for f, v := range k.Hash {
					fv = append(fv, f, v)
				}
				db.HSet(k.Key, fv...)
			case typeList:
				_, err = db.Push(k.Key, k.List...)
			case typeSet:
				_, err = db.SetAdd(k.Key, k.Set...)
			case typeZSet:
				for _, z := range k.ZSet {
					score, _ := strconv.ParseFloat(z.Score, 64) // checked by checkKey
					if _, err = db.ZAdd(k.Key, score, z.Member); err != nil {
						break
					}
				}
			}
			if err != nil {
				return st, fmt.Errorf("db %d key %q: %w", sdb.DB, k.Key, err)
			}
			if k.ExpireAtMs != 0 {
				db.SetTTL(k.Key, time.Duration(k.ExpireAtMs-nowMs)*time.Millisecond)
			}
			st.keys++
		}
	}
	return st, nil
}

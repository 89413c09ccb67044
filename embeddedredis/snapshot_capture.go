package embeddedredis

// The snapshot (snapshot.go): capture, a consistent copy of the data taken
// while no write runs.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/archiveteam/archivebot-go/third_party/miniredis/server"
)

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
